/* test_npy.c — .npy reader and writer: every dtype round trip, numpy's v1 header layout,
 * hand-made v2/v3 headers in odd spellings, and malformed files that must each fail with
 * a message naming the file. */
#include <check.h>

#include "check_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/npy.h"

static char tmpdir[512];

static void setup(void) {
    trm_err e;
    snprintf(tmpdir, sizeof tmpdir, "%s/npy_%d", TRM_TEST_TMP, (int)getpid());
    ck_assert_msg(trm_mkdirs(tmpdir, &e) == 0, "%s", e.msg);
}

static char *tpath(const char *name) { return xasprintf("%s/%s", tmpdir, name); }

/* Writes raw bytes: a header with version/major and dict text, then `data`. */
static char *write_raw(const char *name, int major, const char *dict, const void *data,
                       size_t nbytes) {
    char *path = tpath(name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    size_t n = strlen(dict);
    fwrite("\x93NUMPY", 1, 6, f);
    fputc(major, f);
    fputc(0, f);
    if (major == 1) {
        fputc((int)(n & 0xff), f);
        fputc((int)(n >> 8), f);
    } else {
        for (int i = 0; i < 4; i++) fputc((int)((n >> (8 * i)) & 0xff), f);
    }
    fwrite(dict, 1, n, f);
    if (nbytes) fwrite(data, 1, nbytes, f);
    fclose(f);
    return path;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* Opening must fail, mention the file, and mention `what`. */
static void expect_fail(const char *path, int allow_float, const char *what) {
    npy_array a;
    trm_err e = {{0}};
    ck_assert_int_eq(npy_open(&a, path, allow_float, &e), -1);
    ck_assert_msg(strstr(e.msg, path) != NULL, "message lacks the path: %s", e.msg);
    ck_assert_msg(strstr(e.msg, what) != NULL, "message lacks '%s': %s", what, e.msg);
}

START_TEST(test_roundtrip_all_dtypes) {
    const int64_t shape[2] = {2, 3};
    int8_t i8[6] = {-128, -1, 0, 1, 2, 127};
    uint8_t u8[6] = {0, 1, 2, 3, 200, 255};
    uint8_t b1[6] = {0, 1, 1, 0, 1, 0};
    int16_t i16[6] = {-32768, -2, 0, 5, 300, 32767};
    uint16_t u16[6] = {0, 1, 65535, 4, 5, 6};
    int32_t i32[6] = {INT32_MIN, -7, 0, 8, 9, INT32_MAX};
    uint32_t u32[6] = {0, 1, 2, 3, 4, 0xFFFFFFFFu};
    int64_t i64[6] = {INT64_MIN, -1, 0, 1, (int64_t)1 << 40, INT64_MAX};
    float f32[6] = {-1.5f, 0, 1, 2.25f, 3, 4};
    double f64[6] = {-2.5, 0, 1e10, 2, 3, 4};
    struct {
        npy_dtype t;
        const void *data;
        const char *descr;
    } cases[] = {{NPY_BOOL, b1, "'|b1'"},  {NPY_I8, i8, "'|i1'"},   {NPY_U8, u8, "'|u1'"},
                 {NPY_I16, i16, "'<i2'"},  {NPY_U16, u16, "'<u2'"}, {NPY_I32, i32, "'<i4'"},
                 {NPY_U32, u32, "'<u4'"},  {NPY_I64, i64, "'<i8'"}, {NPY_F32, f32, "'<f4'"},
                 {NPY_F64, f64, "'<f8'"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[32];
        snprintf(name, sizeof name, "rt_%zu.npy", c);
        char *path = tpath(name);
        trm_err e;
        ck_assert_msg(npy_write(path, cases[c].t, 2, shape, cases[c].data, &e) == 0, "%s", e.msg);
        /* numpy's v1 layout: header padded to 64 bytes, ending in a newline */
        size_t len;
        char *raw = trm_read_file(path, &len, &e);
        ck_assert_ptr_nonnull(raw);
        ck_assert(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
        size_t hl = (unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8;
        ck_assert_uint_eq((10 + hl) % 64, 0);
        ck_assert_int_eq(raw[10 + hl - 1], '\n');
        ck_assert_msg(strstr(raw + 10, cases[c].descr) != NULL, "descr %s missing", cases[c].descr);
        ck_assert(strstr(raw + 10, "'shape': (2, 3)") != NULL);
        free(raw);

        int is_float = cases[c].t == NPY_F32 || cases[c].t == NPY_F64;
        npy_array a;
        ck_assert_msg(npy_open(&a, path, is_float, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(a.dtype, cases[c].t);
        ck_assert_int_eq(a.ndim, 2);
        ck_assert_int_eq(a.shape[0], 2);
        ck_assert_int_eq(a.shape[1], 3);
        ck_assert_int_eq(a.count, 6);
        ck_assert_int_eq(memcmp(a.data, cases[c].data, 6 * (size_t)a.itemsize), 0);
        ck_assert_str_eq(a.path, path);
        npy_close(&a);
        if (is_float) expect_fail(path, 0, "floating-point");
        free(path);
    }
    /* widening keeps signedness */
    char *path = tpath("rt_u32.npy");
    npy_array a;
    trm_err e;
    ck_assert(npy_write(path, NPY_U32, 2, shape, u32, &e) == 0);
    ck_assert(npy_open(&a, path, 0, &e) == 0);
    ck_assert_int_eq(npy_get_i64(&a, 5), 4294967295LL);
    npy_close(&a);
    ck_assert(npy_write(path, NPY_I8, 2, shape, i8, &e) == 0);
    ck_assert(npy_open(&a, path, 0, &e) == 0);
    ck_assert_int_eq(npy_get_i64(&a, 0), -128);
    ck_assert_int_eq(npy_get_i64(&a, 1), -1);
    int32_t row[3];
    npy_copy_i32(&a, 3, 3, row);
    ck_assert(row[0] == 1 && row[1] == 2 && row[2] == 127);
    ck_assert_int_eq(npy_find_outside(&a, -1, 3, 0, 0), 0);
    ck_assert_int_eq(npy_find_outside(&a, -128, 3, 0, 0), 5);
    ck_assert_int_eq(npy_find_outside(&a, -128, 3, 1, 127), -1);
    npy_close(&a);
    ck_assert(npy_write(path, NPY_F64, 2, shape, f64, &e) == 0);
    ck_assert(npy_open(&a, path, 1, &e) == 0);
    ck_assert(npy_get_f64(&a, 2) == 1e10);
    npy_close(&a);
    free(path);
}
END_TEST

START_TEST(test_shapes_0d_empty_large) {
    trm_err e;
    npy_array a;
    char *p = tpath("scalar.npy");
    int64_t v = 42;
    ck_assert(npy_write(p, NPY_I64, 0, NULL, &v, &e) == 0);
    ck_assert_msg(npy_open(&a, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(a.ndim, 0);
    ck_assert_int_eq(a.count, 1);
    ck_assert_int_eq(npy_get_i64(&a, 0), 42);
    npy_close(&a);
    free(p);

    p = tpath("empty.npy");
    const int64_t sh[3] = {4, 0, 5};
    ck_assert(npy_write(p, NPY_I32, 3, sh, NULL, &e) == 0);
    ck_assert_msg(npy_open(&a, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(a.ndim, 3);
    ck_assert_int_eq(a.count, 0);
    ck_assert_int_eq(a.shape[2], 5);
    ck_assert_int_eq(npy_find_outside(&a, 0, 1, 0, 0), -1);
    npy_close(&a);
    free(p);

    /* 1-D: numpy spells the tuple (n,) */
    p = tpath("vec.npy");
    const int64_t n = 100000;
    int16_t *d = malloc(sizeof(int16_t) * n);
    for (int64_t i = 0; i < n; i++) d[i] = (int16_t)(i % 1000);
    ck_assert(npy_write(p, NPY_I16, 1, &n, d, &e) == 0);
    char *raw = trm_read_file(p, NULL, &e);
    ck_assert(strstr(raw + 10, "'shape': (100000,)") != NULL);
    free(raw);
    ck_assert(npy_open(&a, p, 0, &e) == 0);
    ck_assert_int_eq(a.count, n);
    ck_assert_int_eq(npy_get_i64(&a, 99999), 999);
    ck_assert_int_eq(npy_find_outside(&a, 0, 1000, 0, 0), -1);
    ck_assert_int_eq(npy_find_outside(&a, 0, 999, 0, 0), 999);
    npy_close(&a);
    free(d);
    free(p);
}
END_TEST

START_TEST(test_v2_v3_and_odd_headers) {
    int32_t data[6] = {1, 2, 3, 4, 5, 6};
    const char *dicts[] = {
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n",
        "{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<i4\"}",
        "{ 'fortran_order' : False ,'shape' : ( 2 , 3 , ) , 'descr' : '<i4' , }     \n",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L)}\n", /* Python 2 numpy */
    };
    for (int major = 1; major <= 3; major++) {
        for (size_t k = 0; k < sizeof dicts / sizeof dicts[0]; k++) {
            char name[32];
            snprintf(name, sizeof name, "v%d_%zu.npy", major, k);
            char *p = write_raw(name, major, dicts[k], data, sizeof data);
            npy_array a;
            trm_err e;
            ck_assert_msg(npy_open(&a, p, 0, &e) == 0, "v%d %s: %s", major, dicts[k], e.msg);
            ck_assert_int_eq(a.ndim, 2);
            ck_assert_int_eq(a.shape[0], 2);
            ck_assert_int_eq(a.shape[1], 3);
            ck_assert_int_eq(npy_get_i64(&a, 5), 6);
            npy_close(&a);
            free(p);
        }
    }
    /* fortran_order True is harmless when at most one dimension exceeds 1 */
    char *p = write_raw("f1d.npy", 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (6, 1)}",
                        data, sizeof data);
    npy_array a;
    trm_err e;
    ck_assert_msg(npy_open(&a, p, 0, &e) == 0, "%s", e.msg);
    npy_close(&a);
    free(p);
}
END_TEST

START_TEST(test_malformed) {
    int32_t data[6] = {1, 2, 3, 4, 5, 6};
    char *p;
    p = tpath("missing.npy");
    expect_fail(p, 0, "cannot open");
    free(p);

    p = tpath("empty_file.npy");
    write_bytes(p, "", 0);
    expect_fail(p, 0, "bad magic");
    free(p);

    p = tpath("badmagic.npy");
    write_bytes(p, "\x93NUMPX\x01\x00\x10\x00{}              ", 26);
    expect_fail(p, 0, "bad magic");
    free(p);

    p = write_raw("bigendian.npy", 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3)}",
                  data, sizeof data);
    expect_fail(p, 0, "big-endian");
    free(p);

    p = write_raw("fortran.npy", 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3)}",
                  data, sizeof data);
    expect_fail(p, 0, "fortran");
    free(p);

    p = write_raw("float.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
                  data, sizeof data);
    expect_fail(p, 0, "floating-point");
    free(p);

    p = write_raw("f16.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3)}",
                  data, 12);
    expect_fail(p, 1, "unsupported");
    free(p);

    p = write_raw("object.npy", 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2, 3)}",
                  data, sizeof data);
    expect_fail(p, 0, "unsupported");
    free(p);

    p = write_raw("u64.npy", 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (3,)}", data,
                  24);
    expect_fail(p, 0, "unsupported");
    free(p);

    p = write_raw("struct.npy", 1,
                  "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (6,)}", data,
                  sizeof data);
    expect_fail(p, 0, "structured");
    free(p);

    p = write_raw("noorder.npy", 1, "{'descr': 'i4', 'fortran_order': False, 'shape': (6,)}",
                  data, sizeof data);
    expect_fail(p, 0, "dtype");
    free(p);

    p = write_raw("short.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}",
                  data, sizeof data - 4);
    expect_fail(p, 0, "20 bytes but shape");
    free(p);

    p = write_raw("long.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2)}",
                  data, sizeof data);
    expect_fail(p, 0, "24 bytes but shape");
    free(p);

    p = write_raw("overflow.npy", 1,
                  "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
                  data, sizeof data);
    expect_fail(p, 0, "overflow");
    free(p);

    p = write_raw("overflow2.npy", 1,
                  "{'descr': '<i8', 'fortran_order': False, 'shape': (4611686018427387904,)}",
                  data, sizeof data);
    expect_fail(p, 0, "overflow");
    free(p);

    p = write_raw("hugedim.npy", 1,
                  "{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                  data, sizeof data);
    expect_fail(p, 0, "64 bits");
    free(p);

    p = write_raw("negdim.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (-6,)}",
                  data, sizeof data);
    expect_fail(p, 0, "non-negative");
    free(p);

    p = write_raw("nokey.npy", 1, "{'descr': '<i4', 'shape': (6,)}", data, sizeof data);
    expect_fail(p, 0, "fortran_order");
    free(p);

    p = write_raw("extrakey.npy", 1,
                  "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data,
                  sizeof data);
    expect_fail(p, 0, "unexpected key 'x'");
    free(p);

    p = write_raw("garbage.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)} x",
                  data, sizeof data);
    expect_fail(p, 0, "malformed");
    free(p);

    p = write_raw("unterminated.npy", 1, "{'descr': '<i4", data, 0);
    expect_fail(p, 0, "malformed");
    free(p);

    p = write_raw("badbool.npy", 1, "{'descr': '<i4', 'fortran_order': Maybe, 'shape': (6,)}",
                  data, sizeof data);
    expect_fail(p, 0, "True or False");
    free(p);

    p = write_raw("toomanydims.npy", 1,
                  "{'descr': '|u1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", data, 1);
    expect_fail(p, 0, "dimensions");
    free(p);

    p = write_raw("version.npy", 4, "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}",
                  data, sizeof data);
    expect_fail(p, 0, "version 4");
    free(p);

    /* header length field points past the end of the file */
    p = tpath("trunc_header.npy");
    write_bytes(p, "\x93NUMPY\x01\x00\xff\x00{'descr'", 18);
    expect_fail(p, 0, "truncated");
    free(p);
    p = tpath("trunc_header2.npy");
    write_bytes(p, "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
    expect_fail(p, 0, "truncated");
    free(p);
    p = tpath("trunc_header3.npy");
    write_bytes(p, "\x93NUMPY\x02\x00\x01", 9);
    expect_fail(p, 0, "truncated");
    free(p);

    /* a directory is not a file */
    expect_fail(tmpdir, 0, tmpdir);
}
END_TEST

START_TEST(test_truncated_prefixes_never_crash) {
    /* every prefix of a valid file fails cleanly (ASan catches any out-of-bounds read) */
    trm_err e;
    char *p = tpath("full.npy");
    const int64_t sh[2] = {3, 5};
    int32_t d[15];
    for (int i = 0; i < 15; i++) d[i] = i;
    ck_assert(npy_write(p, NPY_I32, 2, sh, d, &e) == 0);
    size_t len;
    char *raw = trm_read_file(p, &len, &e);
    char *q = tpath("prefix.npy");
    for (size_t n = 0; n < len; n++) {
        write_bytes(q, raw, n);
        npy_array a;
        ck_assert_int_eq(npy_open(&a, q, 0, &e), -1);
        ck_assert(strstr(e.msg, q) != NULL);
    }
    free(raw);
    free(p);
    free(q);
}
END_TEST

START_TEST(test_write_errors) {
    trm_err e;
    int32_t d[2] = {1, 2};
    const int64_t n = 2, neg = -1;
    char *bad = xasprintf("%s/no/such/dir/x.npy", tmpdir);
    ck_assert_int_eq(npy_write(bad, NPY_I32, 1, &n, d, &e), -1);
    ck_assert(strstr(e.msg, "x.npy") != NULL);
    ck_assert_int_eq(npy_write(bad, NPY_I32, 1, &neg, d, &e), -1);
    ck_assert(strstr(e.msg, "negative") != NULL);
    ck_assert_int_eq(npy_write(bad, NPY_I32, 9, &n, d, &e), -1);
    ck_assert_str_eq(npy_dtype_name(NPY_U16), "uint16");
    free(bad);
}
END_TEST

int main(void) {
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_roundtrip_all_dtypes);
    tcase_add_test(tc, test_shapes_0d_empty_large);
    tcase_add_test(tc, test_v2_v3_and_odd_headers);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_truncated_prefixes_never_crash);
    tcase_add_test(tc, test_write_errors);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
