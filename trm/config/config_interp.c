/* config_interp.c — ${…} interpolation as OmegaConf does it, without resolvers: ${a.b} from
 * the top, ${.b} and ${..b} relative to the containing map; a value that is one whole
 * reference takes the referenced node's type; cycles and missing keys are errors that name
 * the chain. */

#include "config_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    cfg_node *root;
    char *stack[CFG_MAX_DEPTH];
    int depth;
    const cfg_node **done; /* resolved strings whose text still holds a literal "${" */
    int ndone;
    trm_err *e;
} resolver;

static int needs_resolve(const resolver *r, const cfg_node *n) {
    if (n->type != CFG_STR || !strstr(n->s, "${")) return 0;
    for (int i = 0; i < r->ndone; i++)
        if (r->done[i] == n) return 0;
    return 1;
}

typedef struct {
    char **v;
    int n;
} path;

static void path_push(path *p, const char *comp) {
    p->v = xrealloc(p->v, (size_t)(p->n + 1) * sizeof *p->v);
    p->v[p->n++] = xstrdup(comp);
}

static void path_free(path *p) {
    free_strv(p->v, p->n);
    p->v = NULL;
    p->n = 0;
}

static path path_copy(const path *p, int n) {
    path c = {0};
    for (int i = 0; i < n && i < p->n; i++) path_push(&c, p->v[i]);
    return c;
}

static int resolve_tree(resolver *r, cfg_node *n, path *at);

static int resolve_str(resolver *r, cfg_node *n, const path *at);

/* Turns the reference "a.b" / ".b" / "..b" (as seen from the node at `at`) into an
 * absolute path, then finds the node, resolving interpolations met on the way. */
static cfg_node *lookup_ref(resolver *r, const path *at, const char *ref, path *abs, const char *who) {
    int dots = 0;
    while (ref[dots] == '.') dots++;
    *abs = path_copy(at, dots ? at->n - (dots - 1) : 0);
    int base = abs->n;
    if (dots - 1 > at->n) {
        trm_errf(r->e, "%s: interpolation '${%s}' goes above the top of the config", who, ref);
        return NULL;
    }
    int n = 0;
    char **comps = ref[dots] ? split_dotted(ref + dots, &n) : NULL;
    if (ref[dots] && !comps) {
        trm_errf(r->e, "%s: bad interpolation '${%s}'", who, ref);
        return NULL;
    }
    cfg_node *cur = r->root;
    for (int i = 0; i < abs->n && cur; i++) cur = child_of(cur, abs->v[i]);
    for (int i = 0; i < n && cur; i++) {
        if (needs_resolve(r, cur)) {
            if (resolve_str(r, cur, abs)) {
                free_strv(comps, n);
                return NULL;
            }
        }
        cur = child_of(cur, comps[i]);
        path_push(abs, comps[i]);
    }
    if (!cur) {
        for (int i = abs->n - base; i < n; i++) path_push(abs, comps[i]); /* name it all */
        char *full = join_dotted(abs->v, abs->n);
        trm_errf(r->e, "%s: interpolation '${%s}' refers to %s, which does not exist", who, ref,
                 *full ? full : "the top");
        free(full);
    }
    free_strv(comps, n);
    return cur;
}

/* Finds the referenced node, fully resolved. */
static cfg_node *resolve_ref(resolver *r, const path *at, const char *ref, const char *who) {
    if (!*ref || strchr(ref, ':') || strchr(ref, '$') || strchr(ref, '{')) {
        trm_errf(r->e, "%s: unsupported interpolation '${%s}' (only ${key}, ${.key} and "
                       "${..key} are supported)", who, ref);
        return NULL;
    }
    path abs = {0};
    cfg_node *t = lookup_ref(r, at, ref, &abs, who);
    int rc = 0;
    if (t && needs_resolve(r, t)) rc = resolve_str(r, t, &abs);
    else if (t && !is_scalar(t)) rc = resolve_tree(r, t, &abs);
    path_free(&abs);
    return rc ? NULL : t;
}

static int push_stack(resolver *r, const char *who) {
    for (int i = 0; i < r->depth; i++) {
        if (strcmp(r->stack[i], who) != 0) continue;
        trm_sbuf b = {0};
        for (int j = i; j < r->depth; j++) {
            sb_puts(&b, r->stack[j]);
            sb_puts(&b, " -> ");
        }
        sb_puts(&b, who);
        trm_errf(r->e, "interpolation cycle: %s", b.p);
        free(b.p);
        return -1;
    }
    if (r->depth == CFG_MAX_DEPTH) return trm_errf(r->e, "%s: interpolation chain too long", who);
    r->stack[r->depth++] = xstrdup(who);
    return 0;
}

/* Builds the new text of s, or (single == whole-string reference) sets *whole. */
static int resolve_text(resolver *r, const char *s, const path *at, const char *who, trm_sbuf *out,
                        cfg_node **whole) {
    const char *p = s;
    while (*p) {
        if (p[0] == '\\' && p[1] == '$' && p[2] == '{') { /* escaped: literal ${ */
            sb_puts(out, "${");
            p += 3;
            continue;
        }
        if (p[0] != '$' || p[1] != '{') {
            sb_putc(out, *p++);
            continue;
        }
        const char *end = strchr(p + 2, '}');
        if (!end) return trm_errf(r->e, "%s: unterminated interpolation in '%s'", who, s);
        char *ref = xstrndup(p + 2, (size_t)(end - p - 2));
        cfg_node *t = resolve_ref(r, at, ref, who);
        free(ref);
        if (!t) return -1;
        if (p == s && !end[1]) {
            *whole = t;
            return 0;
        }
        if (!is_scalar(t))
            return trm_errf(r->e, "%s: cannot put %s into the string '%s'", who,
                            type_with_article(t->type), s);
        scalar_text(out, t);
        p = end + 1;
    }
    return 0;
}

static int resolve_str(resolver *r, cfg_node *n, const path *at) {
    char *who = join_dotted(at->v, at->n);
    if (push_stack(r, who)) {
        free(who);
        return -1;
    }
    trm_sbuf out = {0};
    cfg_node *whole = NULL;
    char *s = xstrdup(n->s);
    path parent = path_copy(at, at->n - 1); /* ${.x} is relative to the containing map */
    int rc = resolve_text(r, s, &parent, who, &out, &whole);
    path_free(&parent);
    if (!rc && whole) {
        cfg_node *c = cfg_clone(whole);
        char *file = n->file ? xstrdup(n->file) : NULL;
        int line = n->line, col = n->col;
        node_take(n, c);
        free(n->file);
        n->file = file;
        n->line = line;
        n->col = col;
    } else if (!rc) {
        free(n->s);
        n->s = sb_take(&out);
    }
    if (!rc && n->type == CFG_STR && strstr(n->s, "${")) {
        r->done = xrealloc(r->done, (size_t)(r->ndone + 1) * sizeof *r->done);
        r->done[r->ndone++] = n;
    }
    free(out.p);
    free(s);
    free(r->stack[--r->depth]);
    free(who);
    return rc;
}

static int resolve_tree(resolver *r, cfg_node *n, path *at) {
    if (n->type == CFG_STR) return needs_resolve(r, n) ? resolve_str(r, n, at) : 0;
    for (int i = 0; i < n->n; i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        path sub = path_copy(at, at->n);
        path_push(&sub, n->type == CFG_MAP ? n->items[i]->key : idx);
        int rc = resolve_tree(r, n->items[i], &sub);
        path_free(&sub);
        if (rc) return -1;
    }
    return 0;
}

int cfg_resolve(cfg_node *root, trm_err *e) {
    resolver r = {.root = root, .e = e};
    path at = {0};
    int rc = resolve_tree(&r, root, &at);
    while (r.depth) free(r.stack[--r.depth]);
    free(r.done);
    return rc;
}
