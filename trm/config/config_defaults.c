/* config_defaults.c — hydra's `defaults:` lists: a config file is parsed, the entries of its
 * defaults (`- NAME`, `- GROUP: NAME`, `- _self_`) are loaded recursively and merged in order,
 * and a GROUP=NAME given on the command line replaces the option a file names. */

#include "config_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *key;
    int idx;
} keyed;

static int keyed_cmp(const void *a, const void *b) {
    return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key);
}

/* dst's keys sorted, for merging a big map in n log n rather than n * m (NULL when small). */
static keyed *sorted_keys(const cfg_node *dst, const cfg_node *src) {
    if ((size_t)dst->n * (size_t)src->n < 4096) return NULL; /* a scan is cheaper */
    keyed *k = xmalloc((size_t)dst->n * sizeof *k);
    for (int i = 0; i < dst->n; i++) k[i] = (keyed){dst->items[i]->key, i};
    qsort(k, (size_t)dst->n, sizeof *k, keyed_cmp);
    return k;
}

/* Where src's key is in dst (the first of dst's keys before the merge), or -1; *entry: its
 * place in sorted, whose key must follow a replaced child's. */
static int find_key(const cfg_node *dst, keyed *sorted, int nsorted, const char *key, keyed **entry) {
    *entry = NULL;
    if (!sorted) {
        for (int i = 0; i < nsorted; i++)
            if (!strcmp(dst->items[i]->key, key)) return i;
        return -1;
    }
    const keyed want = {key, 0};
    keyed *hit = bsearch(&want, sorted, (size_t)nsorted, sizeof *sorted, keyed_cmp);
    while (hit && hit > sorted && !strcmp(hit[-1].key, key)) hit--; /* the first, as map_index */
    *entry = hit;
    return hit ? hit->idx : -1;
}

/* Merges src's keys into the map dst (recursively for map-onto-map); consumes src. src's keys
 * are distinct (the parser and the overrides see to that), so keys new to dst never meet each
 * other and dst's keys before the merge are all a key of src can match. */
void merge_into(cfg_node *dst, cfg_node *src) {
    int nsorted = dst->n;
    keyed *sorted = sorted_keys(dst, src), *entry;
    for (int i = 0; i < src->n; i++) {
        cfg_node *c = src->items[i];
        src->items[i] = NULL;
        int j = find_key(dst, sorted, nsorted, c->key, &entry);
        if (j < 0)
            node_push(dst, c);
        else if (dst->items[j]->type == CFG_MAP && c->type == CFG_MAP)
            merge_into(dst->items[j], c);
        else {
            cfg_free(dst->items[j]);
            dst->items[j] = c;
            if (entry) entry->key = c->key; /* the old key was freed with its node */
        }
    }
    free(sorted);
    src->n = 0;
    cfg_free(src);
}

/* Merges map src at the dotted place in dst (maps created on the way); consumes src. */
static void merge_at(cfg_node *dst, const char *dotted, cfg_node *src) {
    cfg_node *cur = dst;
    int n;
    char **comps = split_dotted(dotted, &n);
    for (int i = 0; i < n; i++) {
        int j = map_index(cur, comps[i]);
        if (j >= 0 && cur->items[j]->type == CFG_MAP) {
            cur = cur->items[j];
            continue;
        }
        cfg_node *m = i == n - 1 ? src : cfg_new(CFG_MAP);
        if (i == n - 1) src = NULL;
        else node_set_pos(m, src->file, 0, 0);
        map_put(cur, comps[i], m);
        cur = m;
    }
    if (src) merge_into(cur, src);
    free_strv(comps, n);
}

char *dir_of(const char *rel) {
    const char *slash = strrchr(rel, '/');
    return slash ? xstrndup(rel, (size_t)(slash - rel)) : xstrdup("");
}

/* Entries are relative to the loading config's group; a leading '/' means the top. */
static char *rel_to(const char *gdir, const char *name) {
    if (*name == '/') return xstrdup(name + 1);
    return *gdir ? xasprintf("%s/%s", gdir, name) : xstrdup(name);
}

static int defaults_err(compose_ctx *c, const cfg_node *item, const char *what) {
    return trm_errf(c->e, "%s:%d:%d: %s", item->file ? item->file : "?", item->line, item->col, what);
}

static const char *group_choice_for(compose_ctx *c, const char *group, const char *dflt) {
    for (int i = 0; i < c->nchoices; i++)
        if (!strcmp(c->choices[i].group, group)) {
            c->choices[i].used = 1;
            return c->choices[i].name;
        }
    return dflt;
}

int group_missing(compose_ctx *c, const char *group, const char *name, const char *where) {
    char *opts = group_options(&c->search, group);
    trm_errf(c->e, "%s: no option '%s' in config group %s (available: %s)", where, name, group,
             opts ? opts : "none");
    free(opts);
    return -1;
}

/* One `- GROUP: NAME` entry: loads GROUP/NAME and merges it under the key GROUP. */
static int defaults_group(compose_ctx *c, cfg_node *result, const cfg_node *item, const char *gdir) {
    const cfg_node *v = item->items[0];
    const char *k = v->key;
    int optional = !strncmp(k, "optional ", 9);
    if (optional) k += 9;
    if (!strncmp(k, "override ", 9))
        return defaults_err(c, item, "'override' entries in defaults are not supported; "
                                     "choose the group option on the command line (GROUP=NAME)");
    if (v->type == CFG_NULL) return 0;
    if (v->type != CFG_STR && v->type != CFG_INT)
        return defaults_err(c, item, "a defaults entry GROUP: NAME needs a config name");
    char *vtext = v->type == CFG_STR ? xstrdup(v->s) : xasprintf("%" PRId64, v->i);
    char *group = rel_to(gdir, k);
    const char *choice = group_choice_for(c, group, vtext);
    char *rel = xasprintf("%s/%s", group, choice);
    int rc = 0;
    size_t len;
    char *disp = NULL, *text = valid_name(group) && valid_name(choice)
                                   ? find_config(&c->search, rel, &disp, &len) : NULL;
    if (text) {
        cfg_node *sub = load_text(c, text, len, disp, group);
        if (!sub) rc = -1;
        else {
            char *place = xstrdup(*k == '/' ? k + 1 : k);
            for (char *p = place; *p; p++)
                if (*p == '/') *p = '.';
            merge_at(result, place, sub);
            free(place);
        }
    } else if (!optional) {
        char *where = choice != vtext ? xasprintf("%s=%s", group, choice)
                                      : xasprintf("%s:%d:%d", item->file, item->line, item->col);
        rc = group_missing(c, group, choice, where);
        free(where);
    }
    free(text);
    free(disp);
    free(rel);
    free(group);
    free(vtext);
    return rc;
}

/* One `- NAME` entry: loads NAME (relative to the group) and merges it at this level. */
static int defaults_plain(compose_ctx *c, cfg_node *result, const cfg_node *item, const char *gdir) {
    char *rel = rel_to(gdir, item->s);
    size_t len;
    char *disp = NULL, *text = valid_name(rel) ? find_config(&c->search, rel, &disp, &len) : NULL;
    int rc = 0;
    if (!text) {
        char *msg = xasprintf("no config '%s' (no %s.yaml in the config directories or built in)",
                              item->s, rel);
        rc = defaults_err(c, item, msg);
        free(msg);
    } else {
        char *sub_gdir = dir_of(rel);
        cfg_node *sub = load_text(c, text, len, disp, sub_gdir);
        free(sub_gdir);
        if (sub) merge_into(result, sub);
        else rc = -1;
    }
    free(text);
    free(disp);
    free(rel);
    return rc;
}

/* Runs the `defaults:` list of a parsed config (already stripped of `defaults`). */
static int run_defaults(compose_ctx *c, cfg_node *result, const cfg_node *defaults, cfg_node **own,
                        const char *gdir) {
    int self_done = 0;
    for (int i = 0; i < defaults->n; i++) {
        const cfg_node *item = defaults->items[i];
        if (item->type == CFG_STR && !strcmp(item->s, "_self_")) {
            if (self_done) return defaults_err(c, item, "_self_ appears twice in defaults");
            merge_into(result, *own);
            *own = NULL;
            self_done = 1;
        } else if (item->type == CFG_STR) {
            if (defaults_plain(c, result, item, gdir)) return -1;
        } else if (item->type == CFG_MAP && item->n == 1) {
            if (defaults_group(c, result, item, gdir)) return -1;
        } else {
            return defaults_err(c, item, "bad defaults entry (expected '- NAME', '- GROUP: NAME' "
                                         "or '- _self_')");
        }
    }
    return 0;
}

/* Parses and composes one config file; gdir is its group directory ("" at the top). */
cfg_node *load_text(compose_ctx *c, const char *text, size_t len, const char *disp, const char *gdir) {
    for (int i = 0; i < c->depth; i++)
        if (!strcmp(c->stack[i], disp)) {
            trm_errf(c->e, "%s: defaults cycle (%s is already being loaded)", disp, disp);
            return NULL;
        }
    if (c->depth == CFG_MAX_DEFAULTS_DEPTH) {
        trm_errf(c->e, "%s: defaults nested too deeply", disp);
        return NULL;
    }
    if (++c->nloads > CFG_MAX_DEFAULTS_LOADS) {
        trm_errf(c->e, "%s: composing the config loads more than %d files (the limit; do defaults lists name "
                       "the same configs again and again?)", disp, CFG_MAX_DEFAULTS_LOADS);
        return NULL;
    }
    cfg_node *own = cfg_parse(text, len, disp, c->e);
    if (!own) return NULL;
    if (own->type == CFG_NULL) {
        own->type = CFG_MAP;
    } else if (own->type != CFG_MAP) {
        trm_errf(c->e, "%s: the top level must be a map, not %s", disp, type_with_article(own->type));
        cfg_free(own);
        return NULL;
    }
    int hi = map_index(own, "hydra");
    if (hi >= 0) node_remove(own, hi);
    cfg_node *defaults = NULL;
    int di = map_index(own, "defaults");
    if (di >= 0) {
        defaults = own->items[di];
        memmove(own->items + di, own->items + di + 1, (size_t)(own->n - di - 1) * sizeof *own->items);
        own->n--;
    }
    cfg_node *result = cfg_new(CFG_MAP);
    node_set_pos(result, disp, 1, 1);
    int rc = 0;
    if (defaults && defaults->type != CFG_LIST && defaults->type != CFG_NULL) {
        rc = trm_errf(c->e, "%s:%d:%d: defaults must be a list", disp, defaults->line, defaults->col);
    } else if (defaults && defaults->type == CFG_LIST) {
        c->stack[c->depth++] = xstrdup(disp);
        rc = run_defaults(c, result, defaults, &own, gdir);
        free(c->stack[--c->depth]);
    }
    if (!rc && own) merge_into(result, own); /* no _self_: own content last (hydra >= 1.1) */
    else cfg_free(own);
    cfg_free(defaults);
    if (rc) {
        cfg_free(result);
        return NULL;
    }
    return result;
}
