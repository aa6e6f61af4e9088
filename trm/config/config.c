/* config.c — the configuration tree: YAML/JSON parsing (libyaml) with source positions,
 * OmegaConf-style scalar typing, hydra-style composition of `defaults:`, command-line
 * overrides with type checks, ${…} interpolation, typed getters and YAML output.
 * Listing config directories (for `trm config list` and group detection) also lives here,
 * since it is only ever needed to find configs. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CFG_MAX_DEPTH 200         /* nesting limit: hostile input must not blow the stack */
#define CFG_MAX_ALIASED 200000    /* nodes copied by aliases ("billion laughs") */
#define CFG_MAX_DEFAULTS_DEPTH 32 /* defaults chains deeper than this are surely cycles */
#define CMDLINE "<command line>"

/* ---- text (util/strbuf.h) ------------------------------------------------------------- */

static void sb_indent(trm_sbuf *b, int n) {
    for (int i = 0; i < n; i++) sb_putc(b, ' ');
}

/* ---- nodes --------------------------------------------------------------------------------- */

cfg_node *cfg_new(cfg_type t) {
    cfg_node *n = xcalloc(1, sizeof *n);
    n->type = t;
    return n;
}

static void node_clear(cfg_node *n) {
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

static void node_push(cfg_node *parent, cfg_node *child) {
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 8;
        parent->items = xrealloc(parent->items, (size_t)parent->cap * sizeof *parent->items);
    }
    parent->items[parent->n++] = child;
}

static void node_set_pos(cfg_node *n, const char *file, int line, int col) {
    free(n->file);
    n->file = file ? xstrdup(file) : NULL;
    n->line = line;
    n->col = col;
}

static void node_set_pos_tree(cfg_node *n, const char *file) {
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
static void node_take(cfg_node *dst, cfg_node *src) {
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

static int map_index(const cfg_node *m, const char *key) {
    if (!m || m->type != CFG_MAP) return -1;
    for (int i = 0; i < m->n; i++)
        if (m->items[i]->key && strcmp(m->items[i]->key, key) == 0) return i;
    return -1;
}

static void node_remove(cfg_node *parent, int idx) {
    cfg_free(parent->items[idx]);
    memmove(parent->items + idx, parent->items + idx + 1,
            (size_t)(parent->n - idx - 1) * sizeof *parent->items);
    parent->n--;
}

static size_t node_count(const cfg_node *n) {
    size_t c = 1;
    for (int i = 0; i < n->n; i++) c += node_count(n->items[i]);
    return c;
}

const char *cfg_type_name(cfg_type t) {
    switch (t) {
    case CFG_NULL: return "null";
    case CFG_BOOL: return "bool";
    case CFG_INT: return "int";
    case CFG_FLOAT: return "float";
    case CFG_STR: return "string";
    case CFG_LIST: return "list";
    case CFG_MAP: return "map";
    }
    return "?";
}

static const char *type_with_article(cfg_type t) {
    switch (t) {
    case CFG_NULL: return "null";
    case CFG_BOOL: return "a bool";
    case CFG_INT: return "an int";
    case CFG_FLOAT: return "a float";
    case CFG_STR: return "a string";
    case CFG_LIST: return "a list";
    case CFG_MAP: return "a map";
    }
    return "?";
}

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

/* ---- scalar typing (OmegaConf's YAML resolver, minus timestamps and yes/no) -------------- */

static int is_null_text(const char *s) {
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static int bool_text(const char *s) {
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return 1;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return 0;
    return -1;
}

static int is_int_text(const char *s) {
    if (*s == '+' || *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s)) s++;
    return *s == 0;
}

static int is_word3(const char *s, const char *lower, const char *title, const char *upper) {
    return !strcmp(s, lower) || !strcmp(s, title) || !strcmp(s, upper);
}

/* 0: not a float; 1: finite float text; 2: +inf; 3: -inf; 4: nan */
static int float_text_kind(const char *s) {
    const char *p = s;
    int neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    const char *q = *p == '.' ? p + 1 : p;
    if (is_word3(q, "inf", "Inf", "INF")) return neg ? 3 : 2;
    if (p == s && is_word3(q, "nan", "NaN", "NAN")) return 4;
    int digits = 0, dot = 0, exp = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.') {
        dot = 1;
        for (p++; isdigit((unsigned char)*p); p++) digits++;
    }
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
        exp = 1;
    }
    return *p == 0 && (dot || exp) ? 1 : 0;
}

static cfg_type plain_type(const char *s) {
    if (is_null_text(s)) return CFG_NULL;
    if (bool_text(s) >= 0) return CFG_BOOL;
    if (is_int_text(s)) return CFG_INT;
    if (float_text_kind(s)) return CFG_FLOAT;
    return CFG_STR;
}

cfg_node *cfg_scalar(const char *text) {
    cfg_type t = plain_type(text);
    cfg_node *n = cfg_new(t);
    switch (t) {
    case CFG_BOOL: n->b = bool_text(text); break;
    case CFG_INT:
        errno = 0;
        n->i = strtoll(text, NULL, 10);
        if (errno == ERANGE) { /* beyond int64: keep the magnitude as a float */
            n->type = CFG_FLOAT;
            n->f = strtod(text, NULL);
        }
        break;
    case CFG_FLOAT: {
        int k = float_text_kind(text);
        n->f = k == 2 ? INFINITY : k == 3 ? -INFINITY : k == 4 ? NAN : strtod(text, NULL);
        break;
    }
    case CFG_STR: n->s = xstrdup(text); break;
    default: break;
    }
    return n;
}

static cfg_node *new_str(const char *s) {
    cfg_node *n = cfg_new(CFG_STR);
    n->s = xstrdup(s);
    return n;
}

/* ---- text forms of scalars --------------------------------------------------------------- */

void cfg_format_float(double v, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? ".inf" : "-.inf");
        return;
    }
    /* Python's repr (what OmegaConf users see): the fewest digits that read back exactly,
     * positional for exponents -4..15, then YAML's float form: "1.0", "1.0e-30". */
    char sci[64], fix[64];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, v);
        if (strtod(sci, NULL) == v) break;
    }
    snprintf(sci, sizeof sci, "%.*e", p - 1, v);
    char *e = strchr(sci, 'e');
    int exp = atoi(e + 1);
    if (exp >= -4 && exp < 16) {
        snprintf(fix, sizeof fix, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, v);
        if (strtod(fix, NULL) == v) {
            snprintf(buf, size, "%s%s", fix, strchr(fix, '.') ? "" : ".0");
            return;
        }
    }
    *e = 0;
    snprintf(buf, size, "%s%se%s", sci, strchr(sci, '.') ? "" : ".0", e + 1);
}

/* Text of a scalar as substituted into a longer string by interpolation. */
static void scalar_text(trm_sbuf *b, const cfg_node *n) {
    char tmp[80];
    switch (n->type) {
    case CFG_NULL: sb_puts(b, "null"); break;
    case CFG_BOOL: sb_puts(b, n->b ? "true" : "false"); break;
    case CFG_INT:
        snprintf(tmp, sizeof tmp, "%" PRId64, n->i);
        sb_puts(b, tmp);
        break;
    case CFG_FLOAT:
        cfg_format_float(n->f, tmp, sizeof tmp);
        sb_puts(b, tmp);
        break;
    case CFG_STR: sb_puts(b, n->s); break;
    default: break;
    }
}

/* ---- YAML output ---------------------------------------------------------------------------- */

static int is_scalar(const cfg_node *n) { return n->type != CFG_LIST && n->type != CFG_MAP; }

/* Quoting is needed when the plain text would re-parse as another type (also for other
 * YAML 1.1 readers: yes/no/on/off), would be YAML syntax, or holds control characters. */
/* Characters that libyaml reads as line breaks (NEL, LS, PS) or drops (BOM) even inside
 * quotes: they get escapes. Returns the byte length of such a sequence at p, else 0. */
static int special_seq(const unsigned char *p, const char **esc) {
    if (p[0] == 0xc2 && p[1] == 0x85) return *esc = "\\N", 2;
    if (p[0] == 0xe2 && p[1] == 0x80 && p[2] == 0xa8) return *esc = "\\L", 3;
    if (p[0] == 0xe2 && p[1] == 0x80 && p[2] == 0xa9) return *esc = "\\P", 3;
    if (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) return *esc = "\\uFEFF", 3;
    return 0;
}

static int needs_escapes(const char *s) {
    const char *esc;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || special_seq(p, &esc)) return 1;
    return 0;
}

static int needs_quote(const char *s, int flow) {
    if (!*s || plain_type(s) != CFG_STR) return 1;
    static const char *yaml11_bools[] = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
                                         "on", "On", "ON", "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof yaml11_bools / sizeof *yaml11_bools; i++)
        if (!strcmp(s, yaml11_bools[i])) return 1;
    if (strchr("-?:,[]{}#&*!|>'\"%@` \t", s[0])) return 1;
    size_t len = strlen(s);
    if (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == ':') return 1;
    if (strstr(s, ": ") || strstr(s, " #")) return 1;
    for (const unsigned char *p = (const unsigned char *)s; flow && *p; p++)
        if (strchr(",[]{}:#", *p)) return 1;
    return needs_escapes(s);
}

static void write_quoted(trm_sbuf *b, const char *s) {
    if (!needs_escapes(s)) {
        sb_putc(b, '\'');
        for (const char *p = s; *p; p++) {
            if (*p == '\'') sb_putc(b, '\'');
            sb_putc(b, *p);
        }
        sb_putc(b, '\'');
        return;
    }
    sb_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        const char *esc;
        int n = special_seq(p, &esc);
        if (n) {
            sb_puts(b, esc);
            p += n - 1;
        } else if (*p == '"' || *p == '\\') {
            sb_putc(b, '\\');
            sb_putc(b, (char)*p);
        } else if (*p == '\n') {
            sb_puts(b, "\\n");
        } else if (*p == '\t') {
            sb_puts(b, "\\t");
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", *p);
            sb_puts(b, tmp);
        } else {
            sb_putc(b, (char)*p);
        }
    }
    sb_putc(b, '"');
}

static void write_str(trm_sbuf *b, const char *s, int flow) {
    if (needs_quote(s, flow))
        write_quoted(b, s);
    else
        sb_puts(b, s);
}

static void write_scalar(trm_sbuf *b, const cfg_node *n, int flow) {
    if (n->type == CFG_STR)
        write_str(b, n->s, flow);
    else
        scalar_text(b, n);
}

/* Lists print in flow style when they hold only scalars, empty maps and such lists. */
static int flowable(const cfg_node *n) {
    if (n->type == CFG_MAP) return n->n == 0;
    if (n->type != CFG_LIST) return 1;
    for (int i = 0; i < n->n; i++)
        if (!flowable(n->items[i])) return 0;
    return 1;
}

static void write_flow(trm_sbuf *b, const cfg_node *n) {
    if (n->type == CFG_MAP) {
        sb_puts(b, "{}");
    } else if (n->type == CFG_LIST) {
        sb_putc(b, '[');
        for (int i = 0; i < n->n; i++) {
            if (i) sb_puts(b, ", ");
            write_flow(b, n->items[i]);
        }
        sb_putc(b, ']');
    } else {
        write_scalar(b, n, 1);
    }
}

static void write_list_block(trm_sbuf *b, const cfg_node *n, int indent);

/* `inline_first`: the first key continues a "- " already written. */
static void write_map_block(trm_sbuf *b, const cfg_node *n, int indent, int inline_first) {
    for (int i = 0; i < n->n; i++) {
        const cfg_node *c = n->items[i];
        if (i || !inline_first) sb_indent(b, indent);
        write_str(b, c->key ? c->key : "", 0);
        sb_putc(b, ':');
        if (c->type == CFG_MAP && c->n) {
            sb_putc(b, '\n');
            write_map_block(b, c, indent + 2, 0);
        } else if (c->type == CFG_LIST && !flowable(c)) {
            sb_putc(b, '\n');
            write_list_block(b, c, indent + 2);
        } else {
            sb_putc(b, ' ');
            write_flow(b, c);
            sb_putc(b, '\n');
        }
    }
}

static void write_list_block(trm_sbuf *b, const cfg_node *n, int indent) {
    for (int i = 0; i < n->n; i++) {
        const cfg_node *c = n->items[i];
        sb_indent(b, indent);
        sb_putc(b, '-');
        if (c->type == CFG_MAP && c->n) {
            sb_putc(b, ' ');
            write_map_block(b, c, indent + 2, 1);
        } else if (c->type == CFG_LIST && !flowable(c)) {
            sb_putc(b, '\n');
            write_list_block(b, c, indent + 2);
        } else {
            sb_putc(b, ' ');
            write_flow(b, c);
            sb_putc(b, '\n');
        }
    }
}

char *cfg_to_yaml(const cfg_node *n) {
    trm_sbuf b = {0};
    if (n->type == CFG_MAP && n->n)
        write_map_block(&b, n, 0, 0);
    else if (n->type == CFG_LIST && !flowable(n))
        write_list_block(&b, n, 0);
    else {
        write_flow(&b, n);
        sb_putc(&b, '\n');
    }
    return sb_take(&b);
}

void cfg_write_yaml(const cfg_node *n, FILE *f) {
    char *s = cfg_to_yaml(n);
    fputs(s, f);
    free(s);
}

/* ---- YAML / JSON parsing --------------------------------------------------------------------- */

typedef struct {
    char *name;
    const cfg_node *node;
} yanchor;

typedef struct {
    yaml_parser_t p;
    const char *file;
    const char *text;
    size_t len;
    yanchor *anchors;
    int nanchors, capanchors;
    size_t aliased;
    trm_err *e;
} yparse;

static int y_error(yparse *y) {
    yaml_parser_t *p = &y->p;
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_READER_ERROR) { /* encoding errors only know the byte offset */
        size_t line = 1, col = 1;
        for (size_t i = 0; i < p->problem_offset && i < y->len; i++, col++)
            if (y->text[i] == '\n') line++, col = 0;
        return trm_errf(y->e, "%s:%zu:%zu: %s (byte %zu)", y->file, line, col, problem,
                        p->problem_offset);
    }
    if (p->context)
        return trm_errf(y->e, "%s:%zu:%zu: %s (%s at line %zu, column %zu)", y->file,
                        p->problem_mark.line + 1, p->problem_mark.column + 1, problem, p->context,
                        p->context_mark.line + 1, p->context_mark.column + 1);
    return trm_errf(y->e, "%s:%zu:%zu: %s", y->file, p->problem_mark.line + 1,
                    p->problem_mark.column + 1, problem);
}

static int y_next(yparse *y, yaml_event_t *ev) {
    if (!yaml_parser_parse(&y->p, ev)) return y_error(y);
    return 0;
}

static int y_errf(yparse *y, const yaml_event_t *ev, const char *what) {
    return trm_errf(y->e, "%s:%zu:%zu: %s", y->file, ev->start_mark.line + 1,
                    ev->start_mark.column + 1, what);
}

static void y_add_anchor(yparse *y, const yaml_char_t *name, const cfg_node *n) {
    if (!name) return;
    if (y->nanchors == y->capanchors) {
        y->capanchors = y->capanchors ? 2 * y->capanchors : 8;
        y->anchors = xrealloc(y->anchors, (size_t)y->capanchors * sizeof *y->anchors);
    }
    y->anchors[y->nanchors].name = xstrdup((const char *)name);
    y->anchors[y->nanchors++].node = n;
}

static cfg_node *y_scalar(const yaml_event_t *ev) {
    char *text = xstrndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
    const char *tag = (const char *)ev->data.scalar.tag;
    int is_str = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
                 (tag && (!strcmp(tag, "tag:yaml.org,2002:str") || !strcmp(tag, "!!str")));
    cfg_node *n = is_str ? new_str(text) : cfg_scalar(text);
    free(text);
    return n;
}

static cfg_node *y_node(yparse *y, yaml_event_t *ev, int depth);

static int y_seq(yparse *y, cfg_node *n, int depth) {
    for (;;) {
        yaml_event_t ev;
        if (y_next(y, &ev)) return -1;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        cfg_node *c = y_node(y, &ev, depth + 1);
        if (!c) return -1;
        node_push(n, c);
    }
}

static int key_cmp(const void *a, const void *b) {
    return strcmp((*(cfg_node *const *)a)->key, (*(cfg_node *const *)b)->key);
}

/* Sorting finds duplicates in n log n, which matters for big JSON headers. */
static int y_check_dups(yparse *y, const cfg_node *m) {
    cfg_node **v = xmalloc((size_t)m->n * sizeof *v);
    memcpy(v, m->items, (size_t)m->n * sizeof *v);
    qsort(v, (size_t)m->n, sizeof *v, key_cmp);
    int rc = 0;
    for (int i = 1; i < m->n && !rc; i++) {
        if (strcmp(v[i - 1]->key, v[i]->key) != 0) continue;
        const cfg_node *later = v[i]->line > v[i - 1]->line ||
                                (v[i]->line == v[i - 1]->line && v[i]->col > v[i - 1]->col) ? v[i] : v[i - 1];
        rc = trm_errf(y->e, "%s:%d:%d: duplicate key '%s'", y->file, later->line, later->col,
                      later->key);
    }
    free(v);
    return rc;
}

static int y_map(yparse *y, cfg_node *n, int depth) {
    for (;;) {
        yaml_event_t ev;
        if (y_next(y, &ev)) return -1;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return n->n > 1 ? y_check_dups(y, n) : 0;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            y_errf(y, &ev, "map keys must be scalars");
            yaml_event_delete(&ev);
            return -1;
        }
        char *key = xstrndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        int kline = (int)ev.start_mark.line + 1, kcol = (int)ev.start_mark.column + 1;
        yaml_event_delete(&ev);
        if (y_next(y, &ev)) {
            free(key);
            return -1;
        }
        cfg_node *v = y_node(y, &ev, depth + 1);
        if (!v) {
            free(key);
            return -1;
        }
        v->key = key;
        /* a value's position is its key's, which is what a reader looks for */
        node_set_pos(v, y->file, kline, kcol);
        node_push(n, v);
    }
}

/* Consumes *ev (the node's first event) and the events of the node's children. */
static cfg_node *y_node(yparse *y, yaml_event_t *ev, int depth) {
    if (depth > CFG_MAX_DEPTH) {
        y_errf(y, ev, "nesting too deep");
        yaml_event_delete(ev);
        return NULL;
    }
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    cfg_node *n = NULL;
    char *anchor = NULL;
    int rc = 0;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        n = y_scalar(ev);
        if (ev->data.scalar.anchor) anchor = xstrdup((const char *)ev->data.scalar.anchor);
        yaml_event_delete(ev);
        break;
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (int i = y->nanchors - 1; i >= 0 && !n; i--)
            if (!strcmp(y->anchors[i].name, name)) {
                if ((y->aliased += node_count(y->anchors[i].node)) > CFG_MAX_ALIASED) break;
                n = cfg_clone(y->anchors[i].node);
                free(n->key);
                n->key = NULL;
            }
        if (!n) y_errf(y, ev, y->aliased > CFG_MAX_ALIASED ? "too many nodes (alias expansion)"
                                                           : "unknown alias");
        yaml_event_delete(ev);
        if (!n) return NULL;
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        int is_seq = ev->type == YAML_SEQUENCE_START_EVENT;
        const yaml_char_t *a = is_seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
        if (a) anchor = xstrdup((const char *)a);
        yaml_event_delete(ev);
        n = cfg_new(is_seq ? CFG_LIST : CFG_MAP);
        node_set_pos(n, y->file, line, col);
        rc = is_seq ? y_seq(y, n, depth) : y_map(y, n, depth);
        break;
    }
    default:
        y_errf(y, ev, "unexpected YAML event");
        yaml_event_delete(ev);
        return NULL;
    }
    if (rc) {
        cfg_free(n);
        free(anchor);
        return NULL;
    }
    if (!n->file) node_set_pos(n, y->file, line, col);
    y_add_anchor(y, (const yaml_char_t *)anchor, n);
    free(anchor);
    return n;
}

static int y_expect(yparse *y, yaml_event_type_t t, const char *what) {
    yaml_event_t ev;
    if (y_next(y, &ev)) return -1;
    int rc = 0;
    if (ev.type != t) rc = y_errf(y, &ev, what);
    yaml_event_delete(&ev);
    return rc;
}

static cfg_node *y_document(yparse *y) {
    if (y_expect(y, YAML_STREAM_START_EVENT, "expected the start of a YAML stream")) return NULL;
    yaml_event_t ev;
    if (y_next(y, &ev)) return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) { /* empty file (or only comments) */
        yaml_event_delete(&ev);
        cfg_node *m = cfg_new(CFG_MAP);
        node_set_pos(m, y->file, 1, 1);
        return m;
    }
    int is_doc = ev.type == YAML_DOCUMENT_START_EVENT;
    if (!is_doc) y_errf(y, &ev, "expected a YAML document");
    yaml_event_delete(&ev);
    if (!is_doc || y_next(y, &ev)) return NULL;
    cfg_node *root = y_node(y, &ev, 0);
    if (!root) return NULL;
    if (y_expect(y, YAML_DOCUMENT_END_EVENT, "expected the end of the document") ||
        y_expect(y, YAML_STREAM_END_EVENT, "only one YAML document is supported")) {
        cfg_free(root);
        return NULL;
    }
    return root;
}

cfg_node *cfg_parse(const char *text, size_t len, const char *name, trm_err *e) {
    yparse y;
    memset(&y, 0, sizeof y);
    y.file = name ? name : "<string>";
    y.text = text;
    y.len = len;
    y.e = e;
    if (!yaml_parser_initialize(&y.p)) {
        trm_errf(e, "%s: cannot initialise the YAML parser", y.file);
        return NULL;
    }
    yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
    cfg_node *root = y_document(&y);
    yaml_parser_delete(&y.p);
    for (int i = 0; i < y.nanchors; i++) free(y.anchors[i].name);
    free(y.anchors);
    return root;
}

/* ---- dotted paths and getters --------------------------------------------------------------- */

/* Splits "a.b.c" into components; returns NULL (and *n = 0) on an empty component. */
static char **split_dotted(const char *dotted, int *n) {
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

static void free_strv(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static char *join_dotted(char *const *v, int n) {
    trm_sbuf b = {0};
    for (int i = 0; i < n; i++) {
        if (i) sb_putc(&b, '.');
        sb_puts(&b, v[i]);
    }
    return sb_take(&b);
}

/* A list index component: decimal digits only, within range. */
static int list_index(const cfg_node *list, const char *comp) {
    if (!*comp || strlen(comp) > 9) return -1;
    for (const char *p = comp; *p; p++)
        if (!isdigit((unsigned char)*p)) return -1;
    int i = atoi(comp);
    return i < list->n ? i : -1;
}

static cfg_node *child_of(const cfg_node *n, const char *comp) {
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

/* "string 'abc'", "float 2.5", "a list", ... for error messages. */
static void describe(trm_sbuf *b, const cfg_node *n) {
    if (n->type == CFG_LIST || n->type == CFG_MAP) {
        sb_puts(b, type_with_article(n->type));
        return;
    }
    sb_puts(b, cfg_type_name(n->type));
    if (n->type == CFG_NULL) return;
    sb_putc(b, ' ');
    if (n->type == CFG_STR) sb_putc(b, '\'');
    scalar_text(b, n);
    if (n->type == CFG_STR) sb_putc(b, '\'');
}

static int wrong_type(trm_err *e, const char *key, cfg_type want, const cfg_node *got) {
    trm_sbuf b = {0};
    describe(&b, got);
    trm_errf(e, "%s: expected %s, got %s", key, type_with_article(want), b.p);
    free(b.p);
    return -1;
}

static const cfg_node *get_or_err(const cfg_node *root, const char *key, trm_err *e) {
    const cfg_node *n = cfg_get(root, key);
    if (!n) trm_errf(e, "%s: missing config key", key);
    return n;
}

int cfg_get_int(const cfg_node *root, const char *key, int64_t *out, trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type != CFG_INT) return wrong_type(e, key, CFG_INT, n);
    *out = n->i;
    return 0;
}

int cfg_get_float(const cfg_node *root, const char *key, double *out, trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type == CFG_INT) {
        *out = (double)n->i;
        return 0;
    }
    if (n->type != CFG_FLOAT) return wrong_type(e, key, CFG_FLOAT, n);
    *out = n->f;
    return 0;
}

int cfg_get_bool(const cfg_node *root, const char *key, int *out, trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type != CFG_BOOL) return wrong_type(e, key, CFG_BOOL, n);
    *out = n->b;
    return 0;
}

int cfg_get_str(const cfg_node *root, const char *key, const char **out, int allow_null,
                trm_err *e) {
    const cfg_node *n = get_or_err(root, key, e);
    if (!n) return -1;
    if (n->type == CFG_NULL && allow_null) {
        *out = NULL;
        return 0;
    }
    if (n->type != CFG_STR) return wrong_type(e, key, CFG_STR, n);
    *out = n->s;
    return 0;
}

/* Places value at m[key], replacing an existing entry in its position. */
static void map_put(cfg_node *m, const char *key, cfg_node *value) {
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

/* ---- finding configs ---------------------------------------------------------------------- */

/* Names of configs and groups: relative, no "..", no leading '/', printable. */
static int valid_name(const char *s) {
    if (!*s || *s == '/' || strstr(s, "..")) return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == 0x7f || *p == '\\') return 0;
    return 1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Reads configs REL.yaml from the first search location that has it. */
static char *find_config(const cfg_search *s, const char *rel, char **display, size_t *len) {
    char *file = xasprintf("%s.yaml", rel);
    char *text = NULL;
    for (int i = 0; i < s->ndirs && !text; i++) {
        char *path = trm_path_join(s->dirs[i], file);
        if (trm_file_exists(path) && !trm_is_dir(path)) {
            text = trm_read_file(path, len, NULL);
            if (text) *display = xstrdup(path);
        }
        free(path);
    }
    if (!text && s->use_embedded) {
        const char *emb = cfg_embedded_lookup(file, len);
        if (emb) {
            text = xstrndup(emb, *len);
            *display = xasprintf("configs/%s", file);
        }
    }
    free(file);
    return text;
}

typedef struct {
    cfg_entry *v;
    int n, cap;
} entry_list;

static void entries_add(entry_list *l, const char *name, const char *source) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name)) return; /* first search location wins */
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n].name = xstrdup(name);
    l->v[l->n++].source = xstrdup(source);
}

static void scan_dir(entry_list *l, const char *root, const char *rel, int depth) {
    char *dir = *rel ? trm_path_join(root, rel) : xstrdup(root);
    DIR *d = depth < 8 ? opendir(dir) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *sub = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
        char *full = trm_path_join(root, sub);
        if (trm_is_dir(full)) {
            scan_dir(l, root, sub, depth + 1);
        } else if (ends_with(sub, ".yaml")) {
            sub[strlen(sub) - 5] = 0;
            entries_add(l, sub, root);
        }
        free(full);
        free(sub);
    }
    if (d) closedir(d);
    free(dir);
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const cfg_entry *)a)->name, ((const cfg_entry *)b)->name);
}

int cfg_list(const cfg_search *s, cfg_entry **out, int *n) {
    entry_list l = {0};
    for (int i = 0; i < s->ndirs; i++) scan_dir(&l, s->dirs[i], "", 0);
    for (size_t i = 0; s->use_embedded && cfg_embedded_name(i); i++) {
        char *name = xstrdup(cfg_embedded_name(i));
        if (ends_with(name, ".yaml")) {
            name[strlen(name) - 5] = 0;
            entries_add(&l, name, "embedded");
        }
        free(name);
    }
    if (l.n) qsort(l.v, (size_t)l.n, sizeof *l.v, entry_cmp);
    *out = l.v;
    *n = l.n;
    return 0;
}

void cfg_list_free(cfg_entry *l, int n) {
    for (int i = 0; i < n; i++) {
        free(l[i].name);
        free(l[i].source);
    }
    free(l);
}

/* The options of a group as "a, b, c" (NULL when the group has none). */
static char *group_options(const cfg_search *s, const char *group) {
    cfg_entry *l;
    int n;
    cfg_list(s, &l, &n);
    trm_sbuf b = {0};
    size_t gl = strlen(group);
    for (int i = 0; i < n; i++) {
        const char *name = l[i].name;
        if (strncmp(name, group, gl) || name[gl] != '/' || strchr(name + gl + 1, '/')) continue;
        if (b.len) sb_puts(&b, ", ");
        sb_puts(&b, name + gl + 1);
    }
    cfg_list_free(l, n);
    return b.p;
}

int cfg_is_group(const cfg_search *s, const char *name) {
    if (!valid_name(name)) return 0;
    for (int i = 0; i < s->ndirs; i++) {
        char *p = trm_path_join(s->dirs[i], name);
        int d = trm_is_dir(p);
        free(p);
        if (d) return 1;
    }
    size_t nl = strlen(name);
    for (size_t i = 0; s->use_embedded && cfg_embedded_name(i); i++)
        if (!strncmp(cfg_embedded_name(i), name, nl) && cfg_embedded_name(i)[nl] == '/') return 1;
    return 0;
}

/* ---- composition ----------------------------------------------------------------------------- */

typedef struct {
    char *group; /* "arch" */
    char *name;  /* "foo" */
    const char *override; /* the command-line word, for messages */
    int used;
} group_choice;

typedef struct {
    cfg_search search;
    group_choice *choices;
    int nchoices;
    char *stack[CFG_MAX_DEFAULTS_DEPTH];
    int depth;
    trm_err *e;
} compose_ctx;

/* Merges src's keys into the map dst (recursively for map-onto-map); consumes src. */
static void merge_into(cfg_node *dst, cfg_node *src) {
    for (int i = 0; i < src->n; i++) {
        cfg_node *c = src->items[i];
        src->items[i] = NULL;
        int j = map_index(dst, c->key);
        if (j < 0)
            node_push(dst, c);
        else if (dst->items[j]->type == CFG_MAP && c->type == CFG_MAP)
            merge_into(dst->items[j], c);
        else {
            cfg_free(dst->items[j]);
            dst->items[j] = c;
        }
    }
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

static cfg_node *load_text(compose_ctx *c, const char *text, size_t len, const char *disp,
                           const char *gdir);

static char *dir_of(const char *rel) {
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

static int group_missing(compose_ctx *c, const char *group, const char *name, const char *where) {
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
static cfg_node *load_text(compose_ctx *c, const char *text, size_t len, const char *disp,
                           const char *gdir) {
    for (int i = 0; i < c->depth; i++)
        if (!strcmp(c->stack[i], disp)) {
            trm_errf(c->e, "%s: defaults cycle (%s is already being loaded)", disp, disp);
            return NULL;
        }
    if (c->depth == CFG_MAX_DEFAULTS_DEPTH) {
        trm_errf(c->e, "%s: defaults nested too deeply", disp);
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

/* ---- overrides --------------------------------------------------------------------------------- */

typedef enum { OV_SET, OV_ADD, OV_FORCE, OV_DEL } ov_kind;

typedef struct {
    ov_kind kind;
    char *key;
    const char *value; /* into the override string; NULL for a bare ~key */
} ov_parsed;

static int key_char_ok(unsigned char ch) {
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == '/' || ch == '@' || ch >= 0x80;
}

static int ov_split(const char *ov, ov_parsed *o, trm_err *e) {
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

/* Hydra's value grammar (the part we need): scalars typed like YAML, 'quoted' and
 * "quoted" strings, [lists], {maps}, nested. */
typedef struct {
    const char *s;
    size_t pos;
    int depth;
    trm_err *e;
} vparse;

static void vp_ws(vparse *v) {
    while (v->s[v->pos] == ' ' || v->s[v->pos] == '\t') v->pos++;
}

static cfg_node *vp_value(vparse *v, int in_container);

static cfg_node *vp_quoted(vparse *v) {
    char q = v->s[v->pos++];
    trm_sbuf b = {0};
    for (;;) {
        char ch = v->s[v->pos];
        if (!ch) {
            free(b.p);
            trm_errf(v->e, "unterminated %c-quoted string", q);
            return NULL;
        }
        v->pos++;
        if (ch == q) break;
        if (ch == '\\' && (v->s[v->pos] == q || v->s[v->pos] == '\\')) ch = v->s[v->pos++];
        sb_putc(&b, ch);
    }
    char *text = sb_take(&b);
    cfg_node *n = new_str(text);
    free(text);
    return n;
}

static cfg_node *vp_bare(vparse *v, int in_container, const char *stops) {
    size_t start = v->pos;
    int braces = 0;
    for (;;) {
        char ch = v->s[v->pos];
        if (!ch) break;
        if (ch == '$' && v->s[v->pos + 1] == '{') {
            braces++;
            v->pos += 2;
            continue;
        }
        if (braces && ch == '}') braces--;
        else if (!braces && in_container && strchr(stops, ch)) break;
        v->pos++;
    }
    size_t end = v->pos;
    while (end > start && (v->s[end - 1] == ' ' || v->s[end - 1] == '\t')) end--;
    char *text = xstrndup(v->s + start, end - start);
    cfg_node *n = cfg_scalar(text);
    free(text);
    return n;
}

static int vp_expect_sep(vparse *v, char close) {
    vp_ws(v);
    char ch = v->s[v->pos];
    if (ch == ',') {
        v->pos++;
        return 0;
    }
    if (ch == close) return 1;
    return ch ? trm_errf(v->e, "unexpected '%c' at offset %zu", ch, v->pos)
              : trm_errf(v->e, "missing '%c'", close);
}

static cfg_node *vp_list(vparse *v) {
    cfg_node *l = cfg_new(CFG_LIST);
    v->pos++;
    for (vp_ws(v); v->s[v->pos] != ']';) {
        cfg_node *item = vp_value(v, 1);
        if (!item) goto fail;
        node_push(l, item);
        int r = vp_expect_sep(v, ']');
        if (r < 0) goto fail;
        if (r == 1) break;
        vp_ws(v);
    }
    v->pos++;
    return l;
fail:
    cfg_free(l);
    return NULL;
}

static cfg_node *vp_map(vparse *v) {
    cfg_node *m = cfg_new(CFG_MAP);
    v->pos++;
    for (vp_ws(v); v->s[v->pos] != '}';) {
        cfg_node *k = v->s[v->pos] == '\'' || v->s[v->pos] == '"' ? vp_quoted(v) : vp_bare(v, 1, ":,]}");
        if (!k) goto fail;
        vp_ws(v);
        if (v->s[v->pos] != ':') {
            cfg_free(k);
            trm_errf(v->e, "expected ':' after a map key at offset %zu", v->pos);
            goto fail;
        }
        v->pos++;
        trm_sbuf kb = {0};
        scalar_text(&kb, k);
        cfg_free(k);
        char *key = sb_take(&kb);
        cfg_node *val = vp_value(v, 1);
        if (val && map_index(m, key) >= 0) {
            trm_errf(v->e, "duplicate key '%s'", key);
            cfg_free(val);
            val = NULL;
        }
        if (!val) {
            free(key);
            goto fail;
        }
        val->key = key;
        node_push(m, val);
        int r = vp_expect_sep(v, '}');
        if (r < 0) goto fail;
        if (r == 1) break;
        vp_ws(v);
    }
    v->pos++;
    return m;
fail:
    cfg_free(m);
    return NULL;
}

static cfg_node *vp_value(vparse *v, int in_container) {
    if (++v->depth > CFG_MAX_DEPTH) {
        trm_errf(v->e, "value nested too deeply");
        return NULL;
    }
    vp_ws(v);
    char ch = v->s[v->pos];
    cfg_node *n;
    if (ch == '[') n = vp_list(v);
    else if (ch == '{') n = vp_map(v);
    else if (ch == '\'' || ch == '"') n = vp_quoted(v);
    else n = vp_bare(v, in_container, ",]}");
    v->depth--;
    return n;
}

/* Parses an override's value; *bare says it was an unquoted scalar (its text is kept
 * verbatim when the target key holds a string). */
static cfg_node *parse_value(const char *text, int *bare, trm_err *e) {
    vparse v = {text, 0, 0, e};
    vp_ws(&v);
    char ch = text[v.pos];
    *bare = ch != '[' && ch != '{' && ch != '\'' && ch != '"';
    cfg_node *n = vp_value(&v, 0);
    if (!n) return NULL;
    if (*bare && n->type == CFG_NULL && !text[strspn(text, " \t")]) { /* `key=`: '' as in hydra */
        cfg_free(n);
        n = new_str("");
    }
    vp_ws(&v);
    if (text[v.pos]) {
        trm_errf(e, "unexpected text after the value at offset %zu: '%s'", v.pos, text + v.pos);
        cfg_free(n);
        return NULL;
    }
    node_set_pos_tree(n, CMDLINE);
    return n;
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
            trm_sbuf b = {0};
            if (best) {
                sb_puts(&b, " (did you mean ");
                if (*pre) sb_puts(&b, pre), sb_putc(&b, '.');
                sb_puts(&b, best);
                sb_puts(&b, "?)");
            }
            trm_errf(e, "%s: no such key%s%s in %s%s; %s", fullkey, i < n - 1 ? " " : "",
                     i < n - 1 ? at : "", cur->file ? cur->file : "the config", b.p ? b.p : "", hint);
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

static int has_interp(const char *s) {
    for (const char *p = strstr(s, "${"); p; p = strstr(p + 1, "${"))
        if (p == s || p[-1] != '\\') return 1;
    return 0;
}

/* Converts v to the type of the existing value (OmegaConf's node validation);
 * text is the command-line text of a bare scalar, used when the target is a string. */
static int check_type(const char *key, const cfg_node *old, cfg_node *v, const char *text,
                      trm_err *e) {
    if (v->type == CFG_NULL || old->type == CFG_NULL) return 0;
    if (v->type == CFG_STR && has_interp(v->s)) return 0; /* checked once resolved */
    switch (old->type) {
    case CFG_INT:
        if (v->type == CFG_INT) return 0;
        if (v->type == CFG_FLOAT && v->f == floor(v->f) && fabs(v->f) < 9.2e18) {
            v->type = CFG_INT;
            v->i = (int64_t)v->f;
            return 0;
        }
        break;
    case CFG_FLOAT:
        if (v->type == CFG_FLOAT) return 0;
        if (v->type == CFG_INT) {
            v->type = CFG_FLOAT;
            v->f = (double)v->i;
            return 0;
        }
        break;
    case CFG_BOOL:
        if (v->type == CFG_BOOL) return 0;
        break;
    case CFG_STR:
        if (v->type == CFG_STR) return 0;
        /* `puzzle_emb_ndim: ${.hidden_size}` holds a number once resolved: a plain value
         * replacing an interpolation keeps its own type, as in OmegaConf */
        if (has_interp(old->s)) return 0;
        if (is_scalar(v)) {
            trm_sbuf b = {0};
            if (text) sb_puts(&b, text);
            else scalar_text(&b, v);
            v->type = CFG_STR;
            v->s = sb_take(&b);
            return 0;
        }
        break;
    case CFG_LIST:
    case CFG_MAP:
        if (v->type == old->type) return 0;
        break;
    default: return 0;
    }
    return wrong_type(e, key, old->type, v);
}

/* Trimmed text of a bare value, for string targets: `name=1e-4` stays "1e-4". */
static char *bare_text(const char *value) {
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
    char *hint = xasprintf("use +%s=... to add it", o->key);
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
static int is_group_choice(const cfg_search *s, const ov_parsed *o) {
    if (o->kind != OV_SET || strchr(o->key, '.') || !s || !cfg_is_group(s, o->key)) return 0;
    const char *v = o->value;
    return *v && !strchr("[{'\" ", *v) && !is_null_text(v);
}

int cfg_apply_override(cfg_node *root, const cfg_search *search, const char *ov, trm_err *e) {
    ov_parsed o;
    if (ov_split(ov, &o, e)) return -1;
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
    return rc;
}

/* ---- interpolation ------------------------------------------------------------------------------ */

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

/* ---- the whole pipeline ------------------------------------------------------------------------ */

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
        char *text = trm_read_file(name, &len, c->e);
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

void cfg_coerce_floats(cfg_node *root, const char *const *keys) {
    for (int i = 0; keys && keys[i]; i++) {
        cfg_node *n = cfg_get(root, keys[i]);
        if (n && n->type == CFG_INT) {
            n->type = CFG_FLOAT;
            n->f = (double)n->i;
        }
    }
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
    return root;
}
