/* config.c — the whole pipeline behind config/config.h: find the primary config, compose its
 * defaults with the command-line group choices, lay a saved run config over it, coerce the
 * schema's float keys, apply the other overrides, resolve the interpolations; for a config a
 * file stores, only the last three. The stages live in config_*.c (config_internal.h lists
 * what they share). */

#include "config_internal.h"

#include <stdlib.h>
#include <string.h>

static void ctx_free(compose_ctx *c) {
    for (int i = 0; i < c->nchoices; i++) {
        free(c->choices[i].group);
        free(c->choices[i].name);
    }
    free(c->choices);
}

/* Collects GROUP=NAME overrides first, so composition uses them wherever the group is. */
static int collect_choices(compose_ctx *c, int nov, char *const *ovs, int *is_choice) {
    c->choices = xcalloc((size_t)nov + 1, sizeof *c->choices);
    for (int i = 0; i < nov; i++) {
        ov_parsed o;
        if (ov_split(ovs[i], &o, c->e)) return -1;
        is_choice[i] = is_group_choice(&c->search, &o);
        if (is_choice[i]) {
            group_choice *g = &c->choices[c->nchoices++];
            g->group = o.key;
            g->name = bare_text(o.value);
            g->override = ovs[i];
            if (!valid_name(g->name)) return trm_errf(c->e, "%s: bad config name", ovs[i]);
        } else {
            free(o.key);
        }
    }
    return 0;
}

static cfg_node *compose_primary(compose_ctx *c, const char *name) {
    int is_path = ends_with(name, ".yaml") || ends_with(name, ".yml");
    if (is_path && trm_file_exists(name)) {
        size_t len;
        char *text = trm_read_file_max(name, CFG_MAX_FILE_BYTES, &len, c->e);
        if (!text) return NULL;
        cfg_node *r = load_text(c, text, len, name, "");
        free(text);
        return r;
    }
    char *rel = is_path ? xstrndup(name, strlen(name) - (ends_with(name, ".yaml") ? 5 : 4))
                        : xstrdup(name);
    size_t len;
    char *disp = NULL, *text = valid_name(rel) ? find_config(&c->search, rel, &disp, &len) : NULL;
    cfg_node *r = NULL;
    if (text) {
        char *gdir = dir_of(rel);
        r = load_text(c, text, len, disp, gdir);
        free(gdir);
    } else {
        cfg_entry *l;
        int n;
        cfg_list(&c->search, &l, &n);
        trm_sbuf b = {0};
        for (int i = 0; i < n; i++) {
            if (strchr(l[i].name, '/')) continue;
            if (b.len) sb_puts(&b, ", ");
            sb_puts(&b, l[i].name);
        }
        cfg_list_free(l, n);
        trm_errf(c->e, "cfg=%s: no such config (available: %s)", name, b.p ? b.p : "none");
        free(b.p);
    }
    free(text);
    free(disp);
    free(rel);
    return r;
}

/* The search for one composition: a config given as a path has its directory searched
 * first for its defaults. Fails on a configured directory that does not exist. */
static int compose_search(compose_ctx *c, const cfg_search *search, const char *name,
                          const char ***dirs, char **pdir) {
    *dirs = xcalloc((size_t)search->ndirs + 1, sizeof **dirs);
    *pdir = NULL;
    int nd = 0;
    if ((ends_with(name, ".yaml") || ends_with(name, ".yml")) && trm_file_exists(name)) {
        *pdir = dir_of(name);
        if (!**pdir) {
            free(*pdir);
            *pdir = xstrdup(".");
        }
        (*dirs)[nd++] = *pdir;
    }
    for (int i = 0; i < search->ndirs; i++) (*dirs)[nd++] = search->dirs[i];
    c->search = *search;
    c->search.ndirs = nd;
    c->search.dirs = *dirs;
    for (int i = 0; i < search->ndirs; i++)
        if (!trm_is_dir(search->dirs[i]))
            return trm_errf(c->e, "config dir '%s' (--config-dir or TRM_CONFIG_PATH) is not a "
                                  "directory", search->dirs[i]);
    return 0;
}

/* Group choices the defaults did not use (the group is only a directory), then the other
 * overrides in order, then interpolation. Frees root on failure. */
static cfg_node *finish(compose_ctx *c, cfg_node *root, int nov, char *const *ovs,
                        const int *is_choice) {
    int rc = 0;
    for (int i = 0; !rc && i < c->nchoices; i++)
        if (!c->choices[i].used) rc = cfg_apply_override(root, &c->search, c->choices[i].override, c->e);
    for (int i = 0; !rc && i < nov; i++)
        if (!is_choice[i]) rc = cfg_apply_override(root, &c->search, ovs[i], c->e);
    if (!rc) rc = cfg_resolve(root, c->e);
    if (rc) {
        cfg_free(root);
        return NULL;
    }
    return root;
}

cfg_node *cfg_compose(const cfg_search *search, const char *cfg_name, int noverrides,
                      char *const *overrides, trm_err *e) {
    return cfg_compose_over(search, cfg_name, NULL, noverrides, overrides, e);
}

cfg_node *cfg_compose_over(const cfg_search *search, const char *cfg_name, cfg_node *overlay, int noverrides,
                           char *const *overrides, trm_err *e) {
    const char *name = cfg_name && *cfg_name ? cfg_name : "cfg_pretrain";
    compose_ctx c = {.e = e};
    const char **dirs;
    char *pdir;
    int *is_choice = xcalloc((size_t)noverrides + 1, sizeof *is_choice);
    cfg_node *root = NULL;
    if (compose_search(&c, search, name, &dirs, &pdir) == 0 &&
        collect_choices(&c, noverrides, overrides, is_choice) == 0)
        root = compose_primary(&c, name);
    if (root && overlay) {
        merge_into(root, overlay);
        overlay = NULL;
    }
    if (root) cfg_coerce_floats(root, search->float_keys);
    if (root) root = finish(&c, root, noverrides, overrides, is_choice);
    cfg_free(overlay);
    free(is_choice);
    ctx_free(&c);
    free(dirs);
    free(pdir);
    if (!root) trm_err_oneline(e); /* messages quote values, which may span lines */
    return root;
}

cfg_node *cfg_from_stored(const char *owner, const char *text, const cfg_search *search, int noverrides,
                          char *const *overrides, trm_err *e) {
    char *name = xasprintf("%s (stored config)", owner);
    cfg_node *cfg = cfg_parse(text, strlen(text), name, e);
    free(name);
    if (!cfg) return trm_err_oneline(e), NULL;
    cfg_coerce_floats(cfg, search->float_keys);
    for (int i = 0; i < noverrides; i++)
        if (cfg_apply_override(cfg, search, overrides[i], e)) {
            cfg_free(cfg);
            return trm_err_oneline(e), NULL;
        }
    if (cfg_resolve(cfg, e)) {
        cfg_free(cfg);
        return trm_err_oneline(e), NULL; /* messages quote values, which may span lines */
    }
    return cfg;
}
