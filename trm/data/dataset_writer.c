/* dataset_writer.c — see dataset_writer.h. */
#include "dataset_writer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"
#include "npy.h"

/* "data/x/" and "data/x" name the same directory; the temporary sibling needs the latter. */
static char *strip_slashes(const char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    return xstrndup(p, n);
}

int trm_dw_begin(const char *out_, int force, char **tmpdir, trm_err *e) {
    char *out = strip_slashes(out_);
    if (trm_file_exists(out) && !force) {
        trm_errf(e, "%s already exists; use --force to replace it", out);
        free(out);
        return -1;
    }
    *tmpdir = xasprintf("%s.tmp-%ld", out, (long)getpid());
    free(out);
    if (trm_remove_tree(*tmpdir, e) || trm_mkdirs(*tmpdir, e)) {
        free(*tmpdir);
        *tmpdir = NULL;
        return -1;
    }
    return 0;
}

static int write_arr(const char *dir, const char *set, const char *field, int ndim, const int64_t *shape,
                     const int32_t *data, trm_err *e) {
    char *name = xasprintf("%s__%s.npy", set, field);
    char *path = trm_path_join(dir, name);
    int rc = npy_write(path, NPY_I32, ndim, shape, data, e);
    free(name);
    free(path);
    return rc;
}

int trm_dw_write_json(const char *dir, const char *name, json_buf *b, trm_err *e) {
    json_raw(b, "\n");
    char *path = trm_path_join(dir, name);
    int rc = trm_write_file_atomic(path, b->p, b->len, e);
    free(path);
    json_buf_free(b);
    return rc;
}

int trm_dw_write_metadata(const char *split_dir, const trm_dataset_meta *meta, const char *const *sets, int nsets,
                          trm_err *e) {
    json_buf b;
    json_buf_init(&b);
    json_obj_begin(&b);
    json_kv_int(&b, "pad_id", meta->pad_id);
    if (meta->has_ignore_label) json_kv_int(&b, "ignore_label_id", meta->ignore_label_id);
    else json_key(&b, "ignore_label_id"), json_null(&b);
    json_kv_int(&b, "blank_identifier_id", meta->blank_identifier_id);
    json_kv_int(&b, "vocab_size", meta->vocab_size);
    json_kv_int(&b, "seq_len", meta->seq_len);
    json_kv_int(&b, "num_puzzle_identifiers", meta->num_puzzle_identifiers);
    json_kv_int(&b, "total_groups", meta->total_groups);
    json_kv_double(&b, "mean_puzzle_examples", meta->mean_puzzle_examples);
    json_kv_int(&b, "total_puzzles", meta->total_puzzles);
    json_key(&b, "sets");
    json_arr_begin(&b);
    for (int i = 0; i < nsets; i++) json_str(&b, sets[i]);
    json_arr_end(&b);
    json_obj_end(&b);
    return trm_dw_write_json(split_dir, "dataset.json", &b, e);
}

int trm_dw_write_split(const char *dir, const char *split, const trm_dataset_meta *meta,
                       const trm_dw_set *sets, int nsets, trm_err *e) {
    char *sdir = trm_path_join(dir, split);
    int rc = trm_mkdirs(sdir, e);
    int64_t groups = 0, puzzles = 0, examples = 0;
    for (int i = 0; i < nsets && rc == 0; i++) {
        const trm_dw_set *s = &sets[i];
        int64_t sh2[2] = {s->n_examples, meta->seq_len}, np[1] = {s->n_puzzles}, np1[1] = {s->n_puzzles + 1},
                ng1[1] = {s->n_groups + 1};
        rc = write_arr(sdir, s->name, "inputs", 2, sh2, s->inputs, e);
        if (!rc) rc = write_arr(sdir, s->name, "labels", 2, sh2, s->labels, e);
        if (!rc) rc = write_arr(sdir, s->name, "puzzle_identifiers", 1, np, s->puzzle_identifiers, e);
        if (!rc) rc = write_arr(sdir, s->name, "puzzle_indices", 1, np1, s->puzzle_indices, e);
        if (!rc) rc = write_arr(sdir, s->name, "group_indices", 1, ng1, s->group_indices, e);
        groups += s->n_groups;
        puzzles += s->n_puzzles;
        examples += s->n_examples;
    }
    if (rc == 0) {
        trm_dataset_meta m = *meta;
        if (m.total_groups <= 0) {
            m.total_groups = groups;
            m.total_puzzles = puzzles;
            m.mean_puzzle_examples = puzzles ? (double)examples / (double)puzzles : 0.0;
        }
        const char **names = xcalloc((size_t)nsets + 1, sizeof *names);
        for (int i = 0; i < nsets; i++) names[i] = sets[i].name;
        rc = trm_dw_write_metadata(sdir, &m, names, nsets, e);
        free(names);
    }
    free(sdir);
    return rc;
}

int trm_dw_write_identifiers(const char *dir, const char *const *names, int n, trm_err *e) {
    json_buf b;
    json_buf_init(&b);
    json_arr_begin(&b);
    for (int i = 0; i < n; i++) json_str(&b, names[i]);
    json_arr_end(&b);
    return trm_dw_write_json(dir, "identifiers.json", &b, e);
}

int trm_dw_commit(const char *tmpdir, const char *out_, int force, trm_err *e) {
    char *out = strip_slashes(out_), *old = NULL;
    int rc = 0;
    if (trm_file_exists(out)) {
        if (!force) rc = trm_errf(e, "%s already exists; use --force to replace it", out);
        else {
            old = xasprintf("%s.old-%ld", out, (long)getpid());
            rc = trm_rename(out, old, e);
            if (rc) {
                free(old);
                old = NULL;
            }
        }
    }
    if (!rc) {
        rc = trm_rename(tmpdir, out, e);
        if (rc && old) trm_rename(old, out, NULL); /* put the previous dataset back */
        if (!rc && old) rc = trm_remove_tree(old, e);
    }
    free(old);
    free(out);
    return rc;
}

void trm_dw_grouped_alloc(trm_dw_grouped *g, int64_t n_groups, int64_t per, int64_t seq_len) {
    int64_t n = n_groups * per;
    g->n_examples = n;
    g->n_groups = n_groups;
    g->inputs = xmalloc(sizeof(int32_t) * (size_t)(n * seq_len));
    g->labels = xmalloc(sizeof(int32_t) * (size_t)(n * seq_len));
    g->puzzle_identifiers = xcalloc((size_t)(n ? n : 1), sizeof(int32_t));
    g->puzzle_indices = xmalloc(sizeof(int32_t) * (size_t)(n + 1));
    g->group_indices = xmalloc(sizeof(int32_t) * (size_t)(n_groups + 1));
    for (int64_t i = 0; i <= n; i++) g->puzzle_indices[i] = (int32_t)i;
    for (int64_t i = 0; i <= n_groups; i++) g->group_indices[i] = (int32_t)(i * per);
}

void trm_dw_grouped_free(trm_dw_grouped *g) {
    free(g->inputs);
    free(g->labels);
    free(g->puzzle_identifiers);
    free(g->puzzle_indices);
    free(g->group_indices);
}

trm_dw_set trm_dw_grouped_set(const trm_dw_grouped *g) {
    trm_dw_set set = {.name = "all", .n_examples = g->n_examples, .inputs = g->inputs, .labels = g->labels,
                      .n_puzzles = g->n_examples, .puzzle_identifiers = g->puzzle_identifiers,
                      .puzzle_indices = g->puzzle_indices, .n_groups = g->n_groups,
                      .group_indices = g->group_indices};
    return set;
}
