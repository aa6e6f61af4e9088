/* dataset.c — the TRM puzzle dataset (SPEC §1): dataset.json metadata (read with libyaml,
 * JSON being YAML), the five memory-mapped arrays of every set, their validation, the
 * merge of several data paths, the training sampler and the in-order test iterator.
 * The sampler draws from counter-based streams keyed by (seed, chunk, set, index), so its
 * whole state is a few integers and any rank or resumed run reproduces the same batches. */
#include "dataset.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/config.h"

/* ---- dataset.json ------------------------------------------------------------------------ */

/* A dataset.json is a dozen fields (the reference's are under 1 KB); these bound what a
 * hostile one costs. */
#define DATASET_JSON_MAX_BYTES ((size_t)16 << 20)
#define DATASET_JSON_MAX_VALUES ((size_t)1 << 20)

/* Room for element n of an array grown by doubling (capacity: the next power of two). */
static void *grow_pow2(void *p, int n, size_t elem) {
    return (n & (n - 1)) == 0 ? xrealloc(p, (size_t)(n ? 2 * n : 1) * elem) : p;
}

typedef enum { FIELD_SCALAR, FIELD_LIST, FIELD_OTHER } field_kind;

typedef struct {
    char *key;
    field_kind kind;
    char *scalar;
    int plain; /* unquoted scalar: may be a number or null */
    char **items;
    int nitems;
    int line;
} json_field;

typedef struct {
    json_field *f;
    int n;
} json_doc;

static void doc_free(json_doc *d) {
    for (int i = 0; i < d->n; i++) {
        free(d->f[i].key);
        free(d->f[i].scalar);
        for (int k = 0; k < d->f[i].nitems; k++) free(d->f[i].items[k]);
        free(d->f[i].items);
    }
    free(d->f);
    d->f = NULL;
    d->n = 0;
}

static int next_event(yaml_parser_t *p, yaml_event_t *ev, const char *path, trm_err *e) {
    if (yaml_parser_parse(p, ev)) return 0;
    return trm_errf(e, "%s:%zu:%zu: invalid JSON: %s", path, p->problem_mark.line + 1,
                    p->problem_mark.column + 1, p->problem ? p->problem : "parse error");
}

/* Skips the rest of a nested collection whose start event was just consumed. */
static int skip_nested(yaml_parser_t *p, const char *path, trm_err *e) {
    int depth = 1;
    while (depth > 0) {
        yaml_event_t ev;
        if (next_event(p, &ev, path, e) != 0) return -1;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) depth++;
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) depth--;
        int end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (end) return trm_errf(e, "%s: unexpected end of JSON", path);
    }
    return 0;
}

static int read_list(yaml_parser_t *p, json_field *f, const char *path, trm_err *e) {
    f->kind = FIELD_LIST;
    for (;;) {
        yaml_event_t ev;
        if (next_event(p, &ev, path, e) != 0) return -1;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        if (ev.type == YAML_SCALAR_EVENT) {
            f->items = grow_pow2(f->items, f->nitems, sizeof(char *));
            f->items[f->nitems++] =
                xstrndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        } else if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            f->kind = FIELD_OTHER;
            if (skip_nested(p, path, e) != 0) {
                yaml_event_delete(&ev);
                return -1;
            }
        } else if (ev.type != YAML_ALIAS_EVENT) {
            yaml_event_delete(&ev);
            return trm_errf(e, "%s: unexpected end of JSON", path);
        }
        yaml_event_delete(&ev);
    }
}

/* Reads the value event of one top-level key into f. */
static int read_value(yaml_parser_t *p, json_field *f, const char *path, trm_err *e) {
    yaml_event_t ev;
    if (next_event(p, &ev, path, e) != 0) return -1;
    int rc = 0;
    f->line = (int)ev.start_mark.line + 1;
    if (ev.type == YAML_SCALAR_EVENT) {
        f->kind = FIELD_SCALAR;
        f->scalar = xstrndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        f->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    } else if (ev.type == YAML_SEQUENCE_START_EVENT) {
        rc = read_list(p, f, path, e);
    } else if (ev.type == YAML_MAPPING_START_EVENT) {
        f->kind = FIELD_OTHER;
        rc = skip_nested(p, path, e);
    } else {
        f->kind = FIELD_OTHER;
    }
    yaml_event_delete(&ev);
    return rc;
}

static int parse_mapping(yaml_parser_t *p, json_doc *d, const char *path, trm_err *e) {
    for (;;) {
        yaml_event_t ev;
        if (next_event(p, &ev, path, e) != 0) return -1;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            yaml_event_delete(&ev);
            return trm_errf(e, "%s: expected a string key in the top-level object", path);
        }
        d->f = grow_pow2(d->f, d->n, sizeof(json_field));
        json_field *f = &d->f[d->n++];
        memset(f, 0, sizeof *f);
        f->key = xstrndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        yaml_event_delete(&ev);
        if (read_value(p, f, path, e) != 0) return -1;
    }
}

static int parse_json_object(const char *text, size_t len, const char *path, json_doc *d,
                             trm_err *e) {
    yaml_parser_t p;
    memset(d, 0, sizeof *d);
    if (!yaml_parser_initialize(&p)) return trm_errf(e, "%s: cannot initialise libyaml", path);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = -1, seen_map = 0;
    for (;;) {
        yaml_event_t ev;
        if (next_event(&p, &ev, path, e) != 0) break;
        yaml_event_type_t t = ev.type;
        yaml_event_delete(&ev);
        if (t == YAML_STREAM_END_EVENT) {
            rc = seen_map ? 0 : trm_errf(e, "%s: expected a JSON object", path);
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT ||
            t == YAML_DOCUMENT_END_EVENT)
            continue;
        if (t != YAML_MAPPING_START_EVENT || seen_map) {
            trm_errf(e, "%s: expected a single JSON object", path);
            break;
        }
        seen_map = 1;
        if (parse_mapping(&p, d, path, e) != 0) break;
    }
    yaml_parser_delete(&p);
    if (rc != 0) doc_free(d);
    return rc;
}

static const json_field *doc_get(const json_doc *d, const char *key) {
    const json_field *found = NULL;
    for (int i = 0; i < d->n; i++)
        if (strcmp(d->f[i].key, key) == 0) found = &d->f[i]; /* last wins, as json.load */
    return found;
}

static int is_null_scalar(const json_field *f) {
    return f->kind == FIELD_SCALAR && f->plain &&
           (strcmp(f->scalar, "null") == 0 || strcmp(f->scalar, "~") == 0 || f->scalar[0] == 0);
}

/* Integer field; *is_null (when non-NULL) accepts null. */
static int doc_int(const json_doc *d, const char *path, const char *key, int64_t *out,
                   int *is_null, trm_err *e) {
    const json_field *f = doc_get(d, key);
    if (!f) return trm_errf(e, "%s: missing field '%s'", path, key);
    if (is_null) *is_null = is_null_scalar(f);
    if (is_null && *is_null) return 0;
    if (f->kind == FIELD_SCALAR && f->plain && f->scalar[0]) {
        char *end;
        errno = 0;
        long long v = strtoll(f->scalar, &end, 10);
        if (*end == 0 && errno == 0) {
            *out = v;
            return 0;
        }
    }
    return trm_errf(e, "%s:%d: field '%s' must be an integer%s, got %s", path, f->line, key,
                    is_null ? " or null" : "", f->kind == FIELD_SCALAR ? f->scalar : "a list/object");
}

static int doc_float(const json_doc *d, const char *path, const char *key, double *out,
                     trm_err *e) {
    const json_field *f = doc_get(d, key);
    if (!f) return trm_errf(e, "%s: missing field '%s'", path, key);
    if (f->kind == FIELD_SCALAR && f->plain && f->scalar[0]) {
        char *end;
        double v = strtod(f->scalar, &end);
        if (*end == 0 && isfinite(v)) {
            *out = v;
            return 0;
        }
    }
    return trm_errf(e, "%s:%d: field '%s' must be a number, got %s", path, f->line, key,
                    f->kind == FIELD_SCALAR ? f->scalar : "a list/object");
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Set names become file-name prefixes, so they may not leave the split directory. */
static int doc_sets(const json_doc *d, const char *path, trm_dataset_meta *m, trm_err *e) {
    const json_field *f = doc_get(d, "sets");
    if (!f) return trm_errf(e, "%s: missing field 'sets'", path);
    if (f->kind != FIELD_LIST || f->nitems == 0)
        return trm_errf(e, "%s:%d: field 'sets' must be a non-empty list of names", path, f->line);
    m->sets = xcalloc((size_t)f->nitems, sizeof(char *));
    m->nsets = f->nitems;
    for (int i = 0; i < f->nitems; i++) {
        const char *s = f->items[i];
        if (!s[0] || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
            return trm_errf(e, "%s:%d: invalid set name '%s'", path, f->line, s);
        m->sets[i] = xstrdup(s);
    }
    /* a repeated name, found in n log n (a hostile file may list a million) */
    char **sorted = xmalloc((size_t)f->nitems * sizeof *sorted);
    memcpy(sorted, m->sets, (size_t)f->nitems * sizeof *sorted);
    qsort(sorted, (size_t)f->nitems, sizeof *sorted, cmp_names);
    int rc = 0;
    for (int i = 1; i < f->nitems && !rc; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            rc = trm_errf(e, "%s:%d: set '%s' is listed twice", path, f->line, sorted[i]);
    free(sorted);
    return rc;
}

static void meta_free(trm_dataset_meta *m) {
    for (int i = 0; i < m->nsets; i++) free(m->sets[i]);
    free(m->sets);
    m->sets = NULL;
    m->nsets = 0;
}

static int check_meta_ranges(const trm_dataset_meta *m, const char *path, trm_err *e) {
    if (m->vocab_size < 1 || m->vocab_size > INT32_MAX)
        return trm_errf(e, "%s: vocab_size %lld out of range", path, (long long)m->vocab_size);
    if (m->seq_len < 1 || m->seq_len > (1 << 24))
        return trm_errf(e, "%s: seq_len %lld out of range", path, (long long)m->seq_len);
    if (m->pad_id < 0 || m->pad_id >= m->vocab_size)
        return trm_errf(e, "%s: pad_id %lld is not in [0, vocab_size %lld)", path,
                        (long long)m->pad_id, (long long)m->vocab_size);
    if (m->num_puzzle_identifiers < 1 || m->num_puzzle_identifiers > INT32_MAX)
        return trm_errf(e, "%s: num_puzzle_identifiers %lld out of range", path,
                        (long long)m->num_puzzle_identifiers);
    if (m->blank_identifier_id < 0 || m->blank_identifier_id >= m->num_puzzle_identifiers)
        return trm_errf(e, "%s: blank_identifier_id %lld is not in [0, num_puzzle_identifiers %lld)",
                        path, (long long)m->blank_identifier_id,
                        (long long)m->num_puzzle_identifiers);
    if (m->ignore_label_id < INT32_MIN || m->ignore_label_id > INT32_MAX)
        return trm_errf(e, "%s: ignore_label_id %lld does not fit in 32 bits", path,
                        (long long)m->ignore_label_id);
    if (m->total_groups < 0 || m->total_puzzles < 0 || !(m->mean_puzzle_examples >= 0))
        return trm_errf(e, "%s: total_groups, total_puzzles and mean_puzzle_examples must be >= 0",
                        path);
    return 0;
}

/* Reads one dataset.json. total_puzzles may be absent (HRM-era datasets): *has_total says
 * so and the caller counts the puzzles instead. */
static int read_meta(const char *path, trm_dataset_meta *m, int *has_total, trm_err *e) {
    memset(m, 0, sizeof *m);
    size_t len;
    char *text = trm_read_file_max(path, DATASET_JSON_MAX_BYTES, &len, e);
    if (!text) return -1;
    json_doc d;
    int rc = cfg_check_limits(text, len, path, CFG_MAX_NEST, DATASET_JSON_MAX_VALUES, e);
    if (rc == 0) rc = parse_json_object(text, len, path, &d, e);
    free(text);
    if (rc != 0) return -1;
    int null_ignore = 0;
    *has_total = doc_get(&d, "total_puzzles") != NULL;
    rc = doc_int(&d, path, "pad_id", &m->pad_id, NULL, e) ||
         doc_int(&d, path, "ignore_label_id", &m->ignore_label_id, &null_ignore, e) ||
         doc_int(&d, path, "blank_identifier_id", &m->blank_identifier_id, NULL, e) ||
         doc_int(&d, path, "vocab_size", &m->vocab_size, NULL, e) ||
         doc_int(&d, path, "seq_len", &m->seq_len, NULL, e) ||
         doc_int(&d, path, "num_puzzle_identifiers", &m->num_puzzle_identifiers, NULL, e) ||
         doc_int(&d, path, "total_groups", &m->total_groups, NULL, e) ||
         doc_float(&d, path, "mean_puzzle_examples", &m->mean_puzzle_examples, e) ||
         (*has_total && doc_int(&d, path, "total_puzzles", &m->total_puzzles, NULL, e)) ||
         doc_sets(&d, path, m, e) || check_meta_ranges(m, path, e);
    doc_free(&d);
    m->has_ignore_label = !null_ignore;
    if (null_ignore) m->ignore_label_id = 0;
    if (rc) meta_free(m);
    return rc ? -1 : 0;
}

/* ---- merging several data paths --------------------------------------------------------- */

typedef struct {
    trm_dataset_meta m;
    int has_total;
    char *json_path;
} path_meta;

static int disagree_int(const char *field, int64_t a, int64_t b, const char *pa, const char *pb,
                        trm_err *e) {
    if (a == b) return 0;
    return trm_errf(e, "data paths disagree on %s: %lld in %s but %lld in %s", field,
                    (long long)a, pa, (long long)b, pb);
}

static char *sets_text(const trm_dataset_meta *m) {
    char *s = xstrdup("[");
    for (int i = 0; i < m->nsets; i++) {
        char *t = xasprintf("%s%s%s", s, i ? ", " : "", m->sets[i]);
        free(s);
        s = t;
    }
    char *t = xasprintf("%s]", s);
    free(s);
    return t;
}

static int check_agree(const path_meta *a, const path_meta *b, trm_err *e) {
    const char *pa = a->json_path, *pb = b->json_path;
    if (disagree_int("seq_len", a->m.seq_len, b->m.seq_len, pa, pb, e) ||
        disagree_int("vocab_size", a->m.vocab_size, b->m.vocab_size, pa, pb, e) ||
        disagree_int("pad_id", a->m.pad_id, b->m.pad_id, pa, pb, e) ||
        disagree_int("blank_identifier_id", a->m.blank_identifier_id, b->m.blank_identifier_id,
                     pa, pb, e))
        return -1;
    if (a->m.has_ignore_label != b->m.has_ignore_label ||
        a->m.ignore_label_id != b->m.ignore_label_id) {
        char va[32] = "null", vb[32] = "null";
        if (a->m.has_ignore_label) snprintf(va, sizeof va, "%lld", (long long)a->m.ignore_label_id);
        if (b->m.has_ignore_label) snprintf(vb, sizeof vb, "%lld", (long long)b->m.ignore_label_id);
        return trm_errf(e, "data paths disagree on ignore_label_id: %s in %s but %s in %s", va, pa,
                        vb, pb);
    }
    int same = a->m.nsets == b->m.nsets;
    for (int i = 0; same && i < a->m.nsets; i++) same = strcmp(a->m.sets[i], b->m.sets[i]) == 0;
    if (!same) {
        char *sa = sets_text(&a->m), *sb = sets_text(&b->m);
        trm_errf(e, "data paths disagree on sets: %s in %s but %s in %s", sa, pa, sb, pb);
        free(sa);
        free(sb);
        return -1;
    }
    return 0;
}

/* Sums as the reference PuzzleDataset does; mean weighted by each path's puzzle count. */
static void merge_meta(trm_dataset_meta *out, const path_meta *pm, int npaths) {
    *out = pm[0].m;
    out->sets = xcalloc((size_t)pm[0].m.nsets, sizeof(char *));
    for (int i = 0; i < pm[0].m.nsets; i++) out->sets[i] = xstrdup(pm[0].m.sets[i]);
    out->num_puzzle_identifiers = out->total_groups = out->total_puzzles = 0;
    double weighted = 0;
    for (int i = 0; i < npaths; i++) {
        out->num_puzzle_identifiers += pm[i].m.num_puzzle_identifiers;
        out->total_groups += pm[i].m.total_groups;
        out->total_puzzles += pm[i].m.total_puzzles;
        weighted += pm[i].m.mean_puzzle_examples * (double)pm[i].m.total_puzzles;
    }
    out->mean_puzzle_examples = out->total_puzzles > 0 ? weighted / (double)out->total_puzzles : 0;
}

/* ---- one set: open and validate ---------------------------------------------------------- */

static void shape_text(const npy_array *a, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < a->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)a->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "%s)", a->ndim == 1 ? "," : "");
}

static int check_tokens(const npy_array *a, const trm_dataset_meta *m, int is_label, trm_err *e) {
    int allow = is_label && m->has_ignore_label;
    int64_t k = npy_find_outside(a, 0, m->vocab_size, allow, m->ignore_label_id);
    if (k < 0) return 0;
    int64_t v = npy_get_i64(a, k), row = k / m->seq_len, col = k % m->seq_len;
    const char *what = is_label ? "label" : "token";
    if (v < 0 && !allow)
        return trm_errf(e, "%s: %s %lld at [%lld, %lld] is negative", a->path, what, (long long)v,
                        (long long)row, (long long)col);
    if (!allow)
        return trm_errf(e, "%s: %s %lld at [%lld, %lld] is >= vocab_size %lld", a->path, what,
                        (long long)v, (long long)row, (long long)col, (long long)m->vocab_size);
    return trm_errf(e, "%s: label %lld at [%lld, %lld] is not in [0, vocab_size %lld) and not "
                       "ignore_label_id %lld", a->path, (long long)v, (long long)row,
                    (long long)col, (long long)m->vocab_size, (long long)m->ignore_label_id);
}

/* A 1-D prefix-offset array: starts at 0, never decreases, ends at `last`. */
static int check_offsets(const npy_array *a, int64_t last, const char *last_what, trm_err *e) {
    char sh[128];
    shape_text(a, sh, sizeof sh);
    if (a->ndim != 1 || a->count < 1)
        return trm_errf(e, "%s: expected a non-empty 1-D array, got shape %s", a->path, sh);
    int64_t prev = npy_get_i64(a, 0);
    if (prev != 0) return trm_errf(e, "%s: must start at 0 but [0] is %lld", a->path, (long long)prev);
    for (int64_t i = 1; i < a->count; i++) {
        int64_t v = npy_get_i64(a, i);
        if (v < prev)
            return trm_errf(e, "%s: decreases at [%lld]: %lld after %lld", a->path, (long long)i,
                            (long long)v, (long long)prev);
        prev = v;
    }
    if (prev != last)
        return trm_errf(e, "%s: last value [%lld] is %lld but %s is %lld", a->path,
                        (long long)(a->count - 1), (long long)prev, last_what, (long long)last);
    return 0;
}

static int check_set(trm_dataset_set *s, const trm_dataset_meta *m, trm_err *e) {
    char sh[128], sh2[128];
    shape_text(&s->inputs, sh, sizeof sh);
    if (s->inputs.ndim != 2 || s->inputs.shape[1] != m->seq_len)
        return trm_errf(e, "%s: expected shape (N, seq_len %lld), got %s", s->inputs.path,
                        (long long)m->seq_len, sh);
    shape_text(&s->labels, sh2, sizeof sh2);
    if (s->labels.ndim != 2 || s->labels.shape[0] != s->inputs.shape[0] ||
        s->labels.shape[1] != s->inputs.shape[1])
        return trm_errf(e, "%s: shape %s does not match the inputs' shape %s", s->labels.path, sh2,
                        sh);
    s->n_examples = s->inputs.shape[0];
    if (check_offsets(&s->puzzle_indices, s->n_examples, "the number of examples", e) != 0)
        return -1;
    s->n_puzzles = s->puzzle_indices.count - 1;
    shape_text(&s->puzzle_identifiers, sh, sizeof sh);
    if (s->puzzle_identifiers.ndim != 1 || s->puzzle_identifiers.count != s->n_puzzles)
        return trm_errf(e, "%s: expected shape (%lld,) (one id per puzzle), got %s",
                        s->puzzle_identifiers.path, (long long)s->n_puzzles, sh);
    int64_t k = npy_find_outside(&s->puzzle_identifiers, 0, m->num_puzzle_identifiers, 0, 0);
    if (k >= 0)
        return trm_errf(e, "%s: puzzle identifier %lld at [%lld] is not in [0, "
                           "num_puzzle_identifiers %lld)", s->puzzle_identifiers.path,
                        (long long)npy_get_i64(&s->puzzle_identifiers, k), (long long)k,
                        (long long)m->num_puzzle_identifiers);
    if (check_offsets(&s->group_indices, s->n_puzzles, "the number of puzzles", e) != 0) return -1;
    s->n_groups = s->group_indices.count - 1;
    if (check_tokens(&s->inputs, m, 0, e) != 0 || check_tokens(&s->labels, m, 1, e) != 0) return -1;
    return 0;
}

static int open_set(trm_dataset_set *s, const char *dir, const char *base, const char *name,
                    const trm_dataset_meta *m, trm_err *e) {
    static const char *const fields[5] = {"inputs", "labels", "puzzle_identifiers",
                                          "puzzle_indices", "group_indices"};
    npy_array *arrays[5] = {&s->inputs, &s->labels, &s->puzzle_identifiers, &s->puzzle_indices,
                            &s->group_indices};
    s->name = xstrdup(name);
    s->base_name = xstrdup(base);
    for (int i = 0; i < 5; i++) {
        char *file = xasprintf("%s/%s__%s.npy", dir, base, fields[i]);
        int rc = npy_open(arrays[i], file, 0, e);
        free(file);
        if (rc != 0) return -1;
    }
    return check_set(s, m, e);
}

static void close_set(trm_dataset_set *s) {
    npy_close(&s->inputs);
    npy_close(&s->labels);
    npy_close(&s->puzzle_identifiers);
    npy_close(&s->puzzle_indices);
    npy_close(&s->group_indices);
    free(s->name);
    free(s->base_name);
    memset(s, 0, sizeof *s);
}

/* ---- open / close ----------------------------------------------------------------------- */

static int read_all_meta(path_meta *pm, const char *const *paths, int npaths, const char *split,
                         trm_err *e) {
    for (int i = 0; i < npaths; i++) {
        pm[i].json_path = xasprintf("%s/%s/dataset.json", paths[i], split);
        if (read_meta(pm[i].json_path, &pm[i].m, &pm[i].has_total, e) != 0) return -1;
        if (i > 0 && check_agree(&pm[0], &pm[i], e) != 0) return -1;
    }
    return 0;
}

/* Sets in the reference's order: for set in sets, for path in paths; path i>0 gets SET<i>. */
static int open_sets(trm_dataset *d, path_meta *pm, const char *const *paths, int npaths,
                     trm_err *e) {
    int nbase = pm[0].m.nsets;
    d->sets = xcalloc((size_t)nbase * (size_t)npaths, sizeof(trm_dataset_set));
    for (int b = 0; b < nbase; b++) {
        for (int i = 0; i < npaths; i++) {
            const char *base = pm[0].m.sets[b];
            char *name = i ? xasprintf("%s%d", base, i) : xstrdup(base);
            for (int k = 0; k < d->nsets; k++) {
                if (strcmp(d->sets[k].name, name) == 0) {
                    trm_errf(e, "set name '%s' of %s collides with another set's name", name,
                             pm[i].json_path);
                    free(name);
                    return -1;
                }
            }
            char *dir = xasprintf("%s/%s", paths[i], d->split);
            int rc = open_set(&d->sets[d->nsets++], dir, base, name, &pm[i].m, e);
            free(dir);
            free(name);
            if (rc != 0) return -1;
            if (!pm[i].has_total) pm[i].m.total_puzzles += d->sets[d->nsets - 1].n_puzzles;
        }
    }
    return 0;
}

int trm_dataset_open(trm_dataset *d, const char *const *paths, int npaths, const char *split,
                     trm_err *e) {
    memset(d, 0, sizeof *d);
    if (npaths < 1) return trm_errf(e, "no data paths given");
    d->split = xstrdup(split);
    path_meta *pm = xcalloc((size_t)npaths, sizeof *pm);
    int rc = read_all_meta(pm, paths, npaths, split, e);
    if (rc == 0) rc = open_sets(d, pm, paths, npaths, e);
    if (rc == 0) merge_meta(&d->meta, pm, npaths);
    for (int i = 0; i < npaths; i++) {
        meta_free(&pm[i].m);
        free(pm[i].json_path);
    }
    free(pm);
    if (rc != 0) trm_dataset_close(d), trm_err_oneline(e); /* messages quote dataset.json's values */
    return rc;
}

void trm_dataset_close(trm_dataset *d) {
    for (int i = 0; i < d->nsets; i++) close_set(&d->sets[i]);
    free(d->sets);
    meta_free(&d->meta);
    free(d->split);
    memset(d, 0, sizeof *d);
}

/* ---- batches -------------------------------------------------------------------------------- */

void trm_batch_alloc(trm_batch *b, int64_t batch_size, int64_t seq_len) {
    memset(b, 0, sizeof *b);
    b->batch_size = batch_size;
    b->seq_len = seq_len;
    b->inputs = xcalloc((size_t)(batch_size * seq_len), sizeof(int32_t));
    b->labels = xcalloc((size_t)(batch_size * seq_len), sizeof(int32_t));
    b->puzzle_identifiers = xcalloc((size_t)batch_size, sizeof(int32_t));
}

void trm_batch_free(trm_batch *b) {
    free(b->inputs);
    free(b->labels);
    free(b->puzzle_identifiers);
    memset(b, 0, sizeof *b);
}

/* `out` must be zeroed or allocated; a batch of another shape is replaced. */
static void ensure_batch(trm_batch *out, int64_t rows, int64_t seq_len) {
    if (out->inputs && out->batch_size == rows && out->seq_len == seq_len) return;
    trm_batch_free(out);
    trm_batch_alloc(out, rows, seq_len);
}

static void put_row(const trm_dataset *d, const trm_dataset_set *s, trm_batch *out, int64_t row,
                    int64_t example, int64_t puzzle) {
    int64_t S = d->meta.seq_len;
    int32_t *in = out->inputs + row * S, *lab = out->labels + row * S;
    npy_copy_i32(&s->inputs, example * S, S, in);
    npy_copy_i32(&s->labels, example * S, S, lab);
    if (d->meta.has_ignore_label) {
        int32_t ig = (int32_t)d->meta.ignore_label_id; /* range-checked on open */
        for (int64_t j = 0; j < S; j++)
            if (lab[j] == ig) lab[j] = TRM_IGNORE_LABEL;
    }
    out->puzzle_identifiers[row] = (int32_t)npy_get_i64(&s->puzzle_identifiers, puzzle);
}

static void pad_row(const trm_dataset *d, trm_batch *out, int64_t row) {
    int64_t S = d->meta.seq_len;
    for (int64_t j = 0; j < S; j++) {
        out->inputs[row * S + j] = (int32_t)d->meta.pad_id;
        out->labels[row * S + j] = TRM_IGNORE_LABEL;
    }
    out->puzzle_identifiers[row] = (int32_t)d->meta.blank_identifier_id;
}

int trm_check_batch_split(int64_t global_batch_size, int rank, int world_size, trm_err *e) {
    if (global_batch_size < 1)
        return trm_errf(e, "global_batch_size must be positive, got %lld",
                        (long long)global_batch_size);
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return trm_errf(e, "rank %d is not in [0, world size %d)", rank, world_size);
    if (global_batch_size % world_size != 0)
        return trm_errf(e, "global_batch_size %lld must be a multiple of the number of ranks %d",
                        (long long)global_batch_size, world_size);
    return 0;
}

/* ---- training sampler ----------------------------------------------------------------------- */

void trm_sampler_init(trm_sampler_state *s, uint64_t seed, int64_t epochs_per_iter,
                      int64_t global_batch_size, int rank, int world_size) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->epochs_per_iter = epochs_per_iter;
    s->global_batch_size = global_batch_size;
    s->rank = rank;
    s->world_size = world_size;
}

int trm_sampler_check(const trm_sampler_state *s, trm_err *e) {
    if (trm_check_batch_split(s->global_batch_size, s->rank, s->world_size, e) != 0) return -1;
    if (s->epochs_per_iter < 1)
        return trm_errf(e, "epochs per iteration must be positive, got %lld",
                        (long long)s->epochs_per_iter);
    if (s->iter < 0 || s->set_index < 0 || s->group_pos < 0 || s->batch_index < 0)
        return trm_errf(e, "sampler position (iter %lld, set %d, group %lld, batch %lld) is invalid",
                        (long long)s->iter, s->set_index, (long long)s->group_pos,
                        (long long)s->batch_index);
    return 0;
}

void trm_sampler_next_iter(trm_sampler_state *s) {
    s->iter++;
    s->set_index = 0;
    s->group_pos = 0;
    s->batch_index = 0;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

enum { STREAM_GROUP_ORDER = 1, STREAM_BATCH = 2 };

/* Independent Philox stream per (purpose, chunk, set, index); collisions are 2^-64 events. */
static uint64_t stream_of(int purpose, int64_t iter, int set, int64_t index) {
    uint64_t h = mix64(0x54524D2D53414D50ull + (uint64_t)purpose);
    h = mix64(h ^ (uint64_t)iter);
    h = mix64(h ^ (uint64_t)(int64_t)set);
    return mix64(h ^ (uint64_t)index);
}

/* k distinct values of [0, n) in uniformly random order. Small n: partial Fisher–Yates;
 * large n (k < n/2): rejection against a hash set, expected < 2k draws. */
static void draw_distinct(trm_rng *r, int64_t n, int64_t k, int64_t *out) {
    if (n <= 2 * k + 64) {
        int64_t *pool = xmalloc(sizeof(int64_t) * (size_t)n);
        for (int64_t i = 0; i < n; i++) pool[i] = i;
        for (int64_t i = 0; i < k; i++) {
            int64_t j = i + (int64_t)trm_rng_below(r, (uint64_t)(n - i));
            int64_t t = pool[i];
            pool[i] = pool[j];
            pool[j] = t;
            out[i] = pool[i];
        }
        free(pool);
        return;
    }
    uint64_t cap = 16;
    while (cap < (uint64_t)k * 4) cap *= 2;
    int64_t *table = xmalloc(sizeof(int64_t) * cap);
    for (uint64_t i = 0; i < cap; i++) table[i] = -1;
    for (int64_t got = 0; got < k;) {
        int64_t v = (int64_t)trm_rng_below(r, (uint64_t)n);
        uint64_t h = mix64((uint64_t)v) & (cap - 1);
        while (table[h] >= 0 && table[h] != v) h = (h + 1) & (cap - 1);
        if (table[h] == v) continue;
        table[h] = v;
        out[got++] = v;
    }
    free(table);
}

typedef struct {
    int64_t *example; /* global batch: example index per row */
    int64_t *puzzle;  /* puzzle index per row */
    int64_t *perm;    /* group permutation of the current epoch */
    int64_t perm_epoch;
} sampler_scratch;

/* Walks the group order from s->group_pos, packing the global batch (reference
 * _sample_batch). Returns the number of rows filled. */
static int64_t fill_global(const trm_dataset_set *set, trm_sampler_state *s, sampler_scratch *w) {
    int64_t G = set->n_groups, B = s->global_batch_size, total, filled = 0;
    if (__builtin_mul_overflow(G, s->epochs_per_iter, &total)) total = INT64_MAX;
    trm_rng r;
    trm_rng_init(&r, s->seed, stream_of(STREAM_BATCH, s->iter, s->set_index, s->batch_index));
    while (s->group_pos < total && filled < B) {
        int64_t epoch = s->group_pos / G;
        if (epoch != w->perm_epoch) {
            trm_rng pr;
            trm_rng_init(&pr, s->seed, stream_of(STREAM_GROUP_ORDER, s->iter, s->set_index, epoch));
            trm_rng_permutation(&pr, w->perm, G);
            w->perm_epoch = epoch;
        }
        int64_t g = w->perm[s->group_pos % G];
        s->group_pos++;
        int64_t p0 = npy_get_i64(&set->group_indices, g);
        int64_t p1 = npy_get_i64(&set->group_indices, g + 1);
        if (p1 <= p0) continue; /* an empty group has nothing to draw (the reference crashes) */
        int64_t p = p0 + (int64_t)trm_rng_below(&r, (uint64_t)(p1 - p0));
        int64_t e0 = npy_get_i64(&set->puzzle_indices, p);
        int64_t size = npy_get_i64(&set->puzzle_indices, p + 1) - e0;
        int64_t k = size < B - filled ? size : B - filled;
        draw_distinct(&r, size, k, w->example + filled);
        for (int64_t i = 0; i < k; i++) {
            w->example[filled + i] += e0;
            w->puzzle[filled + i] = p;
        }
        filled += k;
    }
    s->batch_index++;
    return filled;
}

int trm_sampler_next(const trm_dataset *d, trm_sampler_state *s, trm_batch *out) {
    if (trm_sampler_check(s, NULL) != 0) return -1;
    int64_t B = s->global_batch_size, local = B / s->world_size;
    sampler_scratch w = {xmalloc(sizeof(int64_t) * (size_t)B), xmalloc(sizeof(int64_t) * (size_t)B),
                         NULL, -1};
    int found = 0;
    while (!found && s->set_index < d->nsets) {
        const trm_dataset_set *set = &d->sets[s->set_index];
        w.perm = xrealloc(w.perm, sizeof(int64_t) * (size_t)(set->n_groups + 1));
        w.perm_epoch = -1;
        if (set->n_groups > 0 && fill_global(set, s, &w) == B) {
            found = 1;
            break;
        }
        /* chunk of this set exhausted; a final partial batch is dropped */
        s->set_index++;
        s->group_pos = 0;
        s->batch_index = 0;
    }
    if (found) {
        const trm_dataset_set *set = &d->sets[s->set_index];
        ensure_batch(out, local, d->meta.seq_len);
        for (int64_t i = 0; i < local; i++) {
            int64_t g = (int64_t)s->rank * local + i;
            put_row(d, set, out, i, w.example[g], w.puzzle[g]);
        }
        out->effective_size = B;
        out->set_index = s->set_index;
    }
    free(w.example);
    free(w.puzzle);
    free(w.perm);
    return found;
}

/* ---- test iterator ---------------------------------------------------------------------------- */

void trm_test_iter_init(trm_test_iter *it, int64_t global_batch_size, int rank, int world_size) {
    memset(it, 0, sizeof *it);
    it->global_batch_size = global_batch_size;
    it->rank = rank;
    it->world_size = world_size;
}

/* Index of the puzzle containing example x: last p with pi[p] <= x (searchsorted right - 1),
 * so empty puzzles are skipped. */
static int64_t puzzle_of(const trm_dataset_set *s, int64_t x) {
    int64_t lo = 0, hi = s->puzzle_indices.count; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (npy_get_i64(&s->puzzle_indices, mid) <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int trm_test_iter_next(const trm_dataset *d, trm_test_iter *it, trm_batch *out) {
    if (trm_check_batch_split(it->global_batch_size, it->rank, it->world_size, NULL) != 0 ||
        it->set_index < 0 || it->start < 0)
        return -1;
    int64_t B = it->global_batch_size, local = B / it->world_size;
    while (it->set_index < d->nsets && it->start >= d->sets[it->set_index].n_examples) {
        it->set_index++;
        it->start = 0;
    }
    if (it->set_index >= d->nsets) return 0;
    const trm_dataset_set *s = &d->sets[it->set_index];
    int64_t end = s->n_examples - it->start < B ? s->n_examples : it->start + B;
    int64_t ls = it->start + (int64_t)it->rank * local;
    int64_t le = ls + local < end ? ls + local : end;
    ensure_batch(out, local, d->meta.seq_len);
    int64_t row = 0;
    if (ls < le) {
        int64_t p = puzzle_of(s, ls);
        for (int64_t x = ls; x < le; x++, row++) {
            while (p + 1 < s->puzzle_indices.count && npy_get_i64(&s->puzzle_indices, p + 1) <= x) p++;
            put_row(d, s, out, row, x, p);
        }
    }
    for (; row < local; row++) pad_row(d, out, row);
    out->effective_size = end - it->start;
    out->set_index = it->set_index;
    it->start += B;
    return 1;
}

int64_t trm_total_steps(const trm_dataset_meta *m, int64_t epochs, int64_t global_batch_size) {
    if (global_batch_size <= 0) return 0;
    int64_t eg;
    double x = __builtin_mul_overflow(epochs, m->total_groups, &eg)
                   ? (double)epochs * (double)m->total_groups
                   : (double)eg;
    double steps = x * m->mean_puzzle_examples / (double)global_batch_size;
    if (!(steps > 0)) return 0;
    if (steps >= 9.2e18) return INT64_MAX;
    return (int64_t)steps;
}
