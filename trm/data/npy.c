/* npy.c — NumPy .npy files: header parsing (format 1.0/2.0/3.0), validation of dtype,
 * shape and size against the mapped file, element access, and the atomic v1.0 writer.
 * Every length read from the file is checked before use, so a hostile file cannot make
 * the reader touch memory outside the mapping. */
#include "npy.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads little-endian arrays in place and needs a little-endian host"
#endif

#define NPY_MAX_DIMS 8

typedef struct {
    const char *code; /* descr without the byte-order character */
    npy_dtype type;
    int size;
    int is_float;
    const char *name;
} dtype_info;

static const dtype_info dtypes[] = {
    {"b1", NPY_BOOL, 1, 0, "bool"},     {"i1", NPY_I8, 1, 0, "int8"},
    {"u1", NPY_U8, 1, 0, "uint8"},      {"i2", NPY_I16, 2, 0, "int16"},
    {"u2", NPY_U16, 2, 0, "uint16"},    {"i4", NPY_I32, 4, 0, "int32"},
    {"u4", NPY_U32, 4, 0, "uint32"},    {"i8", NPY_I64, 8, 0, "int64"},
    {"f4", NPY_F32, 4, 1, "float32"},   {"f8", NPY_F64, 8, 1, "float64"},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

static const dtype_info *dtype_by_type(npy_dtype t) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].type == t) return &dtypes[i];
    return NULL;
}

const char *npy_dtype_name(npy_dtype t) {
    const dtype_info *d = dtype_by_type(t);
    return d ? d->name : "unknown";
}

/* ---- header dict parsing ------------------------------------------------------------ */

typedef struct {
    const char *p, *end, *start;
    const char *path;
    trm_err *e;
} cursor;

static int cur_err(cursor *c, const char *what) {
    return trm_errf(c->e, "%s: malformed .npy header: %s at header offset %ld", c->path, what,
                    (long)(c->p - c->start));
}

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int expect_char(cursor *c, char ch, const char *what) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != ch) return cur_err(c, what);
    c->p++;
    return 0;
}

/* A Python string literal, quoted with ' or "; only the characters numpy emits matter. */
static int parse_pystr(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return cur_err(c, "expected a string");
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' && c->p + 1 < c->end) c->p++;
        if (n + 1 >= cap) return cur_err(c, "string too long");
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return cur_err(c, "unterminated string");
    c->p++;
    out[n] = 0;
    return 0;
}

static int parse_ident(cursor *c, char *out, size_t cap) {
    skip_ws(c);
    size_t n = 0;
    while (c->p < c->end && (isalnum((unsigned char)*c->p) || *c->p == '_')) {
        if (n + 1 >= cap) return cur_err(c, "identifier too long");
        out[n++] = *c->p++;
    }
    out[n] = 0;
    return n ? 0 : cur_err(c, "expected True or False");
}

/* Non-negative decimal; a trailing L (Python 2 long, old numpy files) is accepted. */
static int parse_dim(cursor *c, int64_t *out) {
    skip_ws(c);
    if (c->p >= c->end || !isdigit((unsigned char)*c->p))
        return cur_err(c, "expected a non-negative integer in 'shape'");
    int64_t v = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        int d = *c->p++ - '0';
        if (v > (INT64_MAX - d) / 10)
            return trm_errf(c->e, "%s: .npy shape dimension does not fit in 64 bits", c->path);
        v = v * 10 + d;
    }
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++;
    *out = v;
    return 0;
}

static int parse_shape(cursor *c, int *ndim, int64_t *shape) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '(' && *c->p != '['))
        return cur_err(c, "expected a tuple for 'shape'");
    char close = *c->p == '(' ? ')' : ']';
    c->p++;
    *ndim = 0;
    for (;;) {
        skip_ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        if (*ndim >= NPY_MAX_DIMS)
            return trm_errf(c->e, "%s: .npy array has more than %d dimensions", c->path,
                            NPY_MAX_DIMS);
        if (parse_dim(c, &shape[*ndim]) != 0) return -1;
        (*ndim)++;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p >= c->end || *c->p != close) return cur_err(c, "expected ',' or end of 'shape'");
    }
}

typedef struct {
    char descr[64];
    int fortran;
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int have_descr, have_fortran, have_shape;
} npy_header;

static int parse_entry(cursor *c, npy_header *h) {
    char key[64], word[16];
    if (parse_pystr(c, key, sizeof key) != 0) return -1;
    if (expect_char(c, ':', "expected ':' after a key") != 0) return -1;
    skip_ws(c);
    if (strcmp(key, "descr") == 0) {
        if (c->p < c->end && (*c->p == '[' || *c->p == '{'))
            return trm_errf(c->e, "%s: structured dtypes are not supported (integer array expected)",
                            c->path);
        if (parse_pystr(c, h->descr, sizeof h->descr) != 0) return -1;
        h->have_descr++;
    } else if (strcmp(key, "fortran_order") == 0) {
        if (parse_ident(c, word, sizeof word) != 0) return -1;
        if (strcmp(word, "True") == 0)
            h->fortran = 1;
        else if (strcmp(word, "False") == 0)
            h->fortran = 0;
        else
            return cur_err(c, "'fortran_order' must be True or False");
        h->have_fortran++;
    } else if (strcmp(key, "shape") == 0) {
        if (parse_shape(c, &h->ndim, h->shape) != 0) return -1;
        h->have_shape++;
    } else {
        return trm_errf(c->e, "%s: .npy header has an unexpected key '%s'", c->path, key);
    }
    return 0;
}

static int parse_header(const char *text, size_t len, const char *path, npy_header *h,
                        trm_err *e) {
    cursor c = {text, text + len, text, path, e};
    memset(h, 0, sizeof *h);
    if (expect_char(&c, '{', "expected '{'") != 0) return -1;
    for (;;) {
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        if (parse_entry(&c, h) != 0) return -1;
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (expect_char(&c, '}', "expected ',' or '}'") != 0) return -1;
        break;
    }
    skip_ws(&c);
    while (c.p < c.end && *c.p == '\0') c.p++; /* some writers pad with NULs */
    if (c.p != c.end) return cur_err(&c, "unexpected text after the header dict");
    if (!h->have_descr || !h->have_fortran || !h->have_shape)
        return trm_errf(e, "%s: .npy header lacks '%s'", path,
                        !h->have_descr ? "descr" : !h->have_fortran ? "fortran_order" : "shape");
    if (h->have_descr > 1 || h->have_fortran > 1 || h->have_shape > 1)
        return trm_errf(e, "%s: .npy header repeats a key", path);
    return 0;
}

static int resolve_dtype(const char *descr, const char *path, int allow_float,
                         const dtype_info **out, trm_err *e) {
    char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return trm_errf(e, "%s: unsupported .npy dtype '%s'", path, descr);
    const dtype_info *d = NULL;
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(descr + 1, dtypes[i].code) == 0) d = &dtypes[i];
    if (!d)
        return trm_errf(e, "%s: unsupported .npy dtype '%s' (expected bool, int8..int64, "
                           "uint8..uint32%s)", path, descr, allow_float ? ", float32, float64" : "");
    if (d->size > 1 && order == '>')
        return trm_errf(e, "%s: big-endian .npy dtype '%s' is not supported", path, descr);
    if (d->size > 1 && order != '<')
        return trm_errf(e, "%s: .npy dtype '%s' must be little-endian ('<')", path, descr);
    if (d->is_float && !allow_float)
        return trm_errf(e, "%s: floating-point dtype '%s' where an integer array is expected",
                        path, descr);
    *out = d;
    return 0;
}

/* ---- reader ---------------------------------------------------------------------------- */

static uint32_t read_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Locates the header text and the data offset, checking both against the file size. */
static int locate_header(const unsigned char *b, size_t size, const char *path, size_t *hstart,
                         size_t *hlen, trm_err *e) {
    if (size < 8 || memcmp(b, "\x93NUMPY", 6) != 0)
        return trm_errf(e, "%s: not a .npy file (bad magic)", path);
    int major = b[6];
    if (size < (major == 1 ? 10u : 12u)) return trm_errf(e, "%s: truncated .npy header", path);
    if (major == 1) {
        *hstart = 10;
        *hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else if (major == 2 || major == 3) {
        *hstart = 12;
        *hlen = read_le32(b + 8);
    } else {
        return trm_errf(e, "%s: unsupported .npy format version %d.%d", path, major, b[7]);
    }
    if (*hlen > size - *hstart)
        return trm_errf(e, "%s: truncated .npy header (header says %zu bytes, file has %zu)", path,
                        *hlen, size - *hstart);
    return 0;
}

/* The shape must describe the data exactly. The product of the dimensions other than 0 must
 * fit too: an empty array of shape (0, 2^62, 2^62) holds no bytes, but whoever sizes a buffer
 * by its other dimensions would overflow. */
static int check_shape(npy_array *a, const npy_header *h, size_t data_bytes, trm_err *e) {
    int64_t count = 1, nonzero = 1;
    for (int i = 0; i < h->ndim; i++) {
        a->shape[i] = h->shape[i];
        if (__builtin_mul_overflow(count, h->shape[i], &count) ||
            (h->shape[i] && __builtin_mul_overflow(nonzero, h->shape[i], &nonzero)))
            return trm_errf(e, "%s: .npy shape product overflows 64 bits", a->path);
    }
    int64_t bytes;
    if (__builtin_mul_overflow(count, (int64_t)a->itemsize, &bytes))
        return trm_errf(e, "%s: .npy data size overflows", a->path);
    a->ndim = h->ndim;
    a->count = count;
    if ((uint64_t)bytes != (uint64_t)data_bytes)
        return trm_errf(e, "%s: .npy data is %zu bytes but shape and dtype %s need %lld", a->path,
                        data_bytes, npy_dtype_name(a->dtype), (long long)bytes);
    return 0;
}

static int open_mapped(npy_array *a, int allow_float, trm_err *e) {
    const unsigned char *b = a->map.data;
    size_t size = a->map.size, hstart = 0, hlen = 0;
    if (locate_header(b, size, a->path, &hstart, &hlen, e) != 0) return -1;
    npy_header h;
    if (parse_header((const char *)b + hstart, hlen, a->path, &h, e) != 0) return -1;
    const dtype_info *d = NULL;
    if (resolve_dtype(h.descr, a->path, allow_float, &d, e) != 0) return -1;
    if (h.fortran && h.ndim > 1) {
        int64_t big = 0;
        for (int i = 0; i < h.ndim; i++) big += h.shape[i] > 1;
        if (big > 1)
            return trm_errf(e, "%s: fortran_order (column-major) arrays are not supported", a->path);
    }
    a->dtype = d->type;
    a->itemsize = d->size;
    if (check_shape(a, &h, size - hstart - hlen, e) != 0) return -1;
    a->data = b + hstart + hlen;
    return 0;
}

int npy_open(npy_array *a, const char *path, int allow_float, trm_err *e) {
    memset(a, 0, sizeof *a);
    if (trm_mmap_open(&a->map, path, e) != 0) return -1;
    a->path = xstrdup(path);
    if (open_mapped(a, allow_float, e) != 0) {
        npy_close(a);
        return trm_err_oneline(e); /* messages quote the header's text */
    }
    return 0;
}

void npy_close(npy_array *a) {
    trm_mmap_close(&a->map);
    free(a->path);
    memset(a, 0, sizeof *a);
}

/* ---- element access (memcpy: the data offset need not be aligned) -------------------- */

/* A float as an int64, truncated; out of range saturates and NaN is 0 (a plain cast of those
 * is undefined behaviour, and the values come from a file). */
static int64_t f64_to_i64(double v) {
    if (!(v == v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static int64_t load_i64(npy_dtype t, const char *p) {
    switch (t) {
    case NPY_BOOL: return *(const unsigned char *)p != 0;
    case NPY_I8: return *(const signed char *)p;
    case NPY_U8: return *(const unsigned char *)p;
    case NPY_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case NPY_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case NPY_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case NPY_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case NPY_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case NPY_F32: { float v; memcpy(&v, p, 4); return f64_to_i64(v); }
    case NPY_F64: { double v; memcpy(&v, p, 8); return f64_to_i64(v); }
    }
    return 0;
}

int64_t npy_get_i64(const npy_array *a, int64_t i) {
    if (i < 0 || i >= a->count) return 0;
    return load_i64(a->dtype, (const char *)a->data + i * a->itemsize);
}

double npy_get_f64(const npy_array *a, int64_t i) {
    if (i < 0 || i >= a->count) return 0;
    const char *p = (const char *)a->data + i * a->itemsize;
    if (a->dtype == NPY_F32) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    if (a->dtype == NPY_F64) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    return (double)load_i64(a->dtype, p);
}

/* Typed loops so that bulk copies and scans of large token arrays vectorise. */
#define COPY_LOOP(T)                                                   \
    do {                                                               \
        for (int64_t k = 0; k < n; k++) {                              \
            T v;                                                       \
            memcpy(&v, src + k * (int64_t)sizeof(T), sizeof v);        \
            out[k] = (int32_t)v;                                       \
        }                                                              \
    } while (0)

void npy_copy_i32(const npy_array *a, int64_t start, int64_t n, int32_t *out) {
    if (start < 0 || n < 0 || start > a->count || n > a->count - start) return;
    const char *src = (const char *)a->data + start * a->itemsize;
    switch (a->dtype) {
    case NPY_BOOL:
        for (int64_t k = 0; k < n; k++) out[k] = src[k] != 0;
        break;
    case NPY_I8: COPY_LOOP(int8_t); break;
    case NPY_U8: COPY_LOOP(uint8_t); break;
    case NPY_I16: COPY_LOOP(int16_t); break;
    case NPY_U16: COPY_LOOP(uint16_t); break;
    case NPY_I32: memcpy(out, src, (size_t)n * 4); break;
    case NPY_U32: COPY_LOOP(uint32_t); break;
    case NPY_I64: COPY_LOOP(int64_t); break;
    case NPY_F32:
    case NPY_F64: /* through f64_to_i64: a plain cast of an out-of-range float is undefined */
        for (int64_t k = 0; k < n; k++) out[k] = (int32_t)npy_get_i64(a, start + k);
        break;
    }
}

/* Scans blocks with a branch-free min/max first; only a block that fails is walked
 * element by element to find the first offender. */
#define SCAN_LOOP(T)                                                             \
    do {                                                                         \
        for (int64_t b0 = 0; b0 < a->count; b0 += 4096) {                        \
            int64_t b1 = a->count - b0 < 4096 ? a->count : b0 + 4096;            \
            T mn, mx;                                                            \
            memcpy(&mn, base + b0 * (int64_t)sizeof(T), sizeof mn);              \
            mx = mn;                                                             \
            for (int64_t k = b0; k < b1; k++) {                                  \
                T v;                                                             \
                memcpy(&v, base + k * (int64_t)sizeof(T), sizeof v);             \
                mn = v < mn ? v : mn;                                            \
                mx = v > mx ? v : mx;                                            \
            }                                                                    \
            if ((int64_t)mn >= lo && (int64_t)mx < hi) continue;                 \
            for (int64_t k = b0; k < b1; k++) {                                  \
                T v;                                                             \
                memcpy(&v, base + k * (int64_t)sizeof(T), sizeof v);             \
                int64_t w = (int64_t)v;                                          \
                if ((w < lo || w >= hi) && !(has_allowed && w == allowed)) return k; \
            }                                                                    \
        }                                                                        \
    } while (0)

int64_t npy_find_outside(const npy_array *a, int64_t lo, int64_t hi, int has_allowed,
                         int64_t allowed) {
    const char *base = a->data;
    switch (a->dtype) {
    case NPY_BOOL:
    case NPY_U8: SCAN_LOOP(uint8_t); break;
    case NPY_I8: SCAN_LOOP(int8_t); break;
    case NPY_I16: SCAN_LOOP(int16_t); break;
    case NPY_U16: SCAN_LOOP(uint16_t); break;
    case NPY_I32: SCAN_LOOP(int32_t); break;
    case NPY_U32: SCAN_LOOP(uint32_t); break;
    case NPY_I64: SCAN_LOOP(int64_t); break;
    case NPY_F32:
    case NPY_F64:
        for (int64_t k = 0; k < a->count; k++) {
            int64_t w = npy_get_i64(a, k);
            if ((w < lo || w >= hi) && !(has_allowed && w == allowed)) return k;
        }
        break;
    }
    return -1;
}

/* ---- writer ------------------------------------------------------------------------------ */

/* numpy's layout: dict text padded with spaces so that magic+len+header is a multiple of
 * 64 bytes, the last byte a newline. */
static char *build_header(const dtype_info *d, int ndim, const int64_t *shape, size_t *hlen) {
    char shape_txt[8 * 24 + 8] = "(";
    for (int i = 0; i < ndim; i++) {
        size_t n = strlen(shape_txt);
        snprintf(shape_txt + n, sizeof shape_txt - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    strcat(shape_txt, ndim == 1 ? ",)" : ")");
    char *dict = xasprintf("{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                           d->size == 1 ? '|' : '<', d->code, shape_txt);
    size_t n = strlen(dict);
    size_t total = (10 + n + 1 + 63) / 64 * 64;
    size_t len = total - 10;
    char *h = xmalloc(total);
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)(len & 0xff);
    h[9] = (char)(len >> 8);
    memcpy(h + 10, dict, n);
    memset(h + 10 + n, ' ', len - n - 1);
    h[total - 1] = '\n';
    free(dict);
    *hlen = total;
    return h;
}

int npy_write(const char *path, npy_dtype dtype, int ndim, const int64_t *shape,
              const void *data, trm_err *e) {
    const dtype_info *d = dtype_by_type(dtype);
    if (!d) return trm_errf(e, "%s: cannot write .npy: unknown dtype %d", path, (int)dtype);
    if (ndim < 0 || ndim > NPY_MAX_DIMS)
        return trm_errf(e, "%s: cannot write .npy with %d dimensions", path, ndim);
    int64_t count = 1, bytes;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return trm_errf(e, "%s: cannot write .npy: negative dimension", path);
        if (__builtin_mul_overflow(count, shape[i], &count))
            return trm_errf(e, "%s: cannot write .npy: shape product overflows", path);
    }
    if (__builtin_mul_overflow(count, (int64_t)d->size, &bytes) || (uint64_t)bytes > SIZE_MAX / 2)
        return trm_errf(e, "%s: cannot write .npy: data too large", path);
    if (bytes > 0 && !data) return trm_errf(e, "%s: cannot write .npy: no data", path);
    size_t hlen;
    char *buf = build_header(d, ndim, shape, &hlen);
    buf = xrealloc(buf, hlen + (size_t)bytes);
    if (bytes > 0) memcpy(buf + hlen, data, (size_t)bytes);
    int rc = trm_write_file_atomic(path, buf, hlen + (size_t)bytes, e);
    free(buf);
    return rc;
}
