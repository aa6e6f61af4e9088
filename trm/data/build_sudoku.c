/* build_sudoku.c — `trm data sudoku`: the reference's build_sudoku_dataset.py (CSV rows,
 * optional difficulty filter and training subsample, shuffle_sudoku augmentation, each copy
 * its own puzzle and the original + copies one group), with Philox randomness; and
 * `trm data sudoku-gen`: a CSV of generated puzzles in the same format. */
#include "build_sudoku.h"

#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_writer.h"
#include "hub.h"
#include "sudoku.h"

/* ---- CSV ---- */

/* Splits a line in place into fields (quotes removed, "" → "); stores at most max of them
 * and returns how many there are, or -1 for an unterminated quote. */
static int split_csv(char *line, char **fields, int max) {
    char *p = line, *w = line;
    int n = 0;
    for (;;) {
        char *start = w;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) return -1;
                if (*p == '"' && p[1] == '"') *w++ = '"', p += 2;
                else if (*p == '"') {
                    p++;
                    break;
                } else *w++ = *p++;
            }
        }
        while (*p && *p != ',') *w++ = *p++;
        char c = *p;
        *w++ = '\0';
        if (n < max) fields[n] = start;
        n++;
        if (c != ',') return n;
        p++;
    }
}

static int parse_grid(const char *path, int64_t line, const char *what, const char *s, uint8_t out[81],
                      trm_err *e) {
    size_t len = strlen(s);
    if (len != 81) return trm_errf(e, "%s:%" PRId64 ": %s has %zu characters, expected 81", path, line, what, len);
    for (int i = 0; i < 81; i++) {
        char c = s[i];
        if (c == '.') out[i] = 0;
        else if (c >= '0' && c <= '9') out[i] = (uint8_t)(c - '0');
        else
            return trm_errf(e, "%s:%" PRId64 ": %s has the character '%c' at position %d (expected '.' or 0-9)",
                            path, line, what, c, i + 1);
    }
    return 0;
}

/* Python's int(): surrounding blanks, an optional sign, decimal digits. */
static int parse_rating(const char *s, int64_t *out) {
    while (*s == ' ' || *s == '\t') s++;
    const char *digits = s + (*s == '+' || *s == '-');
    if (*digits < '0' || *digits > '9') return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

static int check_row(const char *path, int64_t line, char **f, trm_sudoku_rows *rows, int has_min,
                     int64_t min_difficulty, trm_err *e) {
    uint8_t q[81], a[81];
    int64_t rating;
    if (parse_grid(path, line, "question", f[1], q, e) || parse_grid(path, line, "answer", f[2], a, e)) return -1;
    if (parse_rating(f[3], &rating))
        return trm_errf(e, "%s:%" PRId64 ": rating '%s' is not an integer", path, line, f[3]);
    if (!sudoku_is_complete_valid(a))
        return trm_errf(e, "%s:%" PRId64 ": the answer is not a valid completed grid (each row, column and box "
                           "must hold 1-9 once)", path, line);
    for (int i = 0; i < 81; i++)
        if (q[i] && q[i] != a[i])
            return trm_errf(e, "%s:%" PRId64 ": the answer does not solve the question: row %d, column %d is %d "
                               "in the question but %d in the answer", path, line, i / 9 + 1, i % 9 + 1, q[i], a[i]);
    if (has_min && rating < min_difficulty) return 0;
    /* capacity doubles from 1024: grow at n = 0, 1024, 2048, 4096, ... */
    if (rows->n == 0 || (rows->n >= 1024 && (rows->n & (rows->n - 1)) == 0)) {
        size_t cap = rows->n ? (size_t)rows->n * 2 : 1024;
        rows->q = xrealloc(rows->q, cap * 81);
        rows->a = xrealloc(rows->a, cap * 81);
        rows->rating = xrealloc(rows->rating, cap * sizeof(int64_t));
    }
    memcpy(rows->q + rows->n * 81, q, 81);
    memcpy(rows->a + rows->n * 81, a, 81);
    rows->rating[rows->n++] = rating;
    return 0;
}

static int check_header(const char *path, char *line, trm_err *e) {
    static const char *const want[4] = {"source", "question", "answer", "rating"};
    char *f[4];
    if (!strncmp(line, "\xEF\xBB\xBF", 3)) line += 3; /* UTF-8 byte order mark */
    int n = split_csv(line, f, 4);
    int ok = n == 4;
    for (int i = 0; ok && i < 4; i++) ok = !strcmp(f[i], want[i]);
    if (!ok) return trm_errf(e, "%s:1: expected the header 'source,question,answer,rating'", path);
    return 0;
}

int trm_sudoku_read_csv(const char *path, int has_min, int64_t min_difficulty, trm_sudoku_rows *rows, trm_err *e) {
    memset(rows, 0, sizeof *rows);
    size_t len;
    char *buf = trm_read_file(path, &len, e);
    if (!buf) return -1;
    char *p = buf, *end = buf + len;
    int rc = 0;
    for (int64_t line = 1; p < end && rc == 0; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        *stop = '\0';
        if (stop > p && stop[-1] == '\r') stop[-1] = '\0';
        char *cur = p;
        p = stop + 1;
        if (line == 1) {
            rc = check_header(path, cur, e);
            continue;
        }
        if (!*cur) continue; /* blank line */
        char *f[4];
        int n = split_csv(cur, f, 4);
        if (n < 0) rc = trm_errf(e, "%s:%" PRId64 ": unterminated quoted field", path, line);
        else if (n != 4)
            rc = trm_errf(e, "%s:%" PRId64 ": %d fields, expected 4 (source,question,answer,rating)", path, line, n);
        else rc = check_row(path, line, f, rows, has_min, min_difficulty, e);
    }
    if (rc == 0 && len == 0) rc = trm_errf(e, "%s: empty file (expected the header 'source,question,answer,rating')", path);
    free(buf);
    if (rc) trm_sudoku_rows_free(rows), trm_err_oneline(e); /* messages quote the CSV's fields */
    return rc;
}

void trm_sudoku_rows_free(trm_sudoku_rows *rows) {
    free(rows->q);
    free(rows->a);
    free(rows->rating);
    memset(rows, 0, sizeof *rows);
}

/* ---- dataset ---- */

/* np.random.choice(n, k, replace=False): k distinct rows in random order. */
static void subsample(trm_rng *r, trm_sudoku_rows *rows, int64_t k) {
    int64_t n = rows->n, *idx = xmalloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    uint8_t *q = xmalloc((size_t)k * 81), *a = xmalloc((size_t)k * 81);
    int64_t *rating = xmalloc(sizeof(int64_t) * (size_t)k);
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i + (int64_t)trm_rng_below(r, (uint64_t)(n - i)), t = idx[i];
        idx[i] = idx[j], idx[j] = t;
        memcpy(q + i * 81, rows->q + idx[i] * 81, 81);
        memcpy(a + i * 81, rows->a + idx[i] * 81, 81);
        rating[i] = rows->rating[idx[i]];
    }
    trm_sudoku_rows_free(rows);
    rows->n = k, rows->q = q, rows->a = a, rows->rating = rating;
    free(idx);
}

static void put_tokens(int32_t *dst, const uint8_t *grid) {
    for (int i = 0; i < 81; i++) dst[i] = grid[i] + 1;
}

static int write_split(const char *dir, const char *split, const trm_sudoku_rows *rows, int64_t num_aug,
                       trm_rng *r, int show_progress, trm_err *e) {
    int64_t per = 1 + num_aug, n_ex = rows->n * per;
    if (rows->n == 0) return trm_errf(e, "%s: no puzzles (after --min-difficulty)", split);
    if (n_ex >= INT32_MAX || n_ex > (int64_t)(SIZE_MAX / 4 / 81))
        return trm_errf(e, "%s: %" PRId64 " puzzles x %" PRId64 " copies is too many for int32 indices", split,
                        rows->n, per);
    trm_dw_grouped arr;
    trm_dw_grouped_alloc(&arr, rows->n, per, 81);
    trm_progress pr;
    char *label = per > 1 ? xasprintf("%s (1+%" PRId64 " copies each)", split, num_aug) : xstrdup(split);
    trm_progress_start(&pr, label, rows->n, show_progress);
    for (int64_t g = 0; g < rows->n; g++) {
        const uint8_t *q0 = rows->q + g * 81, *a0 = rows->a + g * 81;
        for (int64_t k = 0; k < per; k++) {
            int64_t ex = g * per + k;
            uint8_t q[81], a[81];
            if (k == 0) memcpy(q, q0, 81), memcpy(a, a0, 81);
            else sudoku_shuffle(r, q0, a0, q, a);
            put_tokens(arr.inputs + ex * 81, q);
            put_tokens(arr.labels + ex * 81, a);
        }
        trm_progress_update(&pr, g + 1);
    }
    trm_progress_finish(&pr);
    free(label);
    char *sets[1] = {"all"};
    trm_dataset_meta meta = {.pad_id = 0, .has_ignore_label = 1, .ignore_label_id = 0, .blank_identifier_id = 0,
                             .vocab_size = 11, .seq_len = 81, .num_puzzle_identifiers = 1,
                             .total_groups = rows->n, .mean_puzzle_examples = 1.0, .total_puzzles = rows->n,
                             .nsets = 1, .sets = sets};
    trm_dw_set set = trm_dw_grouped_set(&arr);
    int rc = trm_dw_write_split(dir, split, &meta, &set, 1, e);
    trm_dw_grouped_free(&arr);
    return rc;
}

static int read_split(const trm_sudoku_opts *o, const char *split, trm_sudoku_rows *rows, trm_err *e) {
    char *name = xasprintf("%s.csv", split), *path = trm_path_join(o->csv_dir, name);
    int rc = trm_sudoku_read_csv(path, o->has_min_difficulty, o->min_difficulty, rows, e);
    free(name), free(path);
    return rc;
}

int trm_build_sudoku(const trm_sudoku_opts *o, trm_err *e) {
    if (o->num_aug < 0 || o->num_aug >= INT32_MAX) return trm_errf(e, "--num-aug must be in 0..%d", INT32_MAX - 1);
    trm_sudoku_rows train, test;
    if (read_split(o, "train", &train, e)) return -1;
    if (read_split(o, "test", &test, e)) {
        trm_sudoku_rows_free(&train);
        return -1;
    }
    trm_rng r;
    trm_rng_init(&r, o->seed, 0);
    if (o->subsample_size >= 0 && o->subsample_size < train.n) subsample(&r, &train, o->subsample_size);
    char *tmp = NULL;
    static const char *const ids[1] = {"<blank>"};
    int rc = trm_dw_begin(o->out, o->force, &tmp, e);
    if (!rc) rc = write_split(tmp, "train", &train, o->num_aug, &r, o->progress, e);
    if (!rc) rc = write_split(tmp, "test", &test, 0, &r, o->progress, e);
    if (!rc) rc = trm_dw_write_identifiers(tmp, ids, 1, e);
    if (!rc) rc = trm_dw_commit(tmp, o->out, o->force, e);
    if (rc && tmp) trm_remove_tree(tmp, NULL);
    free(tmp);
    trm_sudoku_rows_free(&train);
    trm_sudoku_rows_free(&test);
    return rc;
}

/* ---- generator ---- */

static void grid_chars(const uint8_t *g, char *out, char blank) {
    for (int i = 0; i < 81; i++) out[i] = g[i] ? (char)('0' + g[i]) : blank;
    out[81] = '\0';
}

int trm_sudoku_gen_csv(const trm_sudoku_gen_cli_opts *o, trm_err *e) {
    if (o->count < 1) return trm_errf(e, "--count must be >= 1");
    if (o->min_clues < 17 || o->max_clues > 81 || o->min_clues > o->max_clues)
        return trm_errf(e, "clue counts must satisfy 17 <= --min-clues <= --max-clues <= 81 (got %d..%d)",
                        o->min_clues, o->max_clues);
    if (trm_file_exists(o->out) && !o->force) return trm_errf(e, "%s already exists; use --force to replace it", o->out);
    sudoku_gen_opts g = {.min_clues = o->min_clues, .max_clues = o->max_clues, .min_rating = o->min_rating,
                         .max_attempts = 20000};
    trm_rng r;
    trm_rng_init(&r, o->seed, 0);
    size_t line_max = 8 + 82 + 82 + 24, cap = (size_t)o->count * line_max + 64, len = 0;
    char *buf = xmalloc(cap);
    len += (size_t)snprintf(buf, cap, "source,question,answer,rating\n");
    trm_progress pr;
    trm_progress_start(&pr, "sudoku-gen", o->count, o->progress);
    int rc = 0;
    for (int64_t i = 0; i < o->count && rc == 0; i++) {
        uint8_t q[81], a[81];
        uint64_t rating = 0;
        if (sudoku_generate(&r, &g, q, a, &rating, NULL)) {
            rc = trm_errf(e, "no puzzle with %d..%d clues and rating >= %" PRIu64 " in %d attempts; relax "
                             "--max-clues or --min-rating", o->min_clues, o->max_clues, o->min_rating,
                          g.max_attempts);
            break;
        }
        char qs[82], as[82];
        grid_chars(q, qs, '.');
        grid_chars(a, as, '0');
        len += (size_t)snprintf(buf + len, cap - len, "trm-gen,%s,%s,%" PRIu64 "\n", qs, as, rating);
        trm_progress_update(&pr, i + 1);
    }
    trm_progress_finish(&pr);
    if (!rc) rc = trm_mkdirs_for(o->out, e);
    if (!rc) rc = trm_write_file_atomic(o->out, buf, len, e);
    free(buf);
    return rc;
}

/* ---- command line ---- */

int trm_data_sudoku(int argc, char **argv, trm_err *e) {
    trm_sudoku_opts o = {.csv_dir = NULL, .out = NULL, .subsample_size = -1, .num_aug = 0, .seed = 0, .progress = 1};
    int download = 0;
    const char *repo = NULL;
    const trm_opt opts[] = {
        TRM_OPT("--csv-dir", TRM_OPT_STR, &o.csv_dir), TRM_OPT("--out", TRM_OPT_STR, &o.out),
        TRM_OPT("--download", TRM_OPT_FLAG, &download), TRM_OPT("--repo", TRM_OPT_STR, &repo),
        TRM_OPT("--force", TRM_OPT_FLAG, &o.force),
        TRM_OPT("--subsample-size", TRM_OPT_I64, &o.subsample_size, .min = 0, .max = INT64_MAX),
        TRM_OPT("--num-aug", TRM_OPT_I64, &o.num_aug),
        TRM_OPT("--min-difficulty", TRM_OPT_I64, &o.min_difficulty, .n = &o.has_min_difficulty),
        TRM_OPT("--seed", TRM_OPT_U64, &o.seed), TRM_OPT_END,
    };
    if (trm_parse_opts(argc, argv, opts, e)) return -1;
    if (!o.out || (!o.csv_dir && !download))
        return trm_errf(e, "--csv-dir DIR (with train.csv and test.csv) or --download, and --out DIR, are required");
    char *hub_dir;
    if (trm_hub_csv_dir(&o.csv_dir, download, repo, "sapientinc/sudoku-extreme", o.progress, &hub_dir, e)) return -1;
    double t0 = trm_now_seconds();
    int rc = trm_build_sudoku(&o, e);
    if (!rc) printf("wrote %s in %.1fs\n", o.out, trm_now_seconds() - t0);
    free(hub_dir);
    return rc;
}

int trm_data_sudoku_gen(int argc, char **argv, trm_err *e) {
    trm_sudoku_gen_cli_opts o = {.out = NULL, .count = 0, .seed = 0, .min_clues = 17, .max_clues = 30,
                                 .min_rating = 0, .progress = 1};
    const trm_opt opts[] = {
        TRM_OPT("--out", TRM_OPT_STR, &o.out), TRM_OPT("--force", TRM_OPT_FLAG, &o.force),
        TRM_OPT("--count", TRM_OPT_I64, &o.count), TRM_OPT("--seed", TRM_OPT_U64, &o.seed),
        TRM_OPT("--min-clues", TRM_OPT_INT, &o.min_clues, .min = 0, .max = 81),
        TRM_OPT("--max-clues", TRM_OPT_INT, &o.max_clues, .min = 0, .max = 81),
        TRM_OPT("--min-rating", TRM_OPT_U64, &o.min_rating, .min = 0, .max = INT64_MAX), TRM_OPT_END,
    };
    if (trm_parse_opts(argc, argv, opts, e)) return -1;
    if (!o.out || o.count < 1) return trm_errf(e, "--count N (>= 1) and --out FILE.csv are required");
    double t0 = trm_now_seconds();
    if (trm_sudoku_gen_csv(&o, e)) return -1;
    double dt = trm_now_seconds() - t0;
    printf("wrote %s: %" PRId64 " puzzles in %.2fs (%.1f puzzles/s)\n", o.out, o.count, dt,
           dt > 0 ? (double)o.count / dt : 0.0);
    return 0;
}
