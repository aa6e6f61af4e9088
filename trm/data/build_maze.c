/* build_maze.c — `trm data maze` and `trm data maze-gen` (see build_maze.h). The builder
 * reproduces the reference's build_maze_dataset.py: tokens "# SGo" → 1..5 (PAD 0),
 * V 6, ignore_label_id 0, one puzzle id, sets ["all"], each (augmented) maze its own puzzle
 * with one example, the copies of a maze one group, totals written as the reference does
 * (total_puzzles = total_groups, mean_puzzle_examples 1). */
#include "build_maze.h"

#include "util/util.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_writer.h"
#include "dihedral.h"
#include "hub.h"
#include "maze.h"

#define MAZE_SUBSAMPLE_STREAM 0x4d415a45ULL /* "MAZE" */
#define MAZE_GEN_STREAM 0x4d47454eULL       /* "MGEN"; maze i uses stream (this << 32) | i */
#define MAZE_GEN_MAX_TRIES 1000
#define MAZE_MAX_SIDE 4096 /* keeps n*n and the token arrays' indices in int range */

/* ---- CSV reading ------------------------------------------------------------------- */

typedef struct {
    int n;          /* grid side */
    int64_t rows;
    char *q, *a;    /* rows x n*n characters */
} maze_rows;

static void maze_rows_free(maze_rows *m) {
    free(m->q);
    free(m->a);
    memset(m, 0, sizeof *m);
}

/* Splits one CSV record (no embedded newlines) into at most `max` fields, unquoting
 * "..." fields ("" is a quote) into buf. Returns the number of fields, or -1 on a bad quote. */
static int split_fields(const char *s, size_t len, char *buf, const char **f, size_t *flen, int max) {
    size_t i = 0, o = 0;
    int nf = 0;
    for (;;) {
        if (nf == max) return max + 1;
        f[nf] = buf + o;
        size_t start = o;
        if (i < len && s[i] == '"') {
            for (i++;; i++) {
                if (i >= len) return -1;
                if (s[i] == '"') {
                    if (i + 1 < len && s[i + 1] == '"') buf[o++] = '"', i++;
                    else break;
                } else buf[o++] = s[i];
            }
            i++;
            if (i < len && s[i] != ',') return -1;
        } else {
            while (i < len && s[i] != ',') buf[o++] = s[i++];
        }
        flen[nf++] = o - start;
        if (i >= len) return nf;
        i++; /* the comma */
    }
}

static int isqrt_exact(size_t len) {
    int n = 0;
    while ((size_t)(n + 1) * (size_t)(n + 1) <= len) n++;
    return (size_t)n * (size_t)n == len ? n : -1;
}

static int check_grid(const char *what, const char *g, size_t len, int n, trm_err *e) {
    for (size_t i = 0; i < len; i++) {
        if (trm_maze_token(g[i]) >= 0) continue;
        unsigned char ch = (unsigned char)g[i];
        char shown[16];
        if (ch >= 32 && ch < 127) snprintf(shown, sizeof shown, "'%c'", ch);
        else snprintf(shown, sizeof shown, "byte 0x%02x", ch);
        return trm_errf(e, "%s: character %s at row %d, column %d is not one of \"%s\"", what, shown,
                        (int)(i / (size_t)n) + 1, (int)(i % (size_t)n) + 1, TRM_MAZE_CHARSET);
    }
    return 0;
}

/* Validates one data record and appends it; m->n is the grid side so far (0: none yet). */
static int add_record(maze_rows *m, int64_t *cap, const char **f, const size_t *fl, trm_err *e) {
    if (fl[1] > (size_t)MAZE_MAX_SIDE * MAZE_MAX_SIDE)
        return trm_errf(e, "question has %zu characters; at most %dx%d grids are supported", fl[1], MAZE_MAX_SIDE,
                        MAZE_MAX_SIDE);
    int n = isqrt_exact(fl[1]);
    if (fl[1] == 0 || n < 0) return trm_errf(e, "question has %zu characters, not a square grid", fl[1]);
    if (m->n && n != m->n)
        return trm_errf(e, "question is %dx%d but %s mazes are %dx%d", n, n, m->rows ? "earlier" : "the training",
                        m->n, m->n);
    if (fl[2] != fl[1]) return trm_errf(e, "answer has %zu characters, question %zu", fl[2], fl[1]);
    if (check_grid("question", f[1], fl[1], n, e) || check_grid("answer", f[2], fl[2], n, e) ||
        trm_maze_check_answer(f[1], f[2], (int)fl[1], n, e))
        return -1;
    m->n = n;
    if (m->rows == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        m->q = xrealloc(m->q, (size_t)*cap * fl[1]);
        m->a = xrealloc(m->a, (size_t)*cap * fl[1]);
    }
    memcpy(m->q + (size_t)m->rows * fl[1], f[1], fl[1]);
    memcpy(m->a + (size_t)m->rows * fl[1], f[2], fl[2]);
    m->rows++;
    return 0;
}

/* Reads a Maze CSV (header source,question,answer,rating). want_n > 0: every grid must be
 * want_n x want_n (the test split must match the training split). */
static int read_maze_csv(const char *path, int want_n, maze_rows *m, trm_err *e) {
    size_t len;
    char *text = trm_read_file(path, &len, e);
    if (!text) return -1;
    memset(m, 0, sizeof *m);
    m->n = want_n > 0 ? want_n : 0;
    char *buf = xmalloc(len + 1);
    int64_t cap = 0, line = 0;
    int rc = 0;
    for (size_t pos = 0; pos < len && rc == 0;) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        size_t l = end - pos;
        if (l && text[pos + l - 1] == '\r') l--;
        line++;
        const char *f[4];
        size_t fl[4];
        int nf = l ? split_fields(text + pos, l, buf, f, fl, 4) : 0;
        if (line == 1) {
            static const char *const want[4] = {"source", "question", "answer", "rating"};
            int ok = nf == 4;
            for (int k = 0; k < 4 && ok; k++) ok = fl[k] == strlen(want[k]) && !memcmp(f[k], want[k], fl[k]);
            if (!ok) rc = trm_errf(e, "expected the header 'source,question,answer,rating'");
        } else if (l == 0) {
            /* blank line: no record */
        } else if (nf < 0) {
            rc = trm_errf(e, "unbalanced quotes");
        } else if (nf != 4) {
            rc = trm_errf(e, "expected 4 fields (source,question,answer,rating), found %s%d", nf > 4 ? "more than " : "",
                          nf > 4 ? 4 : nf);
        } else {
            rc = add_record(m, &cap, f, fl, e);
        }
        pos = end + 1;
    }
    if (!rc && line == 0) rc = trm_errf(e, "empty file; expected the header 'source,question,answer,rating'"), line = 1;
    if (rc) trm_err_prefix(e, "%s:%" PRId64, path, line);
    else if (m->rows == 0) rc = trm_errf(e, "%s: no mazes (only a header)", path);
    free(buf);
    free(text);
    if (rc) maze_rows_free(m), trm_err_oneline(e); /* messages quote the CSV's fields */
    return rc;
}

int trm_maze_read_csv(const char *path, int64_t *rows, int *side, trm_err *e) {
    maze_rows m;
    if (read_maze_csv(path, 0, &m, e)) return -1;
    *rows = m.rows;
    *side = m.n;
    maze_rows_free(&m);
    return 0;
}

/* ---- dataset ----------------------------------------------------------------------- */

static void to_tokens(const char *g, int n, int tid, int32_t *out) {
    int nn = n * n;
    uint8_t *t = xmalloc((size_t)nn);
    trm_dihedral((const uint8_t *)g, n, n, tid, t, NULL, NULL);
    for (int k = 0; k < nn; k++) out[k] = trm_maze_token((char)t[k]);
    free(t);
}

/* rows[order[i]] for i < n_sel, each as naug dihedral copies (tid 0..naug-1). */
static void fill_split(const maze_rows *m, const int64_t *order, int64_t n_sel, int naug, trm_progress *p,
                       trm_dw_grouped *s) {
    int64_t seq = (int64_t)m->n * m->n;
    trm_dw_grouped_alloc(s, n_sel, naug, seq);
    for (int64_t g = 0; g < n_sel; g++) {
        int64_t row = order ? order[g] : g;
        for (int t = 0; t < naug; t++) {
            int64_t ex = g * naug + t;
            to_tokens(m->q + row * seq, m->n, t, s->inputs + ex * seq);
            to_tokens(m->a + row * seq, m->n, t, s->labels + ex * seq);
        }
        trm_progress_update(p, g + 1);
    }
}

static int write_split(const char *dir, const char *split, int n, const trm_dw_grouped *s, trm_err *e) {
    trm_dataset_meta meta = {.pad_id = 0, .has_ignore_label = 1, .ignore_label_id = 0, .blank_identifier_id = 0,
                             .vocab_size = (int64_t)strlen(TRM_MAZE_CHARSET) + 1, .seq_len = (int64_t)n * n,
                             .num_puzzle_identifiers = 1, .total_groups = s->n_groups,
                             .mean_puzzle_examples = 1.0, .total_puzzles = s->n_groups};
    trm_dw_set set = trm_dw_grouped_set(s);
    return trm_dw_write_split(dir, split, &meta, &set, 1, e);
}

/* Builds and writes one split; train subsamples (reference: np.random.choice without
 * replacement, in drawn order) and augments. */
static int build_split(const trm_maze_build_opts *o, const char *tmp, const char *split, const maze_rows *m,
                       trm_err *e) {
    int train = !strcmp(split, "train"), naug = train && o->aug ? 8 : 1;
    int64_t n_sel = m->rows, *order = NULL;
    if (train && o->subsample_size > 0 && o->subsample_size < m->rows) {
        trm_rng r;
        trm_rng_init(&r, o->seed, MAZE_SUBSAMPLE_STREAM);
        order = xmalloc(sizeof(int64_t) * (size_t)m->rows);
        trm_rng_permutation(&r, order, m->rows);
        n_sel = o->subsample_size;
    }
    if (n_sel * naug > INT32_MAX) {
        free(order);
        return trm_errf(e, "%s: %" PRId64 " puzzles exceed the int32 indices of the dataset format", split,
                        n_sel * naug);
    }
    trm_progress p;
    trm_progress_start(&p, split, n_sel, o->progress);
    trm_dw_grouped s;
    fill_split(m, order, n_sel, naug, &p, &s);
    trm_progress_finish(&p);
    int rc = write_split(tmp, split, m->n, &s, e);
    trm_dw_grouped_free(&s);
    free(order);
    return rc;
}

int trm_build_maze(const trm_maze_build_opts *o, trm_err *e) {
    if (!o->csv_dir || !o->out) return trm_errf(e, "--csv-dir and --out are required");
    maze_rows train, test;
    char *ptrain = trm_path_join(o->csv_dir, "train.csv"), *ptest = trm_path_join(o->csv_dir, "test.csv");
    int rc = read_maze_csv(ptrain, 0, &train, e);
    if (!rc && (rc = read_maze_csv(ptest, train.n, &test, e))) maze_rows_free(&train);
    free(ptrain);
    free(ptest);
    if (rc) return -1;
    char *tmp = NULL;
    static const char *const ids[1] = {"<blank>"};
    rc = trm_dw_begin(o->out, o->force, &tmp, e);
    if (!rc) rc = build_split(o, tmp, "train", &train, e);
    if (!rc) rc = build_split(o, tmp, "test", &test, e);
    if (!rc) rc = trm_dw_write_identifiers(tmp, ids, 1, e);
    if (!rc) rc = trm_dw_commit(tmp, o->out, o->force, e);
    if (rc && tmp) trm_remove_tree(tmp, NULL);
    free(tmp);
    maze_rows_free(&train);
    maze_rows_free(&test);
    return rc;
}

/* ---- generator --------------------------------------------------------------------- */

/* Maze i draws from its own RNG stream, so the output depends only on (seed, i): blocks
 * are generated in parallel and appended in order. */
#define MAZE_GEN_BLOCK 2048

typedef struct {
    const trm_maze_gen_opts *o;
    int n, min_len;
    char *q, *a;       /* MAZE_GEN_BLOCK x n*n each */
    int *len;          /* MAZE_GEN_BLOCK */
    int64_t fail_at;   /* lowest failing maze index, INT64_MAX if none */
    trm_err err;       /* its message */
} gen_block;

static void gen_one(gen_block *b, trm_maze_work *w, int64_t i, int64_t b0) {
    int64_t fail_at;
#pragma omp atomic read
    fail_at = b->fail_at;
    if (fail_at < INT64_MAX) return; /* the same min_len fails for every maze: stop early */
    trm_rng r;
    trm_rng_init(&r, b->o->seed, (MAZE_GEN_STREAM << 32) | (uint64_t)i);
    size_t nn = (size_t)b->n * (size_t)b->n, k = (size_t)(i - b0);
    trm_err le;
    if (trm_maze_generate(&r, w, b->min_len, MAZE_GEN_MAX_TRIES, b->q + k * nn, b->a + k * nn, &b->len[k], &le)) {
#pragma omp critical(trm_maze_gen_err)
        if (i < b->fail_at) {
            b->err = le;
#pragma omp atomic write
            b->fail_at = i;
        }
    }
}

static void gen_block_run(gen_block *b, int64_t b0, int64_t b1) {
#pragma omp parallel
    {
        trm_maze_work w;
        trm_maze_work_init(&w, b->n);
#pragma omp for schedule(dynamic, 8)
        for (int64_t i = b0; i < b1; i++) gen_one(b, &w, i, b0);
        trm_maze_work_free(&w);
    }
}

static size_t append_row(char *csv, const trm_maze_gen_opts *o, int64_t i, const char *q, const char *a, size_t nn,
                         int plen) {
    size_t len = (size_t)sprintf(csv, "trm-maze-gen/%" PRIu64 "/%" PRId64 ",", o->seed, i);
    memcpy(csv + len, q, nn), len += nn, csv[len++] = ',';
    memcpy(csv + len, a, nn), len += nn;
    return len + (size_t)sprintf(csv + len, ",%d\n", plen);
}

int trm_maze_gen(trm_maze_gen_opts *o, trm_err *e) {
    if (!o->out) return trm_errf(e, "--out FILE is required");
    if (o->count < 1) return trm_errf(e, "--count must be >= 1");
    if (o->size < TRM_MAZE_MIN_SIZE || o->size > TRM_MAZE_MAX_SIZE)
        return trm_errf(e, "--size must be in %d..%d", TRM_MAZE_MIN_SIZE, TRM_MAZE_MAX_SIZE);
    if (trm_file_exists(o->out) && !o->force) return trm_errf(e, "%s already exists; use --force to replace it", o->out);
    int n = o->size;
    size_t nn = (size_t)n * (size_t)n, row_cap = 2 * nn + 64;
    if ((uint64_t)o->count > (SIZE_MAX - 64) / row_cap) return trm_errf(e, "--count %" PRId64 " is too large", o->count);
    gen_block b = {.o = o, .n = n, .min_len = o->min_path_len > 0 ? o->min_path_len : trm_maze_default_min_len(n),
                   .q = xmalloc(MAZE_GEN_BLOCK * nn), .a = xmalloc(MAZE_GEN_BLOCK * nn),
                   .len = xmalloc(MAZE_GEN_BLOCK * sizeof(int)), .fail_at = INT64_MAX};
    char *csv = xmalloc(64 + (size_t)o->count * row_cap);
    size_t len = (size_t)sprintf(csv, "source,question,answer,rating\n");
    trm_progress p;
    trm_progress_start(&p, "maze-gen", o->count, o->progress);
    o->len_min = INT64_MAX, o->len_max = 0;
    double sum = 0;
    for (int64_t b0 = 0; b0 < o->count && b.fail_at == INT64_MAX; b0 += MAZE_GEN_BLOCK) {
        /* the first block is small so that an impossible --min-path-len fails fast */
        int64_t b1 = b0 + (b0 ? MAZE_GEN_BLOCK : 16);
        b1 = b1 < o->count ? b1 : o->count;
        gen_block_run(&b, b0, b1);
        for (int64_t i = b0; i < b1 && b.fail_at == INT64_MAX; i++) {
            int plen = b.len[i - b0];
            len += append_row(csv + len, o, i, b.q + (size_t)(i - b0) * nn, b.a + (size_t)(i - b0) * nn, nn, plen);
            o->len_min = plen < o->len_min ? plen : o->len_min;
            o->len_max = plen > o->len_max ? plen : o->len_max;
            sum += plen;
        }
        trm_progress_update(&p, b1);
        if (!b0) b0 = 16 - MAZE_GEN_BLOCK;
    }
    trm_progress_finish(&p);
    o->seconds = trm_now_seconds() - p.t0;
    o->len_mean = sum / (double)o->count;
    int rc = b.fail_at < INT64_MAX ? (*e = b.err, -1) : trm_mkdirs_for(o->out, e);
    if (!rc) rc = trm_write_file_atomic(o->out, csv, len, e);
    free(csv);
    free(b.q);
    free(b.a);
    free(b.len);
    return rc;
}

/* ---- command line ------------------------------------------------------------------ */

int trm_data_maze(int argc, char **argv, trm_err *e) {
    trm_maze_build_opts o = {.progress = 1};
    int download = 0;
    const char *repo = NULL;
    const trm_opt opts[] = {
        TRM_OPT("--csv-dir", TRM_OPT_STR, &o.csv_dir), TRM_OPT("--out", TRM_OPT_STR, &o.out),
        TRM_OPT("--download", TRM_OPT_FLAG, &download), TRM_OPT("--repo", TRM_OPT_STR, &repo),
        TRM_OPT("--aug", TRM_OPT_FLAG, &o.aug), TRM_OPT("--force", TRM_OPT_FLAG, &o.force),
        TRM_OPT("--subsample-size", TRM_OPT_I64, &o.subsample_size, .min = 1, .max = INT64_MAX),
        TRM_OPT("--seed", TRM_OPT_U64, &o.seed), TRM_OPT_END,
    };
    if (trm_parse_opts(argc, argv, opts, e)) return -1;
    if (!o.out || (!o.csv_dir && !download)) return trm_errf(e, "--csv-dir DIR or --download, and --out DIR, are required");
    char *hub_dir;
    if (trm_hub_csv_dir(&o.csv_dir, download, repo, "sapientinc/maze-30x30-hard-1k", o.progress, &hub_dir, e))
        return -1;
    int rc = trm_build_maze(&o, e);
    if (!rc) printf("wrote %s\n", o.out);
    free(hub_dir);
    return rc;
}

int trm_data_maze_gen(int argc, char **argv, trm_err *e) {
    trm_maze_gen_opts o = {.count = 0, .size = 30, .progress = 1};
    const trm_opt opts[] = {
        TRM_OPT("--out", TRM_OPT_STR, &o.out), TRM_OPT("--force", TRM_OPT_FLAG, &o.force),
        TRM_OPT("--count", TRM_OPT_I64, &o.count), TRM_OPT("--seed", TRM_OPT_U64, &o.seed),
        TRM_OPT("--size", TRM_OPT_INT, &o.size, .min = 1, .max = 1000000),
        TRM_OPT("--min-path-len", TRM_OPT_INT, &o.min_path_len, .min = 1, .max = 1000000), TRM_OPT_END,
    };
    if (trm_parse_opts(argc, argv, opts, e)) return -1;
    if (!o.out || o.count < 1) return trm_errf(e, "--count N (>= 1) and --out FILE.csv are required");
    if (trm_maze_gen(&o, e)) return -1;
    printf("wrote %s: %" PRId64 " mazes %dx%d, shortest path %" PRId64 "..%" PRId64 " (mean %.1f) moves, "
           "%.0f mazes/s\n", o.out, o.count, o.size, o.size, o.len_min, o.len_max, o.len_mean,
           o.seconds > 0 ? (double)o.count / o.seconds : 0.0);
    return 0;
}
