/* cli_inspect.c — `trm inspect FILE...`: metadata and tensor table of safetensors files (with
 * checksums verified by st_open) and torch.save files. A bad file is reported and the others
 * still shown. `trm inspect --diff A B [--tol T]` compares two files tensor by tensor (runs on
 * other devices or process counts are compared this way; a trm checkpoint with its export to
 * the reference's names too). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "commands.h"

#define INSPECT_MAX_LINES 40 /* of a multi-line metadata value such as "config" */
#define INSPECT_WIDTH 80     /* columns of a terminal line */

static int cmp_meta_key(const void *a, const void *b) {
    return strcmp((*(const st_meta_kv *const *)a)->key, (*(const st_meta_kv *const *)b)->key);
}

static int is_crc_key(const char *k) { return strncmp(k, "crc32.", 6) == 0; }

/* Columns print_sanitized will use for s, for aligning the table. */
static int sanitized_cols(const char *s) {
    int cols = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        cols += (c < 0x20 && c != '\t') || c == 0x7F ? 4 : (c & 0xC0) != 0x80;
    }
    return cols;
}

/* Writes n bytes of s with control characters as \xNN (they would garble the terminal);
 * returns the number of columns used (UTF-8 continuation bytes take none). */
static int print_sanitized(const char *s, size_t n) {
    int cols = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7F) {
            printf("\\x%02x", c);
            cols += 4;
        } else {
            putchar(c);
            cols += (c & 0xC0) != 0x80;
        }
    }
    return cols;
}

/* Columns of the first k bytes of s as print_sanitized shows them. */
static int cols_of(const char *s, size_t k) {
    int cols = 0;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        cols += (c < 0x20 && c != '\t') || c == 0x7F ? 4 : (c & 0xC0) != 0x80;
    }
    return cols;
}

/* s (n bytes) in the `room` columns left on the line: whole, or cut on a character boundary
 * with "... (N bytes)" so that the line still fits. */
static void print_clipped(const char *s, size_t n, int room) {
    if (cols_of(s, n) <= room) {
        print_sanitized(s, n);
        return;
    }
    char tail[48];
    int tl = snprintf(tail, sizeof tail, "... (%zu bytes)", n);
    size_t k = 0;
    while (k < n) { /* the longest whole-character prefix that leaves room for the tail */
        size_t next = k + 1;
        while (next < n && ((unsigned char)s[next] & 0xC0) == 0x80) next++;
        if (cols_of(s, next) + tl > room) break;
        k = next;
    }
    print_sanitized(s, k);
    fputs(tail, stdout);
}

static void print_line_clipped(const char *s, size_t n, int used) {
    print_clipped(s, n, INSPECT_WIDTH - used);
    putchar('\n');
}

/* Single-line values follow the key; multi-line ones go below it, indented and cut. */
static void print_meta_value(const char *v, int used) {
    if (!strchr(v, '\n')) {
        print_line_clipped(v, strlen(v), used);
        return;
    }
    int total = 0, shown = 0;
    for (const char *p = v; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        total++;
        p += n + (nl ? 1 : 0);
    }
    printf("|\n");
    for (const char *p = v; *p && shown < INSPECT_MAX_LINES; shown++) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        printf("      ");
        print_line_clipped(p, n, 6);
        p += n + (nl ? 1 : 0);
    }
    if (total > shown) printf("      ... (%d more lines)\n", total - shown);
}

static void print_metadata(const st_file *f) {
    const st_meta_kv **kv = xmalloc(((size_t)f->nmeta + 1) * sizeof *kv);
    int n = 0, ncrc = 0;
    for (int i = 0; i < f->nmeta; i++) {
        if (is_crc_key(f->meta[i].key))
            ncrc++;
        else
            kv[n++] = &f->meta[i];
    }
    qsort(kv, (size_t)n, sizeof *kv, cmp_meta_key);
    printf("  metadata:%s\n", n == 0 && ncrc == 0 ? " (none)" : "");
    for (int i = 0; i < n; i++) {
        printf("    ");
        int kc = cols_of(kv[i]->key, strlen(kv[i]->key));
        print_clipped(kv[i]->key, strlen(kv[i]->key), INSPECT_WIDTH / 2);
        printf(": ");
        print_meta_value(kv[i]->value, 4 + (kc < INSPECT_WIDTH / 2 ? kc : INSPECT_WIDTH / 2) + 2);
    }
    if (ncrc && ncrc < f->ntensors)
        printf("    crc32: verified for %d of %d tensors\n", ncrc, f->ntensors);
    else if (ncrc)
        printf("    crc32: verified for %d tensors\n", ncrc);
    else if (n)
        printf("    crc32: none (no checksums: the data is not verified)\n");
    free(kv);
}

static void shape_text(char *buf, size_t cap, const st_tensor *t) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* name, dtype, shape, bytes: the name column takes what the others leave of 80 columns; a
 * longer name stands on a line of its own, its row continuing below it. */
static void print_tensors(const st_file *f) {
    int wname = 4, wshape = 5, wbytes = 5;
    char sh[256], nb[32];
    for (int i = 0; i < f->ntensors; i++) {
        int l = sanitized_cols(f->tensors[i].name);
        if (l > wname) wname = l;
        shape_text(sh, sizeof sh, &f->tensors[i]);
        if ((int)strlen(sh) > wshape) wshape = (int)strlen(sh);
        int b = snprintf(nb, sizeof nb, "%zu", f->tensors[i].nbytes);
        if (b > wbytes) wbytes = b;
    }
    if (wshape > 24) wshape = 24; /* a longer shape pushes only its own row */
    int room = INSPECT_WIDTH - 4 - (2 + 5 + 2 + wshape + 2 + wbytes);
    if (wname > room) wname = room > 8 ? room : 8;
    printf("  tensors:\n    %-*s  %-5s  %-*s  %*s\n", wname, "name", "dtype", wshape, "shape", wbytes, "bytes");
    size_t total = 0;
    for (int i = 0; i < f->ntensors; i++) {
        const st_tensor *t = &f->tensors[i];
        shape_text(sh, sizeof sh, t);
        printf("    ");
        int used = sanitized_cols(t->name);
        if (used > wname) {
            print_clipped(t->name, strlen(t->name), INSPECT_WIDTH - 4);
            printf("\n    ");
            used = 0;
        } else {
            print_sanitized(t->name, strlen(t->name));
        }
        printf("%*s  %-5s  %-*s  %*zu\n", wname - used, "", st_dtype_name(t->dtype), wshape, sh, wbytes, t->nbytes);
        total += t->nbytes;
    }
    printf("  total: %d tensors, %zu bytes (%.2f MiB)\n", f->ntensors, total, (double)total / (1024.0 * 1024.0));
}

static int inspect_one(const char *path, int blank_line_first) {
    st_file f;
    trm_err e;
    if (tensor_file_open(&f, path, &e) != 0) {
        fprintf(stderr, "trm inspect: %s\n", e.msg);
        return -1;
    }
    if (blank_line_first) printf("\n");
    printf("%s (%zu bytes)\n", path, f.map.size);
    print_metadata(&f);
    print_tensors(&f);
    st_close(&f);
    return 0;
}

/* Max |a-b| of one float tensor pair and that relative to max |a|. */
static int diff_tensor(const st_tensor *a, const st_tensor *b, double *abs_out, double *rel_out, trm_err *e) {
    size_t n = 1;
    for (int d = 0; d < a->ndim; d++) n *= (size_t)a->shape[d];
    float *x = xmalloc((n ? n : 1) * sizeof *x), *y = xmalloc((n ? n : 1) * sizeof *y);
    int rc = st_read_f32(a, x, e) || st_read_f32(b, y, e) ? -1 : 0;
    double mabs = 0, scale = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (d > mabs || d != d) mabs = d;
        if (fabs((double)x[i]) > scale) scale = fabs((double)x[i]);
    }
    free(x);
    free(y);
    *abs_out = mabs;
    *rel_out = scale > 0 ? mabs / scale : mabs;
    return rc;
}

static int same_shape(const st_tensor *a, const st_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* The tensor of f named `name`, or else the one tensor whose name is the same once the
 * reference's wrapper prefixes are stripped (inner.x against _orig_mod.model.inner.x). */
static const st_tensor *find_match(const st_file *f, const char *name) {
    const st_tensor *t = st_find(f, name), *hit = NULL;
    if (t) return t;
    const char *c = trm_ckpt_canonical_name(name);
    for (int i = 0; i < f->ntensors; i++)
        if (!strcmp(trm_ckpt_canonical_name(f->tensors[i].name), c)) {
            if (hit) return NULL;
            hit = &f->tensors[i];
        }
    return hit;
}

/* Exit status: 0 same within tol (or no tol), 1 differs beyond tol or in structure, 2 unreadable. */
static int diff_files(const char *pa, const char *pb, double tol) {
    st_file fa, fb;
    trm_err e = {{0}};
    if (tensor_file_open(&fa, pa, &e)) {
        fprintf(stderr, "trm inspect: %s\n", e.msg);
        return 2;
    }
    if (tensor_file_open(&fb, pb, &e)) {
        fprintf(stderr, "trm inspect: %s\n", e.msg);
        st_close(&fa);
        return 2;
    }
    int bad = 0;
    double worst = 0;
    printf("%-40s %14s %14s\n", "tensor", "max |a-b|", "relative");
    for (int i = 0; i < fa.ntensors; i++) {
        const st_tensor *a = &fa.tensors[i], *b = find_match(&fb, a->name);
        if (!b || !same_shape(a, b)) {
            printf("%-40s %s\n", a->name, b ? "shapes differ" : "missing in the second file");
            bad = 1;
            continue;
        }
        double mabs, rel;
        if (a->dtype == ST_F32 || a->dtype == ST_F16 || a->dtype == ST_BF16 || a->dtype == ST_F64) {
            if (diff_tensor(a, b, &mabs, &rel, &e)) {
                fprintf(stderr, "trm inspect: %s: %s\n", a->name, e.msg);
                bad = 1;
                continue;
            }
        } else {
            mabs = rel = a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes) ? 0.0 : 1.0;
        }
        printf("%-40s %14.6g %14.6g\n", a->name, mabs, rel);
        if (rel > worst || rel != rel) worst = rel;
    }
    for (int i = 0; i < fb.ntensors; i++)
        if (!find_match(&fa, fb.tensors[i].name)) {
            printf("%-40s missing in the first file\n", fb.tensors[i].name);
            bad = 1;
        }
    printf("largest relative difference: %.6g%s\n", worst,
           tol >= 0 ? (worst <= tol && !bad ? " (within --tol)" : " (beyond --tol)") : "");
    st_close(&fa);
    st_close(&fb);
    return bad || (tol >= 0 && !(worst <= tol)) ? 1 : 0;
}

static int cmd_diff(int argc, char **argv) {
    const char *files[2];
    int nf = 0;
    double tol = -1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--diff")) continue;
        if (!strcmp(argv[i], "--tol")) {
            char *end = NULL;
            tol = i + 1 < argc ? strtod(argv[++i], &end) : -1;
            if (!end || *end || !(tol >= 0)) {
                fprintf(stderr, "trm inspect: --tol needs a non-negative number\n");
                return 2;
            }
        } else if (nf < 2 && argv[i][0] != '-') {
            files[nf++] = argv[i];
        } else {
            fprintf(stderr, "usage: trm inspect --diff A.safetensors B.safetensors [--tol T]\n");
            return 2;
        }
    }
    if (nf != 2) {
        fprintf(stderr, "usage: trm inspect --diff A.safetensors B.safetensors [--tol T]\n");
        return 2;
    }
    return diff_files(files[0], files[1], tol);
}

int cmd_inspect(int argc, char **argv, const trm_globals *g) {
    (void)g;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--diff")) return cmd_diff(argc, argv);
    int nfiles = 0;
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != 0) {
            fprintf(stderr, "trm inspect: unknown option '%s'\nusage: trm inspect FILE [FILE ...]\n", argv[i]);
            return 2;
        }
        nfiles++;
    }
    if (nfiles == 0) {
        fprintf(stderr, "usage: trm inspect FILE [FILE ...]\n");
        return 2;
    }
    int rc = 0, shown = 0;
    for (int i = 0; i < argc; i++) {
        fflush(stdout); /* keep stdout and stderr lines in order on a shared terminal */
        if (inspect_one(argv[i], shown > 0) != 0)
            rc = 1;
        else
            shown++;
    }
    return rc;
}
