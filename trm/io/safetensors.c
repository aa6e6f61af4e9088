/* safetensors.c — reading (mmap, every header field and byte range validated, CRC32
 * checked) and atomically writing safetensors files with trm's metadata. The JSON header
 * is parsed with libyaml; only what JSON can express is accepted (quoted strings for
 * names/dtypes/metadata, plain decimal integers for shapes and offsets, no aliases). A
 * hostile header costs time and memory linear in its size: at most ST_MAX_HEADER bytes,
 * CFG_MAX_NEST levels and ST_MAX_VALUES values, checked by a pass that builds nothing before
 * libyaml loads the document; names are found by binary search. */
#include "safetensors.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include <zlib.h>

#include "config/config.h"
#include "util/util.h"

/* Same cap as the reference implementation: a larger header is certainly not a model. */
#define ST_MAX_HEADER 100000000u
/* JSON values (strings, numbers, objects, arrays) in a header: about 20 per tensor, so room
 * for ~50000 tensors, while libyaml's document of them stays near 200 MB. */
#define ST_MAX_VALUES ((size_t)1 << 20)
/* libyaml refuses implicit keys longer than 1024 characters; stay safely below. */
#define ST_MAX_KEY_JSON 1000u
#define ST_CRC_PREFIX "crc32."
#define ST_FORMAT "trm-safetensors-1"

static const struct {
    const char *name;
    int size;
} dtype_info[] = {
    [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2}, [ST_F64] = {"F64", 8},
    [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4},   [ST_I16] = {"I16", 2},   [ST_I8] = {"I8", 1},
    [ST_U8] = {"U8", 1},   [ST_BOOL] = {"BOOL", 1},
};
#define ST_NDTYPES ((int)(sizeof dtype_info / sizeof dtype_info[0]))

int st_dtype_size(st_dtype t) { return (int)t >= 0 && (int)t < ST_NDTYPES ? dtype_info[t].size : 0; }

const char *st_dtype_name(st_dtype t) { return (int)t >= 0 && (int)t < ST_NDTYPES ? dtype_info[t].name : "?"; }

static int dtype_from_name(const char *s, st_dtype *out) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(dtype_info[i].name, s) == 0) {
            *out = (st_dtype)i;
            return 0;
        }
    return -1;
}

/* elements × element size, failing on overflow of size_t. */
static int tensor_nbytes(st_dtype dt, int ndim, const int64_t *shape, size_t *out) {
    uint64_t n = (uint64_t)st_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > UINT64_MAX / d) return -1;
        n *= d;
    }
    if (n > SIZE_MAX) return -1;
    *out = (size_t)n;
    return 0;
}

static uint32_t crc_of(const void *data, size_t n) { return (uint32_t)crc32_z(0L, (const Bytef *)data, n); }

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* ---- reader: header parsing -------------------------------------------------------- */

typedef struct {
    const char *path;
    yaml_document_t *doc;
    size_t data_size; /* bytes after the header */
    trm_err *e;
} hdr_ctx;

static yaml_node_t *node(hdr_ctx *c, int idx) { return yaml_document_get_node(c->doc, idx); }

static int is_string(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE &&
           (n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
            n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE);
}

static const char *sval(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

/* A string usable as a C string: a "\u0000" escape would silently truncate it. */
static int is_clean_string(const yaml_node_t *n) { return is_string(n) && strlen(sval(n)) == n->data.scalar.length; }

/* Every node must be reached at most once; a second reference is a YAML alias, which
 * JSON cannot express and which would let one entry masquerade as several. */
static int check_no_aliases(hdr_ctx *c) {
    size_t nn = (size_t)(c->doc->nodes.top - c->doc->nodes.start);
    unsigned char *refs = xcalloc(nn + 1, 1);
    int rc = 0;
    for (yaml_node_t *n = c->doc->nodes.start; n < c->doc->nodes.top && rc == 0; n++) {
        if (n->type == YAML_SEQUENCE_NODE) {
            for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top && rc == 0; it++)
                if (refs[*it]++) rc = -1;
        } else if (n->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top && rc == 0; p++)
                if (refs[p->key]++ || refs[p->value]++) rc = -1;
        }
    }
    free(refs);
    if (rc) trm_errf(c->e, "%s: header uses YAML aliases, which are not JSON", c->path);
    return rc;
}

/* JSON non-negative integer in a plain scalar: 0 ok, 1 not an integer, 2 negative, 3 too big. */
static int parse_count(const yaml_node_t *n, uint64_t max, uint64_t *out) {
    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 1;
    const char *s = sval(n);
    size_t len = n->data.scalar.length;
    if (len == 0) return 1;
    if (s[0] == '-') {
        size_t i = 1;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        return i == len && len > 1 ? 2 : 1;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (max - d) / 10) return 3;
        v = v * 10 + d;
    }
    if (len > 1 && s[0] == '0') return 1;
    *out = v;
    return 0;
}

static int count_err(hdr_ctx *c, const char *tname, const char *field, const yaml_node_t *n, int why) {
    const char *text = n && n->type == YAML_SCALAR_NODE ? sval(n) : "(not a scalar)";
    const char *what = why == 2 ? "is negative" : why == 3 ? "is too large" : "is not a non-negative integer";
    return trm_errf(c->e, "%s: tensor '%s': %s value '%.64s' %s", c->path, tname, field, text, what);
}

static int parse_shape(hdr_ctx *c, const char *tname, yaml_node_t *n, st_tensor *t) {
    if (!n || n->type != YAML_SEQUENCE_NODE)
        return trm_errf(c->e, "%s: tensor '%s': \"shape\" must be an array of integers", c->path, tname);
    yaml_node_item_t *it = n->data.sequence.items.start;
    long nd = n->data.sequence.items.top - it;
    if (nd > 8) return trm_errf(c->e, "%s: tensor '%s': shape has %ld dimensions (at most 8)", c->path, tname, nd);
    t->ndim = (int)nd;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t v;
        yaml_node_t *d = node(c, it[i]);
        int why = parse_count(d, (uint64_t)INT64_MAX, &v);
        if (why) return count_err(c, tname, "shape", d, why);
        t->shape[i] = (int64_t)v;
    }
    return 0;
}

static int parse_offsets(hdr_ctx *c, const char *tname, yaml_node_t *n, uint64_t off[2]) {
    if (!n || n->type != YAML_SEQUENCE_NODE || n->data.sequence.items.top - n->data.sequence.items.start != 2)
        return trm_errf(c->e, "%s: tensor '%s': \"data_offsets\" must be an array [begin, end]", c->path, tname);
    for (int i = 0; i < 2; i++) {
        yaml_node_t *d = node(c, n->data.sequence.items.start[i]);
        int why = parse_count(d, (uint64_t)SIZE_MAX, &off[i]);
        if (why) return count_err(c, tname, "data_offsets", d, why);
    }
    return 0;
}

static int parse_dtype(hdr_ctx *c, const char *tname, yaml_node_t *n, st_tensor *t) {
    if (!is_string(n)) return trm_errf(c->e, "%s: tensor '%s': \"dtype\" must be a string", c->path, tname);
    if (dtype_from_name(sval(n), &t->dtype) != 0)
        return trm_errf(
            c->e,
            "%s: tensor '%s': unknown dtype '%.32s' (expected F32, F16, BF16, F64, I64, I32, I16, I8, U8 or BOOL)",
            c->path, tname, sval(n));
    return 0;
}

/* Checks the size rule and the range; off[] is [begin, end] relative to the data section. */
static int check_span(hdr_ctx *c, st_tensor *t, const uint64_t off[2]) {
    char sh[256];
    size_t nbytes;
    shape_str(sh, sizeof sh, t->ndim, t->shape);
    if (off[0] > off[1])
        return trm_errf(c->e, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] has begin > end", c->path,
                        t->name, off[0], off[1]);
    if (tensor_nbytes(t->dtype, t->ndim, t->shape, &nbytes) != 0)
        return trm_errf(c->e, "%s: tensor '%s': shape %s overflows the size computation", c->path, t->name, sh);
    if ((uint64_t)nbytes != off[1] - off[0])
        return trm_errf(c->e,
                        "%s: tensor '%s': shape %s of %s needs %zu bytes but data_offsets [%" PRIu64 ", %" PRIu64
                        "] span %" PRIu64 " bytes",
                        c->path, t->name, sh, st_dtype_name(t->dtype), nbytes, off[0], off[1], off[1] - off[0]);
    if (off[1] > (uint64_t)c->data_size)
        return trm_errf(c->e, "%s: tensor '%s': data_offsets end %" PRIu64 " is beyond the data section (%zu bytes)",
                        c->path, t->name, off[1], c->data_size);
    t->offset = (size_t)off[0];
    t->nbytes = nbytes;
    return 0;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4 };

static int parse_tensor(hdr_ctx *c, yaml_node_t *n, st_tensor *t) {
    const char *tname = t->name;
    if (!n || n->type != YAML_MAPPING_NODE)
        return trm_errf(c->e, "%s: tensor '%s': expected an object with dtype, shape and data_offsets", c->path, tname);
    uint64_t off[2] = {0, 0};
    int have = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        if (!is_string(k)) return trm_errf(c->e, "%s: tensor '%s': a key is not a string", c->path, tname);
        int field = !strcmp(sval(k), "dtype")          ? F_DTYPE
                    : !strcmp(sval(k), "shape")        ? F_SHAPE
                    : !strcmp(sval(k), "data_offsets") ? F_OFFSETS
                                                       : 0;
        if (field == 0) continue; /* unknown fields are ignored, as the reference reader does */
        if (have & field) return trm_errf(c->e, "%s: tensor '%s': duplicate key \"%s\"", c->path, tname, sval(k));
        have |= field;
        int rc = field == F_DTYPE   ? parse_dtype(c, tname, v, t)
                 : field == F_SHAPE ? parse_shape(c, tname, v, t)
                                    : parse_offsets(c, tname, v, off);
        if (rc) return rc;
    }
    const char *missing = !(have & F_DTYPE)     ? "dtype"
                          : !(have & F_SHAPE)   ? "shape"
                          : !(have & F_OFFSETS) ? "data_offsets"
                                                : NULL;
    if (missing) return trm_errf(c->e, "%s: tensor '%s': missing \"%s\"", c->path, tname, missing);
    return check_span(c, t, off);
}

static int parse_meta(hdr_ctx *c, yaml_node_t *n, st_file *f) {
    if (!n || n->type != YAML_MAPPING_NODE)
        return trm_errf(c->e, "%s: \"__metadata__\" must be an object of strings", c->path);
    long np = n->data.mapping.pairs.top - n->data.mapping.pairs.start;
    f->meta = xcalloc((size_t)np + 1, sizeof *f->meta);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        if (!is_clean_string(k))
            return trm_errf(c->e, "%s: __metadata__: a key is not a string (or contains NUL)", c->path);
        if (!is_clean_string(v))
            return trm_errf(c->e, "%s: __metadata__: value of '%s' is not a string%s", c->path, sval(k),
                            is_string(v) ? " (contains NUL)" : "");
        f->meta[f->nmeta].key = xstrdup(sval(k));
        f->meta[f->nmeta].value = xstrdup(sval(v));
        f->nmeta++;
    }
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The first name occurring twice, or NULL. */
static const char *find_duplicate(char **names, int n) {
    if (n < 2) return NULL;
    char **s = xmalloc((size_t)n * sizeof *s);
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_str_ptr);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(s[i - 1], s[i]) == 0) dup = s[i];
    free(s);
    return dup;
}

static int parse_root(hdr_ctx *c, yaml_node_t *root, st_file *f) {
    long np = root->data.mapping.pairs.top - root->data.mapping.pairs.start;
    f->tensors = xcalloc((size_t)np + 1, sizeof *f->tensors);
    int have_meta = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        if (!is_clean_string(k))
            return trm_errf(c->e, "%s: header: a top-level key is not a string (or contains NUL)", c->path);
        if (strcmp(sval(k), "__metadata__") == 0) {
            if (have_meta++) return trm_errf(c->e, "%s: header: duplicate \"__metadata__\"", c->path);
            if (parse_meta(c, v, f)) return -1;
            continue;
        }
        st_tensor *t = &f->tensors[f->ntensors++];
        t->name = xstrdup(sval(k));
        if (parse_tensor(c, v, t)) return -1;
    }
    char **names = xmalloc(((size_t)f->ntensors + (size_t)f->nmeta + 1) * sizeof *names);
    for (int i = 0; i < f->ntensors; i++)
        names[i] = f->tensors[i].name;
    const char *dup = find_duplicate(names, f->ntensors);
    if (dup) trm_errf(c->e, "%s: duplicate tensor name '%s'", c->path, dup);
    for (int i = 0; !dup && i < f->nmeta; i++)
        names[i] = f->meta[i].key;
    if (!dup && (dup = find_duplicate(names, f->nmeta)) != NULL)
        trm_errf(c->e, "%s: __metadata__: duplicate key '%s'", c->path, dup);
    free(names);
    return dup ? -1 : 0;
}

static int yaml_err(hdr_ctx *c, yaml_parser_t *p) {
    return trm_errf(c->e, "%s: header is not valid JSON: %s%s%s (header line %zu, column %zu)", c->path,
                    p->problem ? p->problem : "parse error", p->context ? " " : "", p->context ? p->context : "",
                    p->problem_mark.line + 1, p->problem_mark.column + 1);
}

/* Loads the header text and fills f->tensors / f->meta (offsets only, no data pointers). */
static int parse_header(hdr_ctx *c, const char *hdr, size_t n, st_file *f) {
    size_t i = 0;
    while (i < n && (hdr[i] == ' ' || hdr[i] == '\n' || hdr[i] == '\r' || hdr[i] == '\t'))
        i++;
    if (i == n || hdr[i] != '{') return trm_errf(c->e, "%s: header is not a JSON object", c->path);
    char *what = xasprintf("%s (header)", c->path);
    int over = cfg_check_limits(hdr, n, what, CFG_MAX_NEST, ST_MAX_VALUES, c->e);
    free(what);
    if (over) return -1;
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    if (!yaml_parser_initialize(&parser)) return trm_errf(c->e, "%s: cannot initialise the YAML parser", c->path);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    yaml_parser_set_input_string(&parser, (const unsigned char *)hdr, n);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_err(c, &parser);
        yaml_parser_delete(&parser);
        return -1;
    }
    int rc = 0;
    /* Anything after the object ("{} garbage", a second document) is not JSON either. */
    if (!yaml_parser_load(&parser, &extra)) {
        rc = yaml_err(c, &parser);
    } else {
        if (yaml_document_get_root_node(&extra))
            rc = trm_errf(c->e, "%s: header has extra content after the JSON object", c->path);
        yaml_document_delete(&extra);
    }
    c->doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (rc == 0 && (!root || root->type != YAML_MAPPING_NODE))
        rc = trm_errf(c->e, "%s: header is not a JSON object", c->path);
    if (rc == 0) rc = check_no_aliases(c);
    if (rc == 0) rc = parse_root(c, root, f);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    c->doc = NULL;
    return rc;
}

/* ---- reader: layout and checksums ------------------------------------------------------ */

static int cmp_by_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int check_overlaps(const char *path, st_file *f, trm_err *e) {
    if (f->ntensors < 2) return 0;
    const st_tensor **s = xmalloc((size_t)f->ntensors * sizeof *s);
    int n = 0;
    for (int i = 0; i < f->ntensors; i++)
        if (f->tensors[i].nbytes > 0) s[n++] = &f->tensors[i]; /* empty tensors own no bytes */
    qsort(s, (size_t)n, sizeof *s, cmp_by_offset);
    int rc = 0;
    for (int i = 1; i < n && rc == 0; i++)
        if (s[i - 1]->offset + s[i - 1]->nbytes > s[i]->offset)
            rc = trm_errf(e, "%s: tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap", path, s[i - 1]->name,
                          s[i - 1]->offset, s[i - 1]->offset + s[i - 1]->nbytes, s[i]->name, s[i]->offset,
                          s[i]->offset + s[i]->nbytes);
    free(s);
    return rc;
}

static int parse_crc_hex(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint32_t)d;
    }
    if (s[8] != 0) return -1;
    *out = v;
    return 0;
}

static int verify_one(const char *path, const st_file *f, const st_meta_kv *kv, unsigned char *seen, trm_err *e) {
    const char *tname = kv->key + strlen(ST_CRC_PREFIX);
    const st_tensor *t = st_find(f, tname);
    uint32_t want;
    if (!t) return trm_errf(e, "%s: __metadata__ '%s' names no tensor in the file", path, kv->key);
    if (parse_crc_hex(kv->value, &want) != 0)
        return trm_errf(e, "%s: __metadata__ '%s': expected 8 lowercase hex digits, got '%.32s'", path, kv->key,
                        kv->value);
    uint32_t got = crc_of(t->data, t->nbytes);
    if (got != want)
        return trm_errf(e, "%s: checksum mismatch for tensor '%s' (stored %08" PRIx32 ", data has %08" PRIx32 ")",
                        path, tname, want, got);
    seen[t - f->tensors] = 1;
    return 0;
}

/* Every crc32 entry is checked; a file whose format says trm wrote it must have one for every
 * tensor (trm's writer always adds them), so a removed entry cannot hide altered data. Files
 * from elsewhere may have none. */
static int verify_checksums(const char *path, const st_file *f, trm_err *e) {
    unsigned char *seen = xcalloc((size_t)f->ntensors + 1, 1);
    int rc = 0;
    for (int i = 0; i < f->nmeta && !rc; i++)
        if (strncmp(f->meta[i].key, ST_CRC_PREFIX, strlen(ST_CRC_PREFIX)) == 0)
            rc = verify_one(path, f, &f->meta[i], seen, e);
    const char *fmt = st_meta_get(f, "format");
    for (int i = 0; i < f->ntensors && !rc && fmt && !strncmp(fmt, "trm-", 4); i++)
        if (!seen[i])
            rc = trm_errf(e, "%s: tensor '%s' has no crc32 entry, but the file says trm wrote it (format '%.40s') and "
                             "trm writes one for every tensor: the file was altered",
                          path, f->tensors[i].name, fmt);
    free(seen);
    return rc;
}

int st_count_checksums(const st_file *f) {
    int n = 0;
    for (int i = 0; i < f->nmeta; i++)
        n += strncmp(f->meta[i].key, ST_CRC_PREFIX, strlen(ST_CRC_PREFIX)) == 0;
    return n;
}

static int open_mapped(st_file *f, const char *path, trm_err *e) {
    const unsigned char *base = f->map.data;
    size_t size = f->map.size;
    if (size < 8) return trm_errf(e, "%s: file too short (%zu bytes) for a safetensors header", path, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | base[i];
    if (n < 2) return trm_errf(e, "%s: header length %" PRIu64 " is too small (at least 2, for \"{}\")", path, n);
    if (n > (uint64_t)(size - 8))
        return trm_errf(e, "%s: header length %" PRIu64 " exceeds the file size (%zu bytes; truncated file?)", path, n,
                        size);
    if (n > ST_MAX_HEADER)
        return trm_errf(e, "%s: header length %" PRIu64 " exceeds the %u-byte limit", path, n, ST_MAX_HEADER);
    hdr_ctx c = {.path = path, .doc = NULL, .data_size = size - 8 - (size_t)n, .e = e};
    if (parse_header(&c, (const char *)base + 8, (size_t)n, f)) return -1;
    st_index(f);
    const unsigned char *data = base + 8 + n;
    for (int i = 0; i < f->ntensors; i++)
        f->tensors[i].data = data + f->tensors[i].offset;
    if (check_overlaps(path, f, e)) return -1;
    return verify_checksums(path, f, e);
}

int st_open(st_file *f, const char *path, trm_err *e) {
    memset(f, 0, sizeof *f);
    if (trm_mmap_open(&f->map, path, e)) return -1;
    if (open_mapped(f, path, e) != 0) {
        st_close(f);
        return trm_err_oneline(e); /* messages quote the header's text */
    }
    return 0;
}

void st_close(st_file *f) {
    for (int i = 0; i < f->ntensors; i++)
        free(f->tensors[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    for (int i = 0; i < f->nowned; i++)
        free(f->owned[i]);
    free(f->owned);
    trm_mmap_close(&f->map);
    memset(f, 0, sizeof *f);
}

static int cmp_tensor_ptr_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

void st_index(st_file *f) {
    free(f->by_name);
    f->by_name = xmalloc(((size_t)f->ntensors + 1) * sizeof *f->by_name);
    for (int i = 0; i < f->ntensors; i++)
        f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, (size_t)f->ntensors, sizeof *f->by_name, cmp_tensor_ptr_name);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    if (f->by_name) { /* names are distinct: the readers refuse a file that repeats one */
        st_tensor key = {.name = (char *)name};
        const st_tensor *kp = &key;
        st_tensor *const *hit = bsearch(&kp, f->by_name, (size_t)f->ntensors, sizeof *f->by_name, cmp_tensor_ptr_name);
        return hit ? *hit : NULL;
    }
    for (int i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *st_meta_get(const st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

/* ---- float conversion ------------------------------------------------------------------ */

static float bits_to_f32(uint32_t b) {
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return bits_to_f32(sign | 0x7F800000u | (man << 13)); /* inf, nan */
    if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0) return bits_to_f32(sign);
    /* Subnormal half: every one is a normal float; shift the leading 1 into place. */
    uint32_t e = 113;
    while (!(man & 0x400u)) {
        man <<= 1;
        e--;
    }
    return bits_to_f32(sign | (e << 23) | ((man & 0x3FFu) << 13));
}

static float f64_to_f32(double d) {
    /* Beyond FLT_MAX + half an ulp the nearest float is infinity; spelled out because an
     * out-of-range conversion is undefined in ISO C. */
    if (d >= 0x1.ffffffp127) return INFINITY;
    if (d <= -0x1.ffffffp127) return -INFINITY;
    return (float)d;
}

int st_read_f32(const st_tensor *t, float *out, trm_err *e) {
    const unsigned char *p = t->data;
    int es = st_dtype_size(t->dtype);
    size_t n = es ? t->nbytes / (size_t)es : 0;
    switch (t->dtype) {
    case ST_F32:
        if (n) memcpy(out, p, n * sizeof(float)); /* the format is little-endian, as is every host we run on */
        return 0;
    case ST_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    case ST_BF16:
        for (size_t i = 0; i < n; i++)
            out[i] = bits_to_f32((uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16);
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, sizeof d);
            out[i] = f64_to_f32(d);
        }
        return 0;
    default:
        return trm_errf(e, "tensor '%s' has dtype %s, not a floating-point type", t->name ? t->name : "?",
                        st_dtype_name(t->dtype));
    }
}

/* ---- writer ---------------------------------------------------------------------------- */

void st_writer_init(st_writer *w) { memset(w, 0, sizeof *w); }

void st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape, const void *data) {
    if (w->ntensors == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->tensors = xrealloc(w->tensors, (size_t)w->cap * sizeof *w->tensors);
    }
    st_tensor *t = &w->tensors[w->ntensors++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->dtype = dtype;
    t->ndim = ndim; /* out-of-range ndim is reported by st_writer_save */
    for (int i = 0; i < ndim && i < 8; i++)
        t->shape[i] = shape[i];
    t->data = data;
}

void st_writer_meta(st_writer *w, const char *key, const char *value) {
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = xstrdup(value);
            return;
        }
    if (w->nmeta == w->mcap) {
        w->mcap = w->mcap ? 2 * w->mcap : 8;
        w->meta = xrealloc(w->meta, (size_t)w->mcap * sizeof *w->meta);
    }
    w->meta[w->nmeta].key = xstrdup(key);
    w->meta[w->nmeta].value = xstrdup(value);
    w->nmeta++;
}

void st_writer_free(st_writer *w) {
    for (int i = 0; i < w->ntensors; i++)
        free(w->tensors[i].name);
    for (int i = 0; i < w->nmeta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->tensors);
    free(w->meta);
    memset(w, 0, sizeof *w);
}

static size_t escaped_len(const char *s) {
    json_buf b;
    json_buf_init(&b);
    json_escape_into(&b, s, strlen(s));
    size_t n = b.len;
    json_buf_free(&b);
    return n;
}

/* Checks every tensor and computes nbytes; names must be unique and readable back. */
static int writer_validate(st_writer *w, const char *path, trm_err *e) {
    for (int i = 0; i < w->ntensors; i++) {
        st_tensor *t = &w->tensors[i];
        if (strcmp(t->name, "__metadata__") == 0)
            return trm_errf(e, "%s: '__metadata__' cannot be a tensor name", path);
        if (escaped_len(t->name) + strlen(ST_CRC_PREFIX) > ST_MAX_KEY_JSON)
            return trm_errf(e, "%s: tensor name '%.64s...' is too long (JSON keys are limited to %u bytes)", path,
                            t->name, ST_MAX_KEY_JSON - (unsigned)strlen(ST_CRC_PREFIX));
        if (st_dtype_size(t->dtype) == 0)
            return trm_errf(e, "%s: tensor '%s': invalid dtype %d", path, t->name, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > 8)
            return trm_errf(e, "%s: tensor '%s': %d dimensions (0 to 8 supported)", path, t->name, t->ndim);
        if (tensor_nbytes(t->dtype, t->ndim, t->shape, &t->nbytes) != 0)
            return trm_errf(e, "%s: tensor '%s': negative or overflowing shape", path, t->name);
        if (t->nbytes && !t->data) return trm_errf(e, "%s: tensor '%s': no data", path, t->name);
    }
    for (int i = 0; i < w->nmeta; i++)
        if (escaped_len(w->meta[i].key) > ST_MAX_KEY_JSON)
            return trm_errf(e, "%s: metadata key '%.64s...' is too long", path, w->meta[i].key);
    char **names = xmalloc(((size_t)w->ntensors + 1) * sizeof *names);
    for (int i = 0; i < w->ntensors; i++)
        names[i] = w->tensors[i].name;
    const char *dup = find_duplicate(names, w->ntensors);
    int rc = dup ? trm_errf(e, "%s: duplicate tensor name '%s'", path, dup) : 0;
    free(names);
    return rc;
}

/* Data order: larger elements first (stable), like the reference writer, so tensors are
 * contiguous (no gaps, which the reference reader rejects) and each one starts at a
 * multiple of its element size; the data section itself starts 8-aligned. */
static int *data_order(const st_writer *w) {
    int *ord = xmalloc(((size_t)w->ntensors + 1) * sizeof *ord);
    int k = 0;
    for (int sz = 8; sz >= 1; sz /= 2)
        for (int i = 0; i < w->ntensors; i++)
            if (st_dtype_size(w->tensors[i].dtype) == sz) ord[k++] = i;
    return ord;
}

static void header_meta(json_buf *b, const st_writer *w) {
    json_key(b, "__metadata__");
    json_obj_begin(b);
    int have_format = 0;
    for (int i = 0; i < w->nmeta; i++)
        have_format |= strcmp(w->meta[i].key, "format") == 0;
    if (!have_format) json_kv_str(b, "format", ST_FORMAT);
    for (int i = 0; i < w->nmeta; i++)
        if (strncmp(w->meta[i].key, ST_CRC_PREFIX, strlen(ST_CRC_PREFIX)) != 0) /* ours replace the caller's */
            json_kv_str(b, w->meta[i].key, w->meta[i].value);
    for (int i = 0; i < w->ntensors; i++) {
        char key[ST_MAX_KEY_JSON + 16], hex[16];
        const st_tensor *t = &w->tensors[i];
        snprintf(key, sizeof key, ST_CRC_PREFIX "%s", t->name);
        snprintf(hex, sizeof hex, "%08" PRIx32, crc_of(t->data, t->nbytes));
        json_kv_str(b, key, hex);
    }
    json_obj_end(b);
}

static void header_tensor(json_buf *b, const st_tensor *t) {
    json_key(b, t->name);
    json_obj_begin(b);
    json_kv_str(b, "dtype", st_dtype_name(t->dtype));
    json_key(b, "shape");
    json_arr_begin(b);
    for (int d = 0; d < t->ndim; d++)
        json_int(b, t->shape[d]);
    json_arr_end(b);
    json_key(b, "data_offsets");
    json_arr_begin(b);
    json_uint(b, t->offset);
    json_uint(b, (uint64_t)t->offset + t->nbytes);
    json_arr_end(b);
    json_obj_end(b);
}

int st_writer_save(st_writer *w, const char *path, trm_err *e) {
    if (writer_validate(w, path, e)) return -1;
    int *ord = data_order(w);
    size_t total = 0;
    for (int k = 0; k < w->ntensors; k++) {
        st_tensor *t = &w->tensors[ord[k]];
        t->offset = total;
        total += t->nbytes;
    }
    json_buf b;
    json_buf_init(&b);
    json_obj_begin(&b);
    header_meta(&b, w);
    for (int i = 0; i < w->ntensors; i++)
        header_tensor(&b, &w->tensors[i]);
    json_obj_end(&b);
    while (b.len % 8)
        json_raw(&b, " ");
    size_t hlen = b.len, flen = 8 + hlen + total;
    unsigned char *buf = xmalloc(flen);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, b.p, hlen);
    for (int k = 0; k < w->ntensors; k++) {
        const st_tensor *t = &w->tensors[ord[k]];
        if (t->nbytes) memcpy(buf + 8 + hlen + t->offset, t->data, t->nbytes);
    }
    json_buf_free(&b);
    free(ord);
    int rc = trm_write_file_atomic(path, buf, flen, e);
    free(buf);
    return rc;
}
