/* fuzz_targets.c — the fuzz targets of fuzz_targets.h: safetensors (header JSON and the
 * config it stores), torch.save (zip + pickle), the pickle machine alone, .npy, YAML configs
 * with overrides and interpolation, dataset.json, ARC JSON and the Sudoku and Maze builders'
 * CSV readers. Each reads an input exactly as trm reads such a file. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "data/data.h"
#include "io/io.h"

/* ---- buffers ------------------------------------------------------------------------------- */

void fz_input_set(fz_input *in, const void *p, size_t n) {
    free(in->p);
    in->p = xmalloc(n + 1);
    if (n) memcpy(in->p, p, n);
    in->n = n;
}

void fz_corpus_add(fz_corpus *c, const void *p, size_t n) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 8;
        c->v = xrealloc(c->v, (size_t)c->cap * sizeof *c->v);
    }
    c->v[c->n] = (fz_input){NULL, 0};
    fz_input_set(&c->v[c->n++], p, n);
}

void fz_corpus_free(fz_corpus *c) {
    for (int i = 0; i < c->n; i++) free(c->v[i].p);
    free(c->v);
    memset(c, 0, sizeof *c);
}

static int add_file(fz_corpus *out, const char *path, trm_err *e) {
    size_t n;
    char *text = trm_read_file(path, &n, e);
    if (!text) return -1;
    fz_corpus_add(out, text, n);
    free(text);
    return 0;
}

static int write_input(const char *path, const uint8_t *d, size_t n, trm_err *e) {
    /* a new file each time: ext4 writes a truncated file's data back on close (auto_da_alloc),
     * which made each input cost a disk write */
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f) return trm_errf(e, "%s: cannot create", path);
    int ok = fwrite(d, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? 0 : trm_errf(e, "%s: cannot write", path);
}

const char *fz_bad_answer(int rc, const trm_err *e) {
    if (rc == 0) return NULL;
    if (rc != -1) return "the reader returned neither 0 nor -1";
    if (!e->msg[0]) return "refused without a message";
    if (strchr(e->msg, '\n') || strchr(e->msg, '\r')) return "a message of more than one line";
    return NULL;
}

/* Every byte of every tensor read, so that a view past its storage shows (ASan sees it in
 * an inflated member or a gathered copy). */
static unsigned touch_tensors(const st_file *f) {
    unsigned sum = 0;
    for (int i = 0; i < f->ntensors; i++)
        for (size_t k = 0; k < f->tensors[i].nbytes; k++) sum += ((const unsigned char *)f->tensors[i].data)[k];
    return sum;
}

/* ---- safetensors ------------------------------------------------------------------------------ */

static const char seed_config[] =
    "arch:\n  name: recursive_reasoning.trm@TinyRecursiveReasoningModel_ACTV1\n  hidden_size: 64\n"
    "  puzzle_emb_ndim: ${.hidden_size}\n  loss: {name: losses@ACTLossHead, loss_type: stablemax}\n"
    "lr: 1.0e-4\nrun_name: run-${arch.hidden_size}\nlist: &l [1, 2, 3]\ncopy: *l\nescaped: \\${not}\n";

static int st_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    float w[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    uint16_t b[4] = {0x3f80, 0xc000, 0x7fc0, 0};
    int64_t iv[2] = {-1, 1ll << 40}, s23[2] = {2, 3}, s4[1] = {4}, s2[1] = {2}, s0[1] = {0};
    st_writer wr;
    st_writer_init(&wr);
    st_writer_add(&wr, "inner.w", ST_F32, 2, s23, w);
    st_writer_add(&wr, "inner.H_init", ST_BF16, 1, s4, b);
    st_writer_add(&wr, "step_ids", ST_I64, 1, s2, iv);
    st_writer_add(&wr, "empty", ST_F32, 1, s0, NULL);
    st_writer_meta(&wr, "format", "trm-checkpoint-1");
    st_writer_meta(&wr, "step", "42");
    st_writer_meta(&wr, "config", seed_config);
    int rc = st_writer_save(&wr, c->file, e);
    st_writer_free(&wr);
    if (rc || add_file(out, c->file, e)) return -1;
    /* a file from elsewhere: no checksums, another format, a scalar */
    static const char hdr[] = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F16\",\"shape\":[],"
                              "\"data_offsets\":[0,2]},\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[2,5]}}";
    uint8_t buf[8 + sizeof hdr + 5];
    size_t hl = sizeof hdr - 1;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    memcpy(buf + 8 + hl, "\x00\x3c\x01\x02\x03", 5);
    fz_corpus_add(out, buf, 8 + hl + 5);
    return 0;
}

/* As `trm generate` and `trm inspect` take a file: open it (checksums verified), read the
 * float tensors, and compose the config it stores. */
static int st_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    if (write_input(c->file, d, n, e)) return -1;
    st_file f;
    if (tensor_file_open(&f, c->file, e)) return -1;
    int rc = 0;
    for (int i = 0; i < f.ntensors && !rc; i++) {
        const st_tensor *t = &f.tensors[i];
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64) continue;
        float *x = xmalloc((t->nbytes / (size_t)st_dtype_size(t->dtype) + 1) * sizeof *x);
        rc = st_read_f32(t, x, e);
        free(x);
    }
    const char *cfg = rc ? NULL : st_meta_get(&f, "config");
    if (cfg) {
        static const cfg_search search = {NULL, 0, 1, NULL};
        cfg_node *root = cfg_from_stored(c->file, cfg, &search, 0, NULL, e);
        if (!root) rc = -1;
        cfg_free(root);
    }
    if (!rc) (void)trm_checkpoint_format(&f);
    volatile unsigned sum = touch_tensors(&f);
    (void)sum;
    st_close(&f);
    return rc;
}

/* The header: what the length prefix says, within the input. */
static int st_region(const uint8_t *d, size_t n, size_t *off, size_t *len) {
    if (n < 8) return -1;
    uint64_t l = 0;
    for (int i = 7; i >= 0; i--) l = l << 8 | d[i];
    if (l > n - 8) return -1;
    *off = 8;
    *len = (size_t)l;
    return 0;
}

static void st_fix(fz_input *in, size_t off, size_t len) {
    (void)off;
    for (int i = 0; i < 8 && in->n >= 8; i++) in->p[i] = (uint8_t)((uint64_t)len >> (8 * i));
}

static const fz_token json_dict[] = {
    FZ_T("{"), FZ_T("}"), FZ_T("["), FZ_T("]"), FZ_T("\""), FZ_T(","), FZ_T(":"), FZ_T("\"a\""),
    FZ_T("\"a\":"), FZ_T("null"), FZ_T("true"), FZ_T("-1"), FZ_T("0"), FZ_T("1e308"), FZ_T("-0"),
    FZ_T("18446744073709551616"), FZ_T("9223372036854775807"), FZ_T("4294967296"), FZ_T("\\u0000"),
    FZ_T("\\ud800"), FZ_T("\"\\\"\""), FZ_T(" "), FZ_T("\n"), FZ_T("&a "), FZ_T("*a"), FZ_T("!!str "),
    FZ_T("? "), FZ_T("- "), FZ_T("#"), FZ_T("'"), FZ_T("%YAML 1.1\n"), FZ_T("---\n"), FZ_T("...\n"),
    FZ_T("\xef\xbb\xbf"), FZ_T("\xff"), FZ_T("\"__metadata__\""), FZ_T("\"dtype\""), FZ_T("\"shape\""),
    FZ_T("\"data_offsets\""), FZ_T("\"F32\""), FZ_T("\"BF16\""), FZ_T("\"F64\""), FZ_T("\"I64\""),
    FZ_T("\"crc32.inner.w\""), FZ_T("\"format\""), FZ_T("\"trm-checkpoint-1\""), FZ_T("\"config\""),
    FZ_T("[0,0]"), FZ_T("[1,2,3,4,5,6,7,8,9]"), FZ_T("${"), FZ_T("${arch.hidden_size}"), {NULL, 0}};

/* ---- torch.save: zip + pickle ------------------------------------------------------------------- */

static int pt_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[2] = {2, 3}, s6[1] = {6};
    int32_t iv[6] = {1, -1, 2, -2, 3, -3};
    st_writer wr;
    st_writer_init(&wr);
    st_writer_add(&wr, "model.inner.w", ST_F32, 2, s23, w);
    st_writer_add(&wr, "model.inner.ids", ST_I32, 1, s6, iv);
    int rc = pt_save(&wr, c->file, 1, e) || add_file(out, c->file, e) || pt_save(&wr, c->file, 0, e) ||
             add_file(out, c->file, e);
    st_writer_free(&wr);
    /* torch's own layout: memo, _metadata, a deflated member, shared and strided storages */
    if (!rc && trm_file_exists(TRM_SOURCE_DIR "/tests/data/torch_like.pt"))
        rc = add_file(out, TRM_SOURCE_DIR "/tests/data/torch_like.pt", e);
    return rc ? -1 : 0;
}

static int pt_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    if (write_input(c->file, d, n, e)) return -1;
    st_file f;
    if (tensor_file_open(&f, c->file, e)) return -1;
    volatile unsigned sum = touch_tensors(&f);
    (void)sum;
    st_close(&f);
    return 0;
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Rewrites one field of a zip record (sizes, offsets, counts, lengths, method) with a value
 * that sits on an edge: the record kinds and their fields' offsets and widths. */
static void zip_special(fz_rng *r, fz_input *in) {
    static const struct {
        uint32_t sig;
        uint8_t off[8], width[8];
        int n;
    } recs[] = {
        {0x04034b50u, {8, 14, 18, 22, 26, 28}, {2, 4, 4, 4, 2, 2}, 6},                /* local header */
        {0x02014b50u, {10, 16, 20, 24, 28, 30, 32, 42}, {2, 4, 4, 4, 2, 2, 2, 4}, 8}, /* central entry */
        {0x06054b50u, {8, 10, 12, 16, 20}, {2, 2, 4, 4, 2}, 5},                        /* end record */
        {0x06064b50u, {24, 32, 40, 48}, {8, 8, 8, 8}, 4},                              /* zip64 end record */
    };
    static const uint64_t edge[] = {0, 1, 2, 8, 0x7f, 0xff, 0xffff, 0x7fffffffu, 0xffffffffu, 1ull << 32,
                                    0x7fffffffffffffffull, ~0ull};
    size_t hits[64];
    int which[64], nh = 0;
    for (size_t i = 0; i + 4 <= in->n && nh < 64; i++) {
        if (in->p[i] != 'P' || in->p[i + 1] != 'K') continue;
        uint32_t sig = (uint32_t)in->p[i] | (uint32_t)in->p[i + 1] << 8 | (uint32_t)in->p[i + 2] << 16 |
                       (uint32_t)in->p[i + 3] << 24;
        for (int k = 0; k < 4; k++)
            if (sig == recs[k].sig) hits[nh] = i, which[nh++] = k;
    }
    if (!nh) return;
    int h = (int)fz_below(r, (size_t)nh), k = which[h], f = (int)fz_below(r, (size_t)recs[k].n);
    size_t at = hits[h] + recs[k].off[f];
    if (at + recs[k].width[f] > in->n) return;
    uint64_t v = fz_below(r, 4) ? edge[fz_below(r, sizeof edge / sizeof edge[0])] : fz_next(r);
    if (fz_below(r, 3) == 0) { /* near the old value: off by a little */
        uint64_t old = 0;
        for (int i = recs[k].width[f] - 1; i >= 0; i--) old = old << 8 | in->p[at + (size_t)i];
        v = old + fz_below(r, 129) - 64;
    }
    put_le(in->p + at, v, recs[k].width[f]);
}

static const fz_token zip_dict[] = {
    FZ_T("PK\x01\x02"), FZ_T("PK\x03\x04"), FZ_T("PK\x05\x06"), FZ_T("PK\x06\x06"), FZ_T("PK\x06\x07"),
    FZ_T("archive/"), FZ_T("data.pkl"), FZ_T("data/0"), FZ_T("byteorder"), FZ_T("little"), FZ_T("big"),
    FZ_T("constants.pkl"), FZ_T("\xff\xff\xff\xff"), FZ_T("\x00\x00\x00\x00"), {NULL, 0}};

/* ---- pickle ---------------------------------------------------------------------------------------- */

static int pk_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s0[1] = {0};
    pk_wtensor t[3] = {{"model.inner.w", ST_F32, 2, s23, "0"},
                       {"model.inner.b", ST_BF16, 1, s4, "1"},
                       {"model.inner.e", ST_I64, 0, s0, "2"}};
    for (int ordered = 0; ordered < 2; ordered++) {
        size_t n;
        unsigned char *p = pk_write_tensors(t, 3, ordered, &n);
        fz_corpus_add(out, p, n);
        free(p);
    }
    /* the fixture's data.pkl: Python's pickler with memo, _metadata, strided views */
    trm_mmap m;
    if (trm_mmap_open(&m, TRM_SOURCE_DIR "/tests/data/torch_like.pt", NULL) != 0) return 0;
    zip_reader z;
    if (zip_open_mem(&z, m.data, m.size, "torch_like.pt", e) == 0) {
        for (int i = 0; i < z.n; i++) {
            const unsigned char *d;
            void *owned;
            size_t l = strlen(z.ents[i].name);
            if (l < 8 || strcmp(z.ents[i].name + l - 8, "data.pkl")) continue;
            if (zip_member(&z, &z.ents[i], &d, &owned, e)) continue;
            fz_corpus_add(out, d, (size_t)z.ents[i].usize);
            free(owned);
        }
        zip_close(&z);
    }
    trm_mmap_close(&m);
    (void)c;
    return 0;
}

static int pk_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    pk_tensors t;
    if (pk_read_tensors(d, n, c->file, &t, e)) return -1;
    pk_tensors_free(&t);
    return 0;
}

static const fz_token pk_dict[] = {
    FZ_T("]"), FZ_T("a"), FZ_T("("), FZ_T("e"), FZ_T("}"), FZ_T("u"), FZ_T("s"), FZ_T("l"), FZ_T("d"),
    FZ_T(")"), FZ_T("t"), FZ_T("\x85"), FZ_T("\x86"), FZ_T("\x87"), FZ_T("0"), FZ_T("1"), FZ_T("2"),
    FZ_T("N"), FZ_T("\x88"), FZ_T("\x89"), FZ_T("R"), FZ_T("b"), FZ_T("Q"), FZ_T("q\x00"), FZ_T("q\x01"),
    FZ_T("h\x00"), FZ_T("h\x01"), FZ_T("r\x00\x00\x00\x00"), FZ_T("j\x00\x00\x00\x00"),
    FZ_T("r\xff\xff\xff\x7f"), FZ_T("\x94"), FZ_T("K\x05"), FZ_T("M\xff\xff"), FZ_T("J\xff\xff\xff\xff"),
    FZ_T("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"), FZ_T("\x8a\x09"),
    FZ_T("G\x7f\xf0\x00\x00\x00\x00\x00\x00"), FZ_T("X\x05\x00\x00\x00hello"), FZ_T("\x8c\x07storage"),
    FZ_T("X\xff\xff\xff\xff"), FZ_T("\x8d\xff\xff\xff\xff\xff\xff\xff\xff"), FZ_T("\x80\x02"),
    FZ_T("\x80\x06"), FZ_T("\x95\x10\x00\x00\x00\x00\x00\x00\x00"), FZ_T("ccollections\nOrderedDict\n"),
    FZ_T("ctorch._utils\n_rebuild_tensor_v2\n"), FZ_T("ctorch._utils\n_rebuild_parameter\n"),
    FZ_T("ctorch\nFloatStorage\n"), FZ_T("ctorch\nBFloat16Storage\n"), FZ_T("cos\nsystem\n"),
    FZ_T("cbuiltins\neval\n"), FZ_T("csubprocess\nPopen\n"), FZ_T("\x93"), FZ_T("\x81"), FZ_T("c"), FZ_T("."),
    FZ_T("V"), FZ_T("I"), FZ_T("P"), FZ_T("S'x'\n"), {NULL, 0}};

/* ---- npy --------------------------------------------------------------------------------------- */

static int npy_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    int32_t i4[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    uint8_t u1[5] = {0, 1, 2, 3, 255};
    float f4[4] = {0.5f, -1, 3, 1e30f};
    int64_t i8 = 7;
    const struct {
        npy_dtype t;
        int nd;
        int64_t shape[2];
        const void *data;
    } arr[] = {{NPY_I32, 2, {3, 4}, i4}, {NPY_U8, 1, {5, 0}, u1}, {NPY_F32, 2, {2, 2}, f4},
               {NPY_I64, 0, {0, 0}, &i8}, {NPY_BOOL, 2, {0, 3}, NULL}};
    for (size_t k = 0; k < sizeof arr / sizeof arr[0]; k++)
        if (npy_write(c->file, arr[k].t, arr[k].nd, arr[k].shape, arr[k].data, e) || add_file(out, c->file, e))
            return -1;
    /* format 2.0: the same array with a 4-byte header length */
    fz_input *v1 = &out->v[0];
    size_t hl = (size_t)v1->p[8] | (size_t)v1->p[9] << 8, n = v1->n + 2;
    uint8_t *p = xmalloc(n);
    memcpy(p, "\x93NUMPY\x02\x00", 8);
    put_le(p + 8, hl, 4);
    memcpy(p + 12, v1->p + 10, v1->n - 10);
    fz_corpus_add(out, p, n);
    free(p);
    return 0;
}

static int npy_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    if (write_input(c->file, d, n, e)) return -1;
    npy_array a;
    if (npy_open(&a, c->file, 1, e)) return -1;
    (void)npy_find_outside(&a, 0, 10, 1, -100);
    (void)npy_get_f64(&a, a.count - 1);
    npy_close(&a);
    return 0;
}

static int npy_region(const uint8_t *d, size_t n, size_t *off, size_t *len) {
    if (n < 10 || memcmp(d, "\x93NUMPY", 6)) return -1;
    *off = d[6] == 1 ? 10 : 12;
    size_t l = (size_t)d[8] | (size_t)d[9] << 8;
    if (d[6] != 1) l = n >= 12 ? l | (size_t)d[10] << 16 | (size_t)d[11] << 24 : n;
    if (*off > n || l > n - *off) return -1;
    *len = l;
    return 0;
}

static void npy_fix(fz_input *in, size_t off, size_t len) {
    if (off == 10 && len < 65536) put_le(in->p + 8, len, 2);
    else if (off == 12 && in->n >= 12) put_le(in->p + 8, len, 4);
}

static const fz_token npy_dict[] = {
    FZ_T("{"), FZ_T("}"), FZ_T("("), FZ_T(")"), FZ_T("["), FZ_T("]"), FZ_T(","), FZ_T(":"), FZ_T("'"),
    FZ_T("\""), FZ_T(" "), FZ_T("\n"), FZ_T("\0"), FZ_T("'descr'"), FZ_T("'<i4'"), FZ_T("'|u1'"),
    FZ_T("'<f8'"), FZ_T("'>i8'"), FZ_T("'|b1'"), FZ_T("'<U4'"), FZ_T("'O'"), FZ_T("'shape'"),
    FZ_T("'fortran_order'"), FZ_T("True"), FZ_T("False"), FZ_T("None"), FZ_T("L"), FZ_T("0"), FZ_T("1"),
    FZ_T("9223372036854775807"), FZ_T("9223372036854775808"), FZ_T("4294967296"), FZ_T("3037000500"),
    FZ_T("(3037000500, 3037000500, 2)"), FZ_T("(0, 9223372036854775807, 9223372036854775807)"),
    FZ_T("\x93NUMPY\x01\x00"), FZ_T("\x93NUMPY\x03\x00"), {NULL, 0}};

/* ---- YAML configs with overrides and interpolation ------------------------------------------------ */

static int cfg_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    static const char *const embedded[] = {"cfg_pretrain.yaml", "arch/trm.yaml", "arch/hrm.yaml"};
    for (size_t i = 0; i < sizeof embedded / sizeof embedded[0]; i++) {
        size_t n;
        const char *t = cfg_embedded_lookup(embedded[i], &n);
        if (t) fz_corpus_add(out, t, n);
    }
    static const char own[] =
        "#!arch.hidden_size=32\n#!+extra=[1, {a: b}]\n#!~drop\n#!arch=trm\n"
        "base: &b {x: 1, y: [a, b, 'c d']}\nother:\n  <<: *b\n  z: ${base.x}\ndrop: 1\n"
        "arch:\n  hidden_size: 64\n  emb: ${.hidden_size}\n  up: ${..lr}\nlr: 1.0e-4\n"
        "name: \"run-${arch.hidden_size}-${lr}\"\nlit: \\${not.this}\nlist: [\"${lr}\", \"${base}\"]\n";
    static const char json[] = "{\"a\": [1, 2.5, \"x\", null, true], \"b\": {\"c\": \"${a}\"}}\n";
    fz_corpus_add(out, own, sizeof own - 1);
    fz_corpus_add(out, json, sizeof json - 1);
    (void)c, (void)e;
    return 0;
}

/* As a config file, with the overrides on its "#!" lines (YAML comments) applied, then resolved
 * and written back out as `trm config show` does. */
static int cfg_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    static const cfg_search search = {NULL, 0, 1, NULL};
    cfg_node *root = cfg_parse((const char *)d, n, c->file, e);
    if (!root) return -1;
    int rc = 0, nov = 0;
    for (size_t i = 0; i + 2 < n && !rc && nov < 8; i++) {
        if ((i && d[i - 1] != '\n') || d[i] != '#' || d[i + 1] != '!') continue;
        const uint8_t *end = memchr(d + i, '\n', n - i);
        char *ov = xstrndup((const char *)d + i + 2, (size_t)((end ? end : d + n) - d - i - 2));
        if (strlen(ov) == (size_t)((end ? end : d + n) - d - i - 2)) /* no NUL inside */
            rc = root->type == CFG_MAP ? cfg_apply_override(root, &search, ov, e) : 0, nov++;
        free(ov);
    }
    if (!rc) rc = cfg_resolve(root, e);
    if (!rc) free(cfg_to_yaml(root));
    cfg_free(root);
    return rc;
}

/* An interpolation or alias chain appended: each value twice the one before. */
static void cfg_special(fz_rng *r, fz_input *in) {
    trm_sbuf b = {0};
    sb_putn(&b, (const char *)in->p, in->n);
    int len = 4 + (int)fz_below(r, 40), kind = (int)fz_below(r, 3);
    sb_printf(&b, "\nq0: %s\n", kind == 2 ? "&q0 [x, y]" : "xxxxxxxx");
    for (int i = 1; i < len; i++) {
        if (kind == 0) sb_printf(&b, "q%d: ${q%d}${q%d}\n", i, i - 1, i - 1);
        else if (kind == 1) sb_printf(&b, "q%d: [${q%d}, ${q%d}]\n", i, i - 1, i - 1);
        else sb_printf(&b, "q%d: &q%d [*q%d, *q%d]\n", i, i, i - 1, i - 1);
    }
    fz_input_set(in, b.p, b.len < FZ_MAX_INPUT ? b.len : FZ_MAX_INPUT);
    free(b.p);
}

static const fz_token cfg_dict[] = {
    FZ_T("${"), FZ_T("}"), FZ_T("${a}"), FZ_T("${.a}"), FZ_T("${..a}"), FZ_T("${arch.hidden_size}"),
    FZ_T("\\${"), FZ_T("${a.0}"), FZ_T("${:}"), FZ_T("&a "), FZ_T("*a"), FZ_T("<<: *a"), FZ_T("["), FZ_T("]"),
    FZ_T("{"), FZ_T("}"), FZ_T(": "), FZ_T(", "), FZ_T("\n- "), FZ_T("\n  "), FZ_T("\n    "), FZ_T("\""),
    FZ_T("'"), FZ_T("!!str "), FZ_T("!!int "), FZ_T("!!binary "), FZ_T("~"), FZ_T("null"), FZ_T("1e308"),
    FZ_T("-.inf"), FZ_T(".nan"), FZ_T("0x10"), FZ_T("0o7"), FZ_T("yes"), FZ_T("\n#!"), FZ_T("\n#!a="),
    FZ_T("\n#!+n="), FZ_T("\n#!++lr=1"), FZ_T("\n#!~arch"), FZ_T("\n#!arch=hrm"), FZ_T("\n#!x=[[[[1]]]]"),
    FZ_T("="), FZ_T("\t"), FZ_T("\r\n"), FZ_T("? "), FZ_T("|\n  "), FZ_T(">-\n  "), FZ_T("%TAG ! x\n"),
    FZ_T("--- "), FZ_T("..."), FZ_T("\xef\xbb\xbf"), FZ_T("\xc3\x28"), FZ_T("\"\\u0000\""),
    FZ_T("defaults:\n  - arch: trm\n  - _self_\n"), {NULL, 0}};

/* ---- dataset.json -------------------------------------------------------------------------------- */

static int ds_setup(fz_ctx *c, trm_err *e) {
    char *out = trm_path_join(c->dir, "ds");
    trm_sudoku4_opts o = {.out = out, .n_train = 6, .n_test = 2, .min_clues = 6, .max_clues = 10, .seed = 1,
                          .force = 1};
    int rc = trm_build_sudoku4(&o, e);
    free(c->file);
    c->file = trm_path_join(out, "train/dataset.json");
    free(out);
    return rc;
}

static int ds_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) { return add_file(out, c->file, e); }

static int ds_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    if (write_input(c->file, d, n, e)) return -1;
    char *dir = trm_path_join(c->dir, "ds");
    const char *paths[1] = {dir};
    trm_dataset ds;
    int rc = trm_dataset_open(&ds, paths, 1, "train", e);
    if (!rc) trm_dataset_close(&ds);
    free(dir);
    return rc;
}

static const fz_token ds_dict[] = {
    FZ_T("{"), FZ_T("}"), FZ_T("["), FZ_T("]"), FZ_T("\""), FZ_T(","), FZ_T(":"), FZ_T("null"), FZ_T("-1"),
    FZ_T("0"), FZ_T("2147483648"), FZ_T("9223372036854775808"), FZ_T("1e400"), FZ_T("NaN"),
    FZ_T("\"pad_id\""), FZ_T("\"ignore_label_id\""), FZ_T("\"blank_identifier_id\""), FZ_T("\"vocab_size\""),
    FZ_T("\"seq_len\""), FZ_T("\"num_puzzle_identifiers\""), FZ_T("\"total_groups\""),
    FZ_T("\"mean_puzzle_examples\""), FZ_T("\"total_puzzles\""), FZ_T("\"sets\""), FZ_T("\"all\""),
    FZ_T("\"..\""), FZ_T("\"a/b\""), FZ_T("&a "), FZ_T("*a"), {NULL, 0}};

/* ---- ARC JSON ------------------------------------------------------------------------------------ */

static const char arc_seed[] =
    "{\"p1\": {\"train\": [{\"input\": [[0, 1], [2, 3]], \"output\": [[3, 2], [1, 0]]},"
    " {\"input\": [[5]], \"output\": [[6]]}], \"test\": [{\"input\": [[1, 1, 1]]}]},"
    " \"p2\": {\"test\": [{\"input\": [[9, 8], [7, 6], [5, 4]], \"output\": [[0]]}],"
    " \"train\": [{\"input\": [[4]], \"output\": [[4, 4], [4, 4]]}]}}"
    "\f{\"p1\": [[[2, 2, 2]]], \"p2\": [[[1]]]}";

static int arc_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    fz_corpus_add(out, arc_seed, sizeof arc_seed - 1);
    fz_corpus_add(out, arc_seed, (size_t)(strchr(arc_seed, '\f') - arc_seed)); /* without solutions */
    (void)c, (void)e;
    return 0;
}

/* The input is the challenges file, and after a form feed the solutions file. */
static int arc_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    const uint8_t *ff = memchr(d, '\f', n);
    char *prefix = trm_path_join(c->dir, "fz"), *ch = xasprintf("%s_training_challenges.json", prefix),
         *so = xasprintf("%s_training_solutions.json", prefix);
    int rc = write_input(ch, d, ff ? (size_t)(ff - d) : n, e);
    if (!rc && ff) rc = write_input(so, ff + 1, n - (size_t)(ff - d) - 1, e);
    else unlink(so);
    const char *subsets[1] = {"training"};
    trm_arc_opts o = {.input_file_prefix = prefix, .subsets = subsets, .nsubsets = 1, .test_set_name = "training",
                      .seed = 1, .puzzle_identifiers_start = 1, .quiet = 1};
    if (!rc) rc = trm_arc_read(&o, e);
    free(prefix), free(ch), free(so);
    return rc;
}

static const fz_token arc_dict[] = {
    FZ_T("{"), FZ_T("}"), FZ_T("["), FZ_T("]"), FZ_T("\""), FZ_T(","), FZ_T(":"), FZ_T("\"train\""),
    FZ_T("\"test\""), FZ_T("\"input\""), FZ_T("\"output\""), FZ_T("[[0]]"), FZ_T("[[1,2],[3]]"), FZ_T("10"),
    FZ_T("-1"), FZ_T("\f"), FZ_T("\"p1\""),
    FZ_T("[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"), {NULL, 0}};

/* ---- the builders' CSV readers ------------------------------------------------------------------- */

static int sudoku_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    trm_sudoku_gen_cli_opts o = {.out = c->file, .count = 3, .seed = 5, .min_clues = 30, .max_clues = 40, .force = 1};
    return trm_sudoku_gen_csv(&o, e) || add_file(out, c->file, e) ? -1 : 0;
}

static int sudoku_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    if (write_input(c->file, d, n, e)) return -1;
    trm_sudoku_rows rows;
    if (trm_sudoku_read_csv(c->file, 1, 0, &rows, e)) return -1;
    trm_sudoku_rows_free(&rows);
    return 0;
}

/* The generator runs OpenMP threads, which would outlive it in this process and confuse the
 * leak checker of the children forked later: it runs in a child of its own. */
static int maze_seeds(fz_ctx *c, fz_corpus *out, trm_err *e) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        trm_maze_gen_opts o = {.out = c->file, .count = 3, .size = 7, .seed = 3, .force = 1};
        _exit(trm_maze_gen(&o, e) ? 1 : 0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return trm_errf(e, "%s: the maze generator failed", c->file);
    return add_file(out, c->file, e);
}

static int maze_run(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e) {
    if (write_input(c->file, d, n, e)) return -1;
    int64_t rows;
    int side;
    return trm_maze_read_csv(c->file, &rows, &side, e);
}

static const fz_token csv_dict[] = {
    FZ_T(","), FZ_T("\""), FZ_T("\"\""), FZ_T("\n"), FZ_T("\r\n"), FZ_T("\r"), FZ_T("."), FZ_T("0"),
    FZ_T("9"), FZ_T("#"), FZ_T(" "), FZ_T("S"), FZ_T("G"), FZ_T("o"), FZ_T("\xef\xbb\xbf"),
    FZ_T("source,question,answer,rating\n"), FZ_T("-9223372036854775809"), FZ_T("99999999999999999999"), {NULL, 0}};

/* ---- the table of targets ------------------------------------------------------------------------- */

static const fz_target targets[] = {
    {"safetensors", "safetensors header + stored config", NULL, st_seeds, st_run, json_dict, st_region, st_fix, NULL},
    {"torch_zip", "torch.save zip archive", NULL, pt_seeds, pt_run, zip_dict, NULL, NULL, zip_special},
    {"pickle", "torch.save pickle", NULL, pk_seeds, pk_run, pk_dict, NULL, NULL, NULL},
    {"npy", ".npy array", NULL, npy_seeds, npy_run, npy_dict, npy_region, npy_fix, NULL},
    {"config", "YAML config, overrides, ${}", NULL, cfg_seeds, cfg_run, cfg_dict, NULL, NULL, cfg_special},
    {"dataset_json", "dataset.json", ds_setup, ds_seeds, ds_run, ds_dict, NULL, NULL, NULL},
    {"arc_json", "ARC challenges/solutions JSON", NULL, arc_seeds, arc_run, arc_dict, NULL, NULL, NULL},
    {"sudoku_csv", "Sudoku builder CSV", NULL, sudoku_seeds, sudoku_run, csv_dict, NULL, NULL, NULL},
    {"maze_csv", "Maze builder CSV", NULL, maze_seeds, maze_run, csv_dict, NULL, NULL, NULL},
};

const fz_target *fz_targets(int *n) {
    *n = (int)(sizeof targets / sizeof targets[0]);
    return targets;
}

const fz_target *fz_find(const char *name) {
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(targets[i].name, name)) return &targets[i];
    return NULL;
}

int fz_ctx_init(fz_ctx *c, const fz_target *t, const char *root, trm_err *e) {
    memset(c, 0, sizeof *c);
    c->t = t;
    c->dir = trm_path_join(root, t->name);
    c->file = xasprintf("%s/input.%s", c->dir, t->name);
    if (trm_mkdirs(c->dir, e)) return -1;
    return t->setup ? t->setup(c, e) : 0;
}

void fz_ctx_free(fz_ctx *c) {
    free(c->dir);
    free(c->file);
    memset(c, 0, sizeof *c);
}
