/* config_interp.c — ${…} interpolation as OmegaConf does it, without resolvers: ${a.b} from
 * the top, ${.b} and ${..b} relative to the containing map; a value that is one whole
 * reference takes the referenced node's type; cycles and missing keys are errors that name
 * the chain. A hostile config costs bounded time and memory: one value may grow to
 * CFG_MAX_VALUE_BYTES and all values made by interpolation to CFG_MAX_EXPANDED_BYTES, checked
 * before anything is copied, and keys are found through a hash index of every map, so a
 * reference costs the same in a map of a million keys as in one of ten. */

#include "config_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* (map, key) -> child for every map of the tree, and the set of resolved strings whose text
 * still holds a literal "${" (key NULL): open addressing, at most half full. */
typedef struct {
    const cfg_node *map;
    const char *key;
    cfg_node *child;
} kslot;

typedef struct {
    kslot *s;
    size_t cap, n;
} kindex;

typedef struct {
    cfg_node *root;
    char *stack[CFG_MAX_DEPTH];
    int depth;
    kindex index;
    size_t expanded;     /* bytes made by interpolation so far */
    const cfg_node *at; /* the value being resolved (innermost), for messages */
    trm_err *e;
} resolver;

static size_t ki_hash(const cfg_node *map, const char *key) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)map;
    for (const unsigned char *p = (const unsigned char *)key; p && *p; p++) h = (h ^ *p) * 1099511628211ull;
    h ^= h >> 29;
    return (size_t)(h * 0xbf58476d1ce4e5b9ull >> 7);
}

static int ki_same(const kslot *s, const cfg_node *map, const char *key) {
    return s->map == map && (s->key == key || (s->key && key && !strcmp(s->key, key)));
}

static kslot *ki_slot(const kindex *x, const cfg_node *map, const char *key) {
    size_t i = ki_hash(map, key) & (x->cap - 1);
    while (x->s[i].map && !ki_same(&x->s[i], map, key)) i = (i + 1) & (x->cap - 1);
    return &x->s[i];
}

static void ki_put(kindex *x, const cfg_node *map, const char *key, cfg_node *child) {
    if (2 * (x->n + 1) > x->cap) {
        kindex old = *x;
        x->cap = old.cap ? 2 * old.cap : 256;
        x->s = xcalloc(x->cap, sizeof *x->s);
        x->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.s[i].map) ki_put(x, old.s[i].map, old.s[i].key, old.s[i].child);
        free(old.s);
    }
    kslot *s = ki_slot(x, map, key);
    if (s->map) return; /* the first of equal keys wins, as map_index finds it */
    *s = (kslot){map, key, child};
    x->n++;
}

static cfg_node *ki_get(const kindex *x, const cfg_node *map, const char *key) {
    if (!x->cap) return NULL;
    kslot *s = ki_slot(x, map, key);
    return s->map ? s->child : NULL;
}

/* Indexes the maps of n's subtree (the whole tree at the start; a copied subtree later). */
static void index_tree(kindex *x, cfg_node *n) {
    for (int i = 0; i < n->n; i++) {
        if (n->type == CFG_MAP && n->items[i]->key) ki_put(x, n, n->items[i]->key, n->items[i]);
        index_tree(x, n->items[i]);
    }
}

/* A child by path component: maps through the index, lists by number. */
static cfg_node *child(const resolver *r, const cfg_node *n, const char *comp) {
    return n->type == CFG_MAP ? ki_get(&r->index, n, comp) : child_of(n, comp);
}

static int needs_resolve(const resolver *r, const cfg_node *n) {
    if (n->type != CFG_STR || !strstr(n->s, "${")) return 0;
    return ki_get(&r->index, n, NULL) == NULL; /* not among the resolved ones */
}

typedef struct {
    char **v;
    int n;
} path;

static void path_push(path *p, const char *comp) {
    if ((p->n & (p->n - 1)) == 0) /* capacity: the next power of two (a reference may have 100k parts) */
        p->v = xrealloc(p->v, (size_t)(p->n ? 2 * p->n : 1) * sizeof *p->v);
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
        trm_errf(r->e, "%s: interpolation '${%.200s}' goes above the top of the config", who, ref);
        return NULL;
    }
    int n = 0;
    char **comps = ref[dots] ? split_dotted(ref + dots, &n) : NULL;
    if (ref[dots] && !comps) {
        trm_errf(r->e, "%s: bad interpolation '${%.200s}'", who, ref);
        return NULL;
    }
    cfg_node *cur = r->root;
    for (int i = 0; i < abs->n && cur; i++) cur = child(r, cur, abs->v[i]);
    for (int i = 0; i < n && cur; i++) {
        if (needs_resolve(r, cur)) {
            if (resolve_str(r, cur, abs)) {
                free_strv(comps, n);
                return NULL;
            }
        }
        cur = child(r, cur, comps[i]);
        path_push(abs, comps[i]);
    }
    if (!cur) {
        for (int i = abs->n - base; i < n; i++) path_push(abs, comps[i]); /* name it all */
        char *full = join_dotted(abs->v, abs->n);
        trm_errf(r->e, "%s: interpolation '${%.200s}' refers to %.200s, which does not exist", who, ref,
                 *full ? full : "the top");
        free(full);
    }
    free_strv(comps, n);
    return cur;
}

/* Finds the referenced node, fully resolved. */
static cfg_node *resolve_ref(resolver *r, const path *at, const char *ref, const char *who) {
    if (!*ref || strchr(ref, ':') || strchr(ref, '$') || strchr(ref, '{')) {
        trm_errf(r->e, "%s: unsupported interpolation '${%.200s}' (only ${key}, ${.key} and "
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

/* "FILE:LINE: KEY" of the value being resolved, for the limits' messages. */
static int limit_err(resolver *r, const char *who, const char *what, size_t limit) {
    const cfg_node *n = r->at;
    if (n && n->file)
        return trm_errf(r->e, "%s:%d: %s: %s %zu MiB (the limit)", n->file, n->line, who, what, limit >> 20);
    return trm_errf(r->e, "%s: %s %zu MiB (the limit)", who, what, limit >> 20);
}

static int too_long(resolver *r, const char *who) {
    return limit_err(r, who, "interpolation makes this value longer than", CFG_MAX_VALUE_BYTES);
}

/* Counts bytes made by interpolation against the limit for the whole config. */
static int add_expanded(resolver *r, size_t bytes, const char *who) {
    if ((r->expanded += bytes) <= CFG_MAX_EXPANDED_BYTES) return 0;
    return limit_err(r, who, "interpolations of the config make more than", CFG_MAX_EXPANDED_BYTES);
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
        if (out->len + (t->type == CFG_STR ? strlen(t->s) : 80) > CFG_MAX_VALUE_BYTES)
            return too_long(r, who);
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
    const cfg_node *outer = r->at;
    r->at = n;
    path parent = path_copy(at, at->n - 1); /* ${.x} is relative to the containing map */
    int rc = resolve_text(r, s, &parent, who, &out, &whole);
    path_free(&parent);
    size_t bytes = whole ? node_bytes(whole) : out.len;
    if (!rc && bytes > CFG_MAX_VALUE_BYTES) rc = too_long(r, who);
    if (!rc) rc = add_expanded(r, bytes, who);
    if (!rc && whole) {
        cfg_node *c = cfg_clone(whole);
        char *file = n->file ? xstrdup(n->file) : NULL;
        int line = n->line, col = n->col;
        node_take(n, c);
        free(n->file);
        n->file = file;
        n->line = line;
        n->col = col;
        index_tree(&r->index, n); /* the copy's maps, for references into it */
    } else if (!rc) {
        free(n->s);
        n->s = sb_take(&out);
    }
    if (!rc && n->type == CFG_STR && strstr(n->s, "${")) ki_put(&r->index, n, NULL, n);
    r->at = outer;
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
    index_tree(&r.index, root);
    path at = {0};
    int rc = resolve_tree(&r, root, &at);
    while (r.depth) free(r.stack[--r.depth]);
    free(r.index.s);
    return rc ? trm_err_oneline(e) : 0; /* messages quote values, which may span lines */
}
