/* config_node.c — the cfg_node tree itself: allocation, copies, moving a value between nodes,
 * equality, and dotted paths ("arch.hidden_size", "a.list.0") to get and set nodes. Every other
 * stage of config/ builds on these. */

#include "config_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

cfg_node *cfg_new(cfg_type t) {
    cfg_node *n = xcalloc(1, sizeof *n);
    n->type = t;
    return n;
}

void node_clear(cfg_node *n) {
    for (int i = 0; i < n->n; i++) cfg_free(n->items[i]);
    free(n->items);
    free(n->s);
    n->items = NULL;
    n->s = NULL;
    n->n = n->cap = 0;
}

void cfg_free(cfg_node *n) {
    if (!n) return;
    node_clear(n);
    free(n->key);
    free(n->file);
    free(n);
}

void node_push(cfg_node *parent, cfg_node *child) {
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 8;
        parent->items = xrealloc(parent->items, (size_t)parent->cap * sizeof *parent->items);
    }
    parent->items[parent->n++] = child;
}

void node_set_pos(cfg_node *n, const char *file, int line, int col) {
    free(n->file);
    n->file = file ? xstrdup(file) : NULL;
    n->line = line;
    n->col = col;
}

void node_set_pos_tree(cfg_node *n, const char *file) {
    node_set_pos(n, file, 0, 0);
    for (int i = 0; i < n->n; i++) node_set_pos_tree(n->items[i], file);
}

cfg_node *cfg_clone(const cfg_node *n) {
    if (!n) return NULL;
    cfg_node *c = cfg_new(n->type);
    c->b = n->b;
    c->i = n->i;
    c->f = n->f;
    c->s = n->s ? xstrdup(n->s) : NULL;
    c->key = n->key ? xstrdup(n->key) : NULL;
    c->file = n->file ? xstrdup(n->file) : NULL;
    c->line = n->line;
    c->col = n->col;
    for (int i = 0; i < n->n; i++) node_push(c, cfg_clone(n->items[i]));
    return c;
}

/* Moves src's value (and position) into dst, keeping dst's key; frees src. */
void node_take(cfg_node *dst, cfg_node *src) {
    node_clear(dst);
    dst->type = src->type;
    dst->b = src->b;
    dst->i = src->i;
    dst->f = src->f;
    dst->s = src->s;
    dst->items = src->items;
    dst->n = src->n;
    dst->cap = src->cap;
    free(dst->file);
    dst->file = src->file;
    dst->line = src->line;
    dst->col = src->col;
    src->s = NULL;
    src->items = NULL;
    src->n = src->cap = 0;
    src->file = NULL;
    cfg_free(src);
}

int map_index(const cfg_node *m, const char *key) {
    if (!m || m->type != CFG_MAP) return -1;
    for (int i = 0; i < m->n; i++)
        if (m->items[i]->key && strcmp(m->items[i]->key, key) == 0) return i;
    return -1;
}

void node_remove(cfg_node *parent, int idx) {
    cfg_free(parent->items[idx]);
    memmove(parent->items + idx, parent->items + idx + 1,
            (size_t)(parent->n - idx - 1) * sizeof *parent->items);
    parent->n--;
}

size_t node_count(const cfg_node *n) {
    size_t c = 1;
    for (int i = 0; i < n->n; i++) c += node_count(n->items[i]);
    return c;
}

/* With malloc's own overhead (~16 bytes a block), so that the count is what memory holds. */
size_t node_bytes(const cfg_node *n) {
    size_t b = sizeof *n + 16 + (n->key ? strlen(n->key) + 17 : 0) + (n->s ? strlen(n->s) + 17 : 0) +
               (n->file ? strlen(n->file) + 17 : 0) + (size_t)n->cap * sizeof *n->items;
    for (int i = 0; i < n->n; i++) b += node_bytes(n->items[i]);
    return b;
}

int is_scalar(const cfg_node *n) { return n->type != CFG_LIST && n->type != CFG_MAP; }

int cfg_equal(const cfg_node *a, const cfg_node *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type || a->n != b->n) return 0;
    switch (a->type) {
    case CFG_NULL: return 1;
    case CFG_BOOL: return !a->b == !b->b;
    case CFG_INT: return a->i == b->i;
    case CFG_FLOAT: return a->f == b->f || (isnan(a->f) && isnan(b->f));
    case CFG_STR: return strcmp(a->s, b->s) == 0;
    case CFG_LIST:
    case CFG_MAP:
        for (int i = 0; i < a->n; i++) {
            const char *ka = a->items[i]->key, *kb = b->items[i]->key;
            if ((ka || kb) && (!ka || !kb || strcmp(ka, kb) != 0)) return 0;
            if (!cfg_equal(a->items[i], b->items[i])) return 0;
        }
        return 1;
    }
    return 0;
}

/* ---- dotted paths --------------------------------------------------------------------------- */

/* Splits "a.b.c" into components; returns NULL (and *n = 0) on an empty component. */
char **split_dotted(const char *dotted, int *n) {
    int cnt = 1;
    for (const char *p = dotted; *p; p++) cnt += *p == '.';
    char **v = xcalloc((size_t)cnt, sizeof *v);
    const char *start = dotted;
    for (int i = 0; i < cnt; i++) {
        const char *end = strchr(start, '.');
        if (!end) end = start + strlen(start);
        if (end == start) {
            for (int j = 0; j < i; j++) free(v[j]);
            free(v);
            *n = 0;
            return NULL;
        }
        v[i] = xstrndup(start, (size_t)(end - start));
        start = end + 1;
    }
    *n = cnt;
    return v;
}

void free_strv(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

char *join_dotted(char *const *v, int n) {
    trm_sbuf b = {0};
    for (int i = 0; i < n; i++) {
        if (i) sb_putc(&b, '.');
        sb_puts(&b, v[i]);
    }
    return sb_take(&b);
}

/* A list index component: decimal digits only, within range. */
int list_index(const cfg_node *list, const char *comp) {
    if (!*comp || strlen(comp) > 9) return -1;
    for (const char *p = comp; *p; p++)
        if (!isdigit((unsigned char)*p)) return -1;
    int i = atoi(comp);
    return i < list->n ? i : -1;
}

cfg_node *child_of(const cfg_node *n, const char *comp) {
    if (n->type == CFG_MAP) {
        int i = map_index(n, comp);
        return i >= 0 ? n->items[i] : NULL;
    }
    if (n->type == CFG_LIST) {
        int i = list_index(n, comp);
        return i >= 0 ? n->items[i] : NULL;
    }
    return NULL;
}

cfg_node *cfg_get(const cfg_node *root, const char *dotted) {
    if (!root || !dotted) return NULL;
    if (!*dotted) return (cfg_node *)root;
    int n;
    char **comps = split_dotted(dotted, &n);
    const cfg_node *cur = comps ? root : NULL;
    for (int i = 0; i < n && cur; i++) cur = child_of(cur, comps[i]);
    free_strv(comps, n);
    return (cfg_node *)cur;
}

/* Places value at m[key], replacing an existing entry in its position. */
void map_put(cfg_node *m, const char *key, cfg_node *value) {
    free(value->key);
    value->key = xstrdup(key);
    int i = map_index(m, key);
    if (i >= 0) {
        cfg_free(m->items[i]);
        m->items[i] = value;
    } else {
        node_push(m, value);
    }
}

void cfg_set(cfg_node *root, const char *dotted, cfg_node *value) {
    int n;
    char **comps = split_dotted(dotted, &n);
    if (!comps) {
        cfg_free(value);
        return;
    }
    cfg_node *cur = root;
    for (int i = 0; i < n; i++) {
        if (cur->type != CFG_MAP) {
            node_clear(cur);
            cur->type = CFG_MAP;
        }
        if (i == n - 1) {
            map_put(cur, comps[i], value);
            break;
        }
        int j = map_index(cur, comps[i]);
        if (j < 0) {
            cfg_node *m = cfg_new(CFG_MAP);
            m->key = xstrdup(comps[i]);
            node_push(cur, m);
            j = cur->n - 1;
        }
        cur = cur->items[j];
    }
    free_strv(comps, n);
}
