/* test_torch_pt.c — torch.save files: the torch-layout fixture (Python's pickler, torch's
 * persistent ids, memo, _metadata, a deflated member, shared and strided storages) read value
 * by value; round trips of every dtype through trm's writer; zip64; pickles refused by opcode
 * or class name; and the zip and pickle readers fuzzed (every truncation, random bytes, huge
 * sizes, random opcode streams): a clear error, never a crash (the sanitizer build checks the
 * memory accesses). */
#include <check.h>

#include "check_main.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "io/pickle.h"
#include "io/torch_pt.h"
#include "io/zip.h"

#define TMP_DIR TRM_TEST_TMP "/torch_pt"
#define FIXTURE TRM_SOURCE_DIR "/tests/data/torch_like.pt"

static char *tmp_path(const char *name) {
    trm_err e;
    ck_assert_msg(trm_mkdirs(TMP_DIR, &e) == 0, "%s", e.msg);
    return xasprintf("%s/%s", TMP_DIR, name);
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    if (n) ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static const st_tensor *must_find(const st_file *f, const char *name) {
    const st_tensor *t = st_find(f, name);
    ck_assert_msg(t != NULL, "tensor %s missing", name);
    return t;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 17;
}

/* ---- reading what torch writes ----------------------------------------------------------- */

START_TEST(reads_torch_layout_fixture) {
    st_file f;
    trm_err e;
    ck_assert_msg(pt_open(&f, FIXTURE, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(f.ntensors, 5); /* "step": 5 is not a tensor */
    const st_tensor *h = must_find(&f, "_orig_mod.model.inner.H_init");
    ck_assert_int_eq(h->dtype, ST_BF16);
    float v[6];
    ck_assert_int_eq(st_read_f32(h, v, &e), 0);
    ck_assert(v[0] == 1.0f && v[1] == 2.0f && v[2] == -1.0f && v[3] == 3.0f);
    const st_tensor *w = must_find(&f, "w");
    ck_assert_int_eq(w->ndim, 2);
    ck_assert(w->shape[0] == 2 && w->shape[1] == 3);
    ck_assert_int_eq(st_read_f32(w, v, &e), 0);
    for (int i = 0; i < 6; i++) ck_assert(v[i] == (float)(i + 1));
    const st_tensor *wt = must_find(&f, "w_t"); /* the transpose, gathered */
    ck_assert(wt->shape[0] == 3 && wt->shape[1] == 2);
    ck_assert_int_eq(st_read_f32(wt, v, &e), 0);
    const float want_t[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++) ck_assert_msg(v[i] == want_t[i], "w_t[%d] = %g", i, v[i]);
    const st_tensor *row = must_find(&f, "w_row1"); /* offset view into the same storage */
    ck_assert_int_eq(st_read_f32(row, v, &e), 0);
    ck_assert(v[0] == 4 && v[1] == 5 && v[2] == 6);
    const st_tensor *ids = must_find(&f, "nested.ids");
    ck_assert_int_eq(ids->dtype, ST_I32);
    int32_t iv[3];
    memcpy(iv, ids->data, sizeof iv);
    ck_assert(iv[0] == -7 && iv[1] == 0 && iv[2] == 1 << 30);
    ck_assert_str_eq(trm_ckpt_canonical_name(h->name), "inner.H_init");
    st_close(&f);
}
END_TEST

START_TEST(canonical_names) {
    static const char *const cases[][2] = {
        {"_orig_mod.model.inner.q_head.bias", "inner.q_head.bias"}, {"model.inner.H_init", "inner.H_init"},
        {"module._orig_mod.model.inner.x", "inner.x"},              {"inner.x", "inner.x"},
        {"optim.exp_avg.inner.x", "optim.exp_avg.inner.x"},         {"raw.inner.x", "raw.inner.x"},
        {"modelx.inner", "modelx.inner"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(trm_ckpt_canonical_name(cases[i][0]), cases[i][1]);
}
END_TEST

/* ---- trm's writer --------------------------------------------------------------------------- */

static void check_same(const st_writer *w, const st_file *f) {
    ck_assert_int_eq(f->ntensors, w->ntensors);
    for (int i = 0; i < w->ntensors; i++) {
        const st_tensor *a = &w->tensors[i], *b = must_find(f, a->name);
        ck_assert_int_eq(a->dtype, b->dtype);
        ck_assert_int_eq(a->ndim, b->ndim);
        size_t n = (size_t)st_dtype_size(a->dtype);
        for (int d = 0; d < a->ndim; d++) {
            ck_assert(a->shape[d] == b->shape[d]);
            n *= (size_t)a->shape[d];
        }
        ck_assert_uint_eq(b->nbytes, n);
        ck_assert_msg(n == 0 || !memcmp(a->data, b->data, n), "%s: data differs", a->name);
    }
}

START_TEST(round_trip_every_dtype) {
    static const st_dtype dts[] = {ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL};
    unsigned char data[10][64];
    st_writer w;
    st_writer_init(&w);
    int64_t sh[3] = {2, 2, 2}, zero[2] = {0, 3};
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < 64; i++) data[k][i] = (unsigned char)(k * 31 + i * 7 + (dts[k] == ST_BOOL ? 0 : 1));
        if (dts[k] == ST_BOOL)
            for (int i = 0; i < 64; i++) data[k][i] &= 1;
        char name[32];
        snprintf(name, sizeof name, "model.inner.t%d", k);
        st_writer_add(&w, name, dts[k], 3, sh, data[k]);
    }
    st_writer_add(&w, "scalar", ST_F32, 0, sh, data[0]);
    st_writer_add(&w, "empty", ST_F32, 2, zero, NULL);
    for (int ordered = 0; ordered < 2; ordered++) {
        char *path = tmp_path(ordered ? "rt_ordered.pt" : "rt_dict.pt");
        trm_err e;
        ck_assert_msg(pt_save(&w, path, ordered, &e) == 0, "%s", e.msg);
        ck_assert(pt_is_torch_file(path));
        st_file f;
        ck_assert_msg(tensor_file_open(&f, path, &e) == 0, "%s", e.msg);
        check_same(&w, &f);
        for (int i = 0; i < w.ntensors; i++) ck_assert_str_eq(f.tensors[i].name, w.tensors[i].name); /* order kept */
        /* stored members, aligned to 64 bytes as torch aligns them */
        for (int i = 0; i < f.ntensors; i++)
            if (f.tensors[i].nbytes)
                ck_assert_uint_eq(((size_t)((const unsigned char *)f.tensors[i].data - (const unsigned char *)f.map.data)) % 64, 0);
        st_close(&f);
        free(path);
    }
    st_writer_free(&w);
}
END_TEST

/* More than pickle's 1000-item SETITEMS batch, and sizes past 2^31 (LONG1) in the pickle. */
START_TEST(many_tensors_and_long_sizes) {
    enum { N = 2500 };
    static float vals[N];
    st_writer w;
    st_writer_init(&w);
    int64_t one[1] = {1};
    for (int i = 0; i < N; i++) {
        vals[i] = (float)i * 0.5f;
        char name[32];
        snprintf(name, sizeof name, "k%d", i);
        st_writer_add(&w, name, ST_F32, 1, one, &vals[i]);
    }
    char *path = tmp_path("many.pt");
    trm_err e;
    ck_assert_msg(pt_save(&w, path, 1, &e) == 0, "%s", e.msg);
    st_file f;
    ck_assert_msg(pt_open(&f, path, &e) == 0, "%s", e.msg);
    check_same(&w, &f);
    st_close(&f);
    st_writer_free(&w);
    free(path);

    int64_t big[2] = {(int64_t)1 << 33, 3}, neg_free[1] = {70000};
    pk_wtensor t[2] = {{"big", ST_F32, 2, big, "0"}, {"mid", ST_I64, 1, neg_free, "1"}};
    size_t n;
    unsigned char *p = pk_write_tensors(t, 2, 0, &n);
    pk_tensors out;
    ck_assert_msg(pk_read_tensors(p, n, "mem", &out, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(out.n, 2);
    ck_assert(out.t[0].shape[0] == (int64_t)1 << 33 && out.t[0].stride[0] == 3 && out.t[0].storage_numel == 3 * ((int64_t)1 << 33));
    ck_assert(out.t[1].shape[0] == 70000 && out.t[1].dtype == ST_I64);
    pk_tensors_free(&out);
    free(p);
}
END_TEST

START_TEST(zip64_records_read_back) {
    static const char a[] = "hello", b[] = "";
    unsigned char c[300];
    for (int i = 0; i < 300; i++) c[i] = (unsigned char)i;
    zip_writer w;
    zip_writer_init(&w);
    w.force_zip64 = 1;
    zip_writer_add(&w, "x/a", a, 5);
    zip_writer_add(&w, "x/b", b, 0);
    zip_writer_add(&w, "x/c", c, 300);
    size_t n;
    unsigned char *buf = zip_writer_build(&w, &n);
    zip_writer_free(&w);
    zip_reader z;
    trm_err e;
    ck_assert_msg(zip_open_mem(&z, buf, n, "z64", &e) == 0, "%s", e.msg);
    ck_assert_int_eq(z.n, 3);
    const unsigned char *d;
    void *owned;
    const zip_entry *en = zip_find(&z, "x/c");
    ck_assert_ptr_nonnull(en);
    ck_assert_int_eq(zip_member(&z, en, &d, &owned, &e), 0);
    ck_assert_ptr_null(owned);
    ck_assert(en->usize == 300 && !memcmp(d, c, 300));
    en = zip_find(&z, "x/b");
    ck_assert(en && en->usize == 0);
    zip_close(&z);
    /* the data of a damaged member fails its CRC */
    size_t off = (size_t)(d - buf);
    buf[off + 7] ^= 1;
    ck_assert_int_eq(zip_open_mem(&z, buf, n, "z64", &e), 0);
    ck_assert_int_eq(zip_member(&z, zip_find(&z, "x/c"), &d, &owned, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "CRC32 mismatch"));
    zip_close(&z);
    free(buf);
}
END_TEST

/* ---- refusals -------------------------------------------------------------------------------- */

static void expect_pickle_refused(const char *what, const unsigned char *p, size_t n, const char *fragment) {
    pk_tensors out;
    trm_err e = {{0}};
    ck_assert_msg(pk_read_tensors(p, n, what, &out, &e) == -1, "%s: accepted", what);
    ck_assert_msg(strstr(e.msg, fragment) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, fragment);
}

#define REFUSE(what, lit, frag) expect_pickle_refused(what, (const unsigned char *)(lit), sizeof(lit) - 1, frag)

START_TEST(pickles_refused_by_name) {
    REFUSE("os.system", "\x80\x02" "cos\nsystem\n" "X\x02\x00\x00\x00ls" "\x85R.", "class os.system is refused");
    REFUSE("builtins.eval", "\x80\x04\x8c\x08" "builtins" "\x8c\x04" "eval" "\x93.", "class builtins.eval is refused");
    REFUSE("NEWOBJ", "\x80\x02" "ccollections\nOrderedDict\n)\x81.", "opcode NEWOBJ (0x81)");
    REFUSE("INST", "\x80\x02(icollections\nOrderedDict\n.", "opcode INST (0x69)");
    REFUSE("REDUCE of a list", "\x80\x02])R.", "REDUCE of something that is not a known class");
    REFUSE("unknown", "\x80\x02\xff.", "unknown opcode 0xff");
    REFUSE("protocol 6", "\x80\x06}.", "protocol 6 is newer");
    REFUSE("no STOP", "\x80\x02}", "without STOP");
    REFUSE("string past the end", "\x80\x02X\xff\xff\x00\x00" "ab", "longer than the rest");
    REFUSE("memo index", "\x80\x02}r\xff\xff\xff\x7f.", "memo index");
    REFUSE("memo never stored", "\x80\x02h\x05.", "never stored");
    REFUSE("underflow", "\x80\x02R.", "stack underflow");
    REFUSE("a list", "\x80\x02].", "not a dict of tensors");
    REFUSE("no tensors", "\x80\x02}X\x01\x00\x00\x00" "a" "K\x01s.", "holds no tensors");
    REFUSE("persid", "\x80\x02}X\x01\x00\x00\x00" "a" "K\x01Qs.", "not torch's ('storage'");
    /* a view reaching past its storage: 2x3 floats over a 5-element storage */
    REFUSE("view past the storage",
           "\x80\x02}X\x01\x00\x00\x00" "a" "ctorch._utils\n_rebuild_tensor_v2\n(" "(X\x07\x00\x00\x00storage" "ctorch\nFloatStorage\n"
           "X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpu" "K\x05tQ" "K\x00" "K\x02K\x03\x86" "K\x03K\x01\x86" "\x89}tRs.",
           "reaches element 6 of a storage of 5");
    REFUSE("storage key with a slash",
           "\x80\x02}X\x01\x00\x00\x00" "a" "ctorch._utils\n_rebuild_tensor_v2\n(" "(X\x07\x00\x00\x00storage" "ctorch\nFloatStorage\n"
           "X\x04\x00\x00\x00" "../0" "X\x03\x00\x00\x00" "cpu" "K\x05tQ" "K\x00" "K\x02\x85" "K\x01\x85" "\x89}tRs.",
           "not a plain name");
    REFUSE("complex storage",
           "\x80\x02}X\x01\x00\x00\x00" "a" "ctorch._utils\n_rebuild_tensor_v2\n(" "(X\x07\x00\x00\x00storage" "ctorch\nComplexFloatStorage\n",
           "class torch.ComplexFloatStorage is refused");
}
END_TEST

START_TEST(files_refused_with_a_message) {
    trm_err e;
    st_file f;
    char *p = tmp_path("legacy.pt");
    write_bytes(p, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
    ck_assert_int_eq(tensor_file_open(&f, p, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "legacy format"));
    free(p);
    /* a zip that is not torch.save's */
    static const char a[] = "x";
    zip_writer w;
    zip_writer_init(&w);
    zip_writer_add(&w, "flat.txt", a, 1);
    p = tmp_path("flat.zip");
    ck_assert_int_eq(zip_writer_save(&w, p, &e), 0);
    zip_writer_free(&w);
    ck_assert_int_eq(tensor_file_open(&f, p, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not in one folder"));
    free(p);
    zip_writer_init(&w);
    zip_writer_add(&w, "m/constants.pkl", a, 1);
    zip_writer_add(&w, "m/code/x.py", a, 1);
    p = tmp_path("script.pt");
    ck_assert_int_eq(zip_writer_save(&w, p, &e), 0);
    zip_writer_free(&w);
    ck_assert_int_eq(tensor_file_open(&f, p, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "TorchScript"));
    free(p);
    /* a storage member of the wrong size */
    float v[4] = {1, 2, 3, 4};
    int64_t sh[1] = {4};
    st_writer sw;
    st_writer_init(&sw);
    st_writer_add(&sw, "t", ST_F32, 1, sh, v);
    size_t plen;
    pk_wtensor wt = {"t", ST_F32, 1, sh, "0"};
    unsigned char *pkl = pk_write_tensors(&wt, 1, 1, &plen);
    zip_writer_init(&w);
    zip_writer_add(&w, "s/data.pkl", pkl, plen);
    zip_writer_add(&w, "s/data/0", v, 12);
    p = tmp_path("short_storage.pt");
    ck_assert_int_eq(zip_writer_save(&w, p, &e), 0);
    zip_writer_free(&w);
    ck_assert_int_eq(tensor_file_open(&f, p, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "has 12 bytes, not 4 elements of F32"));
    free(p);
    /* big-endian files are refused */
    zip_writer_init(&w);
    zip_writer_add(&w, "s/data.pkl", pkl, plen);
    zip_writer_add(&w, "s/byteorder", "big", 3);
    zip_writer_add(&w, "s/data/0", v, 16);
    p = tmp_path("big_endian.pt");
    ck_assert_int_eq(zip_writer_save(&w, p, &e), 0);
    zip_writer_free(&w);
    ck_assert_int_eq(tensor_file_open(&f, p, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "big-endian"));
    free(p);
    /* two tensors of one storage, the second saying it is 100 elements long: its view would
     * reach past the member's 16 bytes (each tensor's claim is checked, not only the first's) */
    int64_t sh100[1] = {100};
    pk_wtensor two[2] = {{"a", ST_F32, 1, sh, "0"}, {"b", ST_F32, 1, sh100, "0"}};
    size_t plen2;
    unsigned char *pkl2 = pk_write_tensors(two, 2, 1, &plen2);
    zip_writer_init(&w);
    zip_writer_add(&w, "s/data.pkl", pkl2, plen2);
    zip_writer_add(&w, "s/data/0", v, 16);
    p = tmp_path("shared_storage_claims.pt");
    ck_assert_int_eq(zip_writer_save(&w, p, &e), 0);
    zip_writer_free(&w);
    ck_assert_int_eq(tensor_file_open(&f, p, &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor 'b': storage data/0 has 16 bytes, not 100 elements of F32"), "%s", e.msg);
    free(p);
    free(pkl2);
    free(pkl);
    st_writer_free(&sw);
}
END_TEST

/* ---- fuzzing --------------------------------------------------------------------------------- */

static void open_or_refuse(const char *path) {
    st_file f;
    trm_err e;
    e.msg[0] = 0;
    if (pt_open(&f, path, &e) == 0) {
        for (int t = 0; t < f.ntensors; t++) { /* accepted tensors read within their buffers */
            const st_tensor *x = &f.tensors[t];
            unsigned char sink = 0;
            for (size_t k = 0; k < x->nbytes; k++) sink ^= ((const unsigned char *)x->data)[k];
            (void)sink;
        }
        st_close(&f);
    } else {
        ck_assert_msg(e.msg[0] != 0, "refused without a message");
    }
}

static void fuzz_file(const unsigned char *orig, size_t n, const char *name, uint64_t seed) {
    char *path = tmp_path(name);
    unsigned char *buf = xmalloc(n);
    trm_err e;
    st_file f;
    for (size_t len = 0; len < n; len++) { /* the end record is last: every truncation loses it */
        write_bytes(path, orig, len);
        ck_assert_msg(pt_open(&f, path, &e) == -1, "truncation to %zu bytes accepted", len);
        ck_assert_ptr_nonnull(strstr(e.msg, path));
    }
    for (int iter = 0; iter < 1500; iter++) { /* random bytes */
        memcpy(buf, orig, n);
        for (int k = 0; k < 1 + iter % 4; k++) buf[lcg(&seed) % n] = (unsigned char)lcg(&seed);
        write_bytes(path, buf, n);
        open_or_refuse(path);
    }
    for (size_t off = 0; off + 4 <= n; off++) { /* huge sizes, offsets and counts anywhere */
        static const uint32_t huge[] = {0xFFFFFFFFu, 0x7FFFFFFFu, 0x80000000u, 0xFFFFu};
        memcpy(buf, orig, n);
        uint32_t v = huge[off % 4];
        memcpy(buf + off, &v, 4);
        write_bytes(path, buf, n);
        open_or_refuse(path);
    }
    free(buf);
    free(path);
}

START_TEST(fuzz_zip_and_files) {
    size_t n;
    trm_err e;
    unsigned char *fx = (unsigned char *)trm_read_file(FIXTURE, &n, &e);
    ck_assert_msg(fx != NULL, "%s", e.msg);
    fuzz_file(fx, n, "fuzz_fixture.pt", 7);
    free(fx);
    float v[6] = {1, 2, 3, 4, 5, 6};
    int64_t sh[2] = {2, 3};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "model.inner.a", ST_F32, 2, sh, v);
    st_writer_add(&w, "b", ST_F32, 1, sh, v);
    char *p = tmp_path("fuzz_src.pt");
    ck_assert_int_eq(pt_save(&w, p, 1, &e), 0);
    st_writer_free(&w);
    unsigned char *own = (unsigned char *)trm_read_file(p, &n, &e);
    fuzz_file(own, n, "fuzz_own.pt", 11);
    free(own);
    free(p);
}
END_TEST

/* Random opcode streams straight into the pickle machine: mostly refused, never a crash. */
START_TEST(fuzz_pickle_opcodes) {
    static const unsigned char ops[] = {'(', '.', '0', '1', '2', 'J', 'K', 'M', 'N', 'Q', 'R', 'T', 'U', 'X', 'a', 'b',
                                        'c', 'd', '}', 'e', 'h', 'j', 'l', ']', 'q', 'r', 's', 't', ')', 'u', 'G', 0x80,
                                        0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 'B', 'C', 0x8c, 0x8d, 0x8e, 0x93, 0x94, 0x95,
                                        0x81, 'i', 'o', 0xff};
    static const char *const words[] = {"collections\nOrderedDict\n", "torch._utils\n_rebuild_tensor_v2\n",
                                        "torch\nFloatStorage\n", "storage", "0", "cpu"};
    uint64_t seed = 99;
    unsigned char buf[256];
    int accepted = 0;
    for (int iter = 0; iter < 30000; iter++) {
        size_t n = 0, len = 1 + lcg(&seed) % 120;
        buf[n++] = 0x80;
        buf[n++] = 2;
        while (n < len && n + 40 < sizeof buf) {
            unsigned char op = ops[lcg(&seed) % sizeof ops];
            buf[n++] = op;
            uint64_t r = lcg(&seed);
            if (op == 'c') {
                const char *w = words[r % 3];
                memcpy(buf + n, w, strlen(w));
                n += strlen(w);
            } else if (op == 'X' && r % 2) {
                const char *w = words[3 + r / 2 % 3];
                uint32_t l = (uint32_t)strlen(w);
                memcpy(buf + n, &l, 4);
                memcpy(buf + n + 4, w, l);
                n += 4 + l;
            } else {
                size_t k = r % 9; /* random argument bytes, sometimes none, sometimes huge lengths */
                for (size_t i = 0; i < k; i++) buf[n++] = (unsigned char)lcg(&seed);
            }
        }
        pk_tensors out;
        trm_err e = {{0}};
        if (pk_read_tensors(buf, n, "fuzz", &out, &e) == 0) {
            accepted++;
            pk_tensors_free(&out);
        } else {
            ck_assert_msg(e.msg[0] != 0, "refused without a message");
        }
    }
    ck_assert_int_lt(accepted, 30000);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("torch_pt");
    TCase *tr = tcase_create("read");
    tcase_add_test(tr, reads_torch_layout_fixture);
    tcase_add_test(tr, canonical_names);
    suite_add_tcase(s, tr);
    TCase *tw = tcase_create("write");
    tcase_add_test(tw, round_trip_every_dtype);
    tcase_add_test(tw, many_tensors_and_long_sizes);
    tcase_add_test(tw, zip64_records_read_back);
    suite_add_tcase(s, tw);
    TCase *tm = tcase_create("refuse");
    tcase_add_test(tm, pickles_refused_by_name);
    tcase_add_test(tm, files_refused_with_a_message);
    suite_add_tcase(s, tm);
    TCase *tf = tcase_create("fuzz");
    tcase_add_test(tf, fuzz_zip_and_files);
    tcase_add_test(tf, fuzz_pickle_opcodes);
    suite_add_tcase(s, tf);
    return s;
}

int main(void) {
    return trm_run_suite(suite());
}
