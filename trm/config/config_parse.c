/* config_parse.c — YAML (and JSON) text to a cfg_node tree through libyaml's event parser.
 * Every node keeps the file:line:col it came from; anchors and aliases expand within limits
 * (nesting, node count, bytes copied per alias and in all) so that hostile input cannot
 * exhaust the stack, the memory or the time; a duplicate key is an error. Also the limits
 * pre-pass (cfg_check_limits) for readers that load a whole JSON document with libyaml. */

#include "config_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CFG_MAX_ALIASED 200000    /* nodes copied by aliases ("billion laughs") */
#define MIB(x) ((double)(x) / 1048576.0)

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
    size_t aliased;       /* nodes copied by aliases so far */
    size_t aliased_bytes; /* and their bytes */
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

/* Anchors by name in an open-addressing table (at most half full), so that a file of many
 * anchors and aliases costs linear time; a name anchored again takes the later node, as YAML
 * says. */
static yanchor *y_anchor_slot(const yparse *y, const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ull;
    size_t i = (size_t)(h ^ h >> 29) & (size_t)(y->capanchors - 1);
    while (y->anchors[i].name && strcmp(y->anchors[i].name, name)) i = (i + 1) & (size_t)(y->capanchors - 1);
    return &y->anchors[i];
}

static void y_add_anchor(yparse *y, const yaml_char_t *name, const cfg_node *n) {
    if (!name) return;
    if (2 * (y->nanchors + 1) > y->capanchors) {
        yparse old = *y;
        y->capanchors = old.capanchors ? 2 * old.capanchors : 16;
        y->anchors = xcalloc((size_t)y->capanchors, sizeof *y->anchors);
        for (int i = 0; i < old.capanchors; i++)
            if (old.anchors[i].name) *y_anchor_slot(y, old.anchors[i].name) = old.anchors[i];
        free(old.anchors);
    }
    yanchor *a = y_anchor_slot(y, (const char *)name);
    if (!a->name) a->name = xstrdup((const char *)name), y->nanchors++;
    a->node = n;
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

/* A copy of the anchored node an alias names, within the limits: the node count, and the
 * bytes of one copy and of all copies, measured before anything is copied. */
static cfg_node *y_alias(yparse *y, const yaml_event_t *ev) {
    const char *name = (const char *)ev->data.alias.anchor;
    const cfg_node *a = NULL;
    if (y->capanchors) a = y_anchor_slot(y, name)->node;
    if (!a) {
        y_errf(y, ev, "unknown alias");
        return NULL;
    }
    char msg[200];
    size_t bytes = node_bytes(a);
    if (bytes > CFG_MAX_VALUE_BYTES) {
        snprintf(msg, sizeof msg, "alias *%.40s copies %.1f MiB (the limit for one value is %.0f MiB)", name,
                 MIB(bytes), MIB(CFG_MAX_VALUE_BYTES));
        y_errf(y, ev, msg);
        return NULL;
    }
    if ((y->aliased += node_count(a)) > CFG_MAX_ALIASED ||
        (y->aliased_bytes += bytes) > CFG_MAX_EXPANDED_BYTES) {
        snprintf(msg, sizeof msg, "aliases copy more than %d nodes or %.0f MiB in all (the limits)",
                 CFG_MAX_ALIASED, MIB(CFG_MAX_EXPANDED_BYTES));
        y_errf(y, ev, msg);
        return NULL;
    }
    cfg_node *n = cfg_clone(a);
    free(n->key);
    n->key = NULL;
    return n;
}

static int nest_err(trm_err *e, const char *file, const yaml_event_t *ev, int limit) {
    return trm_errf(e, "%s:%zu:%zu: maps and lists nest deeper than %d levels (the limit)", file,
                    ev->start_mark.line + 1, ev->start_mark.column + 1, limit);
}

/* Consumes *ev (the node's first event) and the events of the node's children. */
static cfg_node *y_node(yparse *y, yaml_event_t *ev, int depth) {
    if (depth >= CFG_MAX_NEST &&
        (ev->type == YAML_SEQUENCE_START_EVENT || ev->type == YAML_MAPPING_START_EVENT)) {
        nest_err(y->e, y->file, ev, CFG_MAX_NEST);
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
    case YAML_ALIAS_EVENT:
        n = y_alias(y, ev);
        yaml_event_delete(ev);
        if (!n) return NULL;
        break;
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
    if (!root) trm_err_oneline(e); /* messages quote the text */
    yaml_parser_delete(&y.p);
    for (int i = 0; i < y.capanchors; i++) free(y.anchors[i].name);
    free(y.anchors);
    return root;
}

/* ---- limits pre-pass ------------------------------------------------------------------------- */

static int count_value(yparse *y, const yaml_event_t *ev, size_t max_values, size_t *values) {
    if (++*values <= max_values) return 0;
    return trm_errf(y->e, "%s:%zu:%zu: more than %zu values (the limit)", y->file, ev->start_mark.line + 1,
                    ev->start_mark.column + 1, max_values);
}

/* One event of the pre-pass: 1 at the end of the stream, 0 to go on, -1 on an error (a limit,
 * or a syntax error when the parser says so). */
static int limits_event(yparse *y, int max_depth, size_t max_values, int *depth, size_t *values) {
    yaml_event_t ev;
    if (y_next(y, &ev)) return -1;
    int rc = 0;
    switch (ev.type) {
    case YAML_STREAM_END_EVENT: rc = 1; break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if (++*depth > max_depth) rc = nest_err(y->e, y->file, &ev, max_depth);
        else rc = count_value(y, &ev, max_values, values);
        break;
    case YAML_SCALAR_EVENT:
    case YAML_ALIAS_EVENT: rc = count_value(y, &ev, max_values, values); break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: --*depth; break;
    default: break;
    }
    yaml_event_delete(&ev);
    return rc;
}

int cfg_check_limits(const char *text, size_t len, const char *name, int max_depth, size_t max_values, trm_err *e) {
    yparse y;
    trm_err msg; /* kept only for a limit: a syntax error is the caller's parser's to report */
    memset(&y, 0, sizeof y);
    y.file = name ? name : "<string>";
    y.text = text;
    y.len = len;
    y.e = &msg;
    if (!yaml_parser_initialize(&y.p)) return trm_errf(e, "%s: cannot initialise the YAML parser", y.file);
    yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
    /* Stopping at the first collection past the limit also bounds libyaml's own work: its
     * scanner's cost per token grows with the nesting it holds open. */
    int depth = 0, rc = 0;
    size_t values = 0;
    while ((rc = limits_event(&y, max_depth, max_values, &depth, &values)) == 0) {
    }
    int syntax_error = y.p.error != YAML_NO_ERROR;
    yaml_parser_delete(&y.p);
    if (rc > 0 || syntax_error) return 0;
    if (e) memcpy(e->msg, msg.msg, sizeof e->msg);
    return -1;
}
