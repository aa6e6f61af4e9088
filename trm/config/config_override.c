/* config_override.c — command-line overrides on a composed tree: `key=value` (checked against
 * the type of the value it replaces), `+key=value` (add), `++key=value` (add or replace),
 * `~key[=value]` (delete) and `GROUP=NAME` (another option of a config group); a key that is
 * not there gets a "did you mean" hint. */

#include "config_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int key_char_ok(unsigned char ch) {
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == '/' || ch == '@' || ch >= 0x80;
}

int ov_split(const char *ov, ov_parsed *o, trm_err *e) {
    const char *p = ov;
    o->kind = OV_SET;
    if (!strncmp(p, "++", 2)) o->kind = OV_FORCE, p += 2;
    else if (*p == '+') o->kind = OV_ADD, p++;
    else if (*p == '~') o->kind = OV_DEL, p++;
    const char *eq = strchr(p, '=');
    if (!eq && o->kind != OV_DEL)
        return trm_errf(e, "override '%s' has no '=' (expected key=value, +key=value, "
                           "++key=value or ~key)", ov);
    size_t klen = eq ? (size_t)(eq - p) : strlen(p);
    if (!klen) return trm_errf(e, "override '%s' has no key", ov);
    for (size_t i = 0; i < klen; i++)
        if (!key_char_ok((unsigned char)p[i]))
            return trm_errf(e, "override '%s': bad character '%c' in the key", ov, p[i]);
    o->key = xstrndup(p, klen);
    int n;
    char **comps = split_dotted(o->key, &n);
    if (!comps) {
        free(o->key);
        o->key = NULL;
        return trm_errf(e, "override '%s': empty component in the key", ov);
    }
    free_strv(comps, n);
    o->value = eq ? eq + 1 : NULL;
    return 0;
}

static const char *closest_key(const cfg_node *m, const char *key) {
    const char *best = NULL;
    size_t bestd = (size_t)-1;
    for (int i = 0; m->type == CFG_MAP && i < m->n; i++) {
        size_t d = trm_edit_distance(key, m->items[i]->key);
        if (d < bestd) bestd = d, best = m->items[i]->key;
    }
    return best;
}

/* Walks comps; on a missing component fills e with the "no such key" message. */
typedef struct {
    cfg_node *parent; /* the container holding the last component */
    cfg_node *node;   /* NULL when the last component is missing */
    int index;        /* of node in parent */
} walk_result;

static int walk(cfg_node *root, char **comps, int n, const char *fullkey, const char *hint,
                walk_result *w, trm_err *e) {
    cfg_node *cur = root;
    for (int i = 0; i < n; i++) {
        if (cur->type != CFG_MAP && cur->type != CFG_LIST) {
            char *at = join_dotted(comps, i);
            trm_errf(e, "%s: %s is %s, not a map", fullkey, at, type_with_article(cur->type));
            free(at);
            return -1;
        }
        int idx = cur->type == CFG_MAP ? map_index(cur, comps[i]) : list_index(cur, comps[i]);
        if (idx < 0) {
            if (cur->type == CFG_LIST)
                return trm_errf(e, "%s: no item %s in the list (it has %d)", fullkey, comps[i], cur->n);
            char *at = join_dotted(comps, i + 1), *pre = join_dotted(comps, i);
            const char *best = closest_key(cur, comps[i]);
            /* a near key first: the typo is the likely case, adding a key the rare one */
            trm_sbuf b = {0};
            if (best) sb_printf(&b, "did you mean %s%s%s? (%s)", pre, *pre ? "." : "", best, hint);
            else sb_puts(&b, hint);
            trm_errf(e, "%s: no such key%s%s in %s; %s", fullkey, i < n - 1 ? " " : "", i < n - 1 ? at : "",
                     cur->file ? cur->file : "the config", b.p);
            free(b.p);
            free(at);
            free(pre);
            return -1;
        }
        if (i == n - 1) {
            w->parent = cur, w->node = cur->items[idx], w->index = idx;
            return 0;
        }
        cur = cur->items[idx];
    }
    w->parent = NULL, w->node = root, w->index = -1; /* n == 0 never happens */
    return 0;
}

/* Trimmed text of a bare value, for string targets: `name=1e-4` stays "1e-4". */
char *bare_text(const char *value) {
    while (*value == ' ' || *value == '\t') value++;
    size_t n = strlen(value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
    return xstrndup(value, n);
}

static int replace_group(cfg_node *root, const cfg_search *s, const char *group, const char *name,
                         const char *ov, trm_err *e) {
    compose_ctx c = {.search = *s, .e = e};
    char *rel = xasprintf("%s/%s", group, name);
    size_t len;
    char *disp = NULL, *text = valid_name(name) ? find_config(s, rel, &disp, &len) : NULL;
    int rc = 0;
    if (!text) {
        rc = group_missing(&c, group, name, ov);
    } else {
        cfg_node *sub = load_text(&c, text, len, disp, group);
        char *place = xstrdup(group); /* nested groups ("a/b") live at a.b */
        for (char *p = place; *p; p++)
            if (*p == '/') *p = '.';
        if (!sub) rc = -1;
        else cfg_set(root, place, sub);
        free(place);
    }
    free(text);
    free(disp);
    free(rel);
    return rc;
}

static int ov_delete(cfg_node *root, const ov_parsed *o, char **comps, int n, trm_err *e) {
    walk_result w;
    char *hint = xasprintf("nothing to delete");
    int rc = walk(root, comps, n, o->key, hint, &w, e);
    free(hint);
    if (rc) return -1;
    if (w.parent->type != CFG_MAP) return trm_errf(e, "~%s: only map keys can be deleted", o->key);
    if (o->value) {
        int bare;
        cfg_node *v = parse_value(o->value, &bare, e);
        if (!v) return trm_err_prefix(e, "~%s", o->key);
        char *text = bare ? bare_text(o->value) : NULL;
        int same = check_type(o->key, w.node, v, text, NULL) == 0 && cfg_equal(w.node, v);
        free(text);
        if (!same) {
            trm_sbuf b = {0};
            describe(&b, w.node);
            trm_errf(e, "~%s=%s: the key holds %s, so it was not deleted", o->key, o->value, b.p);
            free(b.p);
        }
        cfg_free(v);
        if (!same) return -1;
    }
    node_remove(w.parent, w.index);
    return 0;
}

static int ov_add(cfg_node *root, const ov_parsed *o, char **comps, int n, cfg_node *v, trm_err *e) {
    cfg_node *cur = root;
    for (int i = 0; i < n - 1; i++) {
        cfg_node *next = child_of(cur, comps[i]);
        if (!next) {
            if (cur->type != CFG_MAP) break;
            next = cfg_new(CFG_MAP);
            node_set_pos(next, CMDLINE, 0, 0);
            map_put(cur, comps[i], next);
        }
        cur = next;
    }
    if (cur->type == CFG_LIST) {
        int idx = list_index(cur, comps[n - 1]);
        if (idx >= 0 && o->kind == OV_FORCE) {
            node_take(cur->items[idx], v);
            return 0;
        }
        cfg_free(v);
        return trm_errf(e, "%s: list items can only be changed by index, not added", o->key);
    }
    if (cur->type != CFG_MAP) {
        cfg_free(v);
        return trm_errf(e, "%s: the parent is %s, not a map", o->key, type_with_article(cur->type));
    }
    int idx = map_index(cur, comps[n - 1]);
    if (idx >= 0 && o->kind == OV_ADD) {
        cfg_free(v);
        return trm_errf(e, "%s: already exists in %s; use %s=... to change it or ++%s=... to "
                           "force", o->key, cur->file ? cur->file : "the config", o->key, o->key);
    }
    if (idx >= 0) node_take(cur->items[idx], v);
    else map_put(cur, comps[n - 1], v);
    return 0;
}

static int ov_set(cfg_node *root, const ov_parsed *o, char **comps, int n, cfg_node *v, int bare,
                  trm_err *e) {
    walk_result w;
    char *hint = xasprintf("+%s=... adds it as a new key", o->key);
    int rc = walk(root, comps, n, o->key, hint, &w, e);
    free(hint);
    if (rc) {
        cfg_free(v);
        return -1;
    }
    char *text = bare ? bare_text(o->value) : NULL;
    rc = check_type(o->key, w.node, v, text, e);
    free(text);
    if (rc) {
        cfg_free(v);
        return -1;
    }
    node_take(w.node, v);
    return 0;
}

/* A plain `GROUP=NAME` override choosing a config group option. */
int is_group_choice(const cfg_search *s, const ov_parsed *o) {
    if (o->kind != OV_SET || strchr(o->key, '.') || !s || !cfg_is_group(s, o->key)) return 0;
    const char *v = o->value;
    return *v && !strchr("[{'\" ", *v) && !is_null_text(v);
}

int cfg_apply_override(cfg_node *root, const cfg_search *search, const char *ov, trm_err *e) {
    ov_parsed o;
    if (ov_split(ov, &o, e)) return trm_err_oneline(e);
    int n, rc;
    char **comps = split_dotted(o.key, &n);
    if (root->type != CFG_MAP) {
        rc = trm_errf(e, "%s: the config is not a map", ov);
    } else if (o.kind == OV_DEL) {
        rc = ov_delete(root, &o, comps, n, e);
    } else if (is_group_choice(search, &o)) {
        char *name = bare_text(o.value);
        rc = replace_group(root, search, o.key, name, ov, e);
        free(name);
    } else {
        int bare;
        cfg_node *v = parse_value(o.value, &bare, e);
        if (!v) rc = trm_err_prefix(e, "%s", ov);
        else if (o.kind == OV_SET) rc = ov_set(root, &o, comps, n, v, bare, e);
        else rc = ov_add(root, &o, comps, n, v, e);
    }
    free_strv(comps, n);
    free(o.key);
    return rc ? trm_err_oneline(e) : 0; /* messages quote values, which may span lines */
}
