/* test_safetensors.c — safetensors reader/writer: round trips of every dtype with trm
 * metadata, float conversions, every malformed-file rule, the golden files written by the
 * Python library, atomic writes, and the JSON writer's escaping. */
#include <check.h>

#include "check_main.h"
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "util/json.h"
#include "io/safetensors.h"

#define GOLDEN_DIR TRM_GOLDEN_DIR
#define TMP_DIR TRM_TEST_TMP "/safetensors"

static const char *golden_variants[] = {"att_rope", "att_learned", "mlp_t", "noemb_rope"};
/* Counted independently (Python json on the headers): learned positions add 9 tensors,
 * no puzzle embedding removes 9. */
static const int golden_ntensors[] = {227, 236, 227, 218};

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

/* A file with header length field `declared`, the header text, then `datalen` bytes. */
static char *make_file_n(const char *name, uint64_t declared, const char *header, size_t datalen) {
    char *path = tmp_path(name);
    size_t hl = strlen(header), n = 8 + hl + datalen;
    unsigned char *buf = xcalloc(n, 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(declared >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < datalen; i++)
        buf[8 + hl + i] = (unsigned char)(i * 7 + 1);
    write_bytes(path, buf, n);
    free(buf);
    return path;
}

static char *make_file(const char *name, const char *header, size_t datalen) {
    return make_file_n(name, strlen(header), header, datalen);
}

static void expect_refused(const char *path, const char *fragment) {
    st_file f;
    trm_err e;
    e.msg[0] = 0;
    int rc = st_open(&f, path, &e);
    if (rc == 0) st_close(&f);
    ck_assert_msg(rc == -1, "%s: opened although it should be refused (%s)", path, fragment);
    ck_assert_msg(strstr(e.msg, fragment) != NULL, "message '%s' lacks '%s'", e.msg, fragment);
    ck_assert_msg(strstr(e.msg, path) != NULL, "message '%s' does not name the file", e.msg);
}

static void expect_header_refused(const char *name, const char *header, size_t datalen, const char *fragment) {
    char *path = make_file(name, header, datalen);
    expect_refused(path, fragment);
    free(path);
}

/* ---- JSON writer ----------------------------------------------------------------------- */

START_TEST(json_escaping) {
    json_buf b;
    json_buf_init(&b);
    json_str(&b, "q\"b\\s/\n\r\t\b\f\x01\x1f\x7f end");
    ck_assert_str_eq(b.p, "\"q\\\"b\\\\s/\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f end\"");
    json_buf_clear(&b);
    /* valid UTF-8 passes through; C1 controls, line separators and invalid bytes do not */
    json_str(&b, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\xc2\x85|\xe2\x80\xa8|\xff|\xc3|\xed\xa0\x80");
    ck_assert_str_eq(b.p, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\u0085|\\u2028|\xef\xbf\xbd|\xef\xbf\xbd|"
                             "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    json_buf_clear(&b);
    json_strn(&b, "a\0b", 3);
    ck_assert_str_eq(b.p, "\"a\\u0000b\"");
    json_buf_free(&b);
    char *q = json_quote("x\"y");
    ck_assert_str_eq(q, "\"x\\\"y\"");
    free(q);
}
END_TEST

START_TEST(json_structure_and_numbers) {
    json_buf b;
    json_buf_init(&b);
    json_obj_begin(&b);
    json_kv_int(&b, "step", -9223372036854775807LL - 1);
    json_kv_double(&b, "loss", 0.1);
    json_kv_double(&b, "nan", NAN);
    json_kv_double(&b, "inf", -INFINITY);
    json_kv_bool(&b, "ok", 1);
    json_kv_str(&b, "none", NULL);
    json_key(&b, "list");
    json_arr_begin(&b);
    json_uint(&b, 18446744073709551615ULL);
    json_double(&b, 2.5);
    json_null(&b);
    json_obj_begin(&b);
    json_obj_end(&b);
    json_arr_end(&b);
    json_obj_end(&b);
    json_raw(&b, "\n");
    json_obj_begin(&b);
    json_kv_double(&b, "x", 1e300);
    json_obj_end(&b);
    ck_assert_str_eq(b.p, "{\"step\":-9223372036854775808,\"loss\":0.10000000000000001,\"nan\":null,\"inf\":null,"
                             "\"ok\":true,\"none\":null,\"list\":[18446744073709551615,2.5,null,{}]}\n"
                             "{\"x\":1.0000000000000001e+300}");
    char *s = json_buf_take(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.p, "");
    free(s);
    json_buf_free(&b);
}
END_TEST

/* Every string survives json escaping + libyaml unescaping byte for byte. */
START_TEST(json_escaping_round_trips_through_libyaml) {
    char s[300];
    size_t k = 0;
    for (int c = 1; c < 128; c++)
        s[k++] = (char)c;
    const char *extra = "\xc2\x80\xc2\x85\xc2\x9f\xc2\xa0\xe2\x80\xa8\xe2\x80\xa9\xef\xbb\xbf\xef\xbf\xbe\xef\xbf\xbf"
                        "\xf0\x9f\x98\x80";
    memcpy(s + k, extra, strlen(extra));
    k += strlen(extra);
    s[k] = 0;
    json_buf b;
    json_buf_init(&b);
    json_obj_begin(&b);
    json_kv_str(&b, "k", s);
    json_obj_end(&b);
    yaml_parser_t p;
    yaml_document_t d;
    ck_assert(yaml_parser_initialize(&p));
    yaml_parser_set_input_string(&p, (const unsigned char *)b.p, b.len);
    ck_assert_msg(yaml_parser_load(&p, &d), "libyaml: %s", p.problem);
    yaml_node_t *root = yaml_document_get_root_node(&d);
    ck_assert(root && root->type == YAML_MAPPING_NODE);
    yaml_node_t *v = yaml_document_get_node(&d, root->data.mapping.pairs.start->value);
    ck_assert_uint_eq(v->data.scalar.length, k);
    ck_assert(memcmp(v->data.scalar.value, s, k) == 0);
    yaml_document_delete(&d);
    yaml_parser_delete(&p);
    json_buf_free(&b);
}
END_TEST

/* ---- round trip ------------------------------------------------------------------------- */

static const char *config_text = "arch:\n  name: trm\n  L_cycles: 6\n\tindented: \"quoted\" and 'single'\n"
                                 "path: C:\\data\\new\\table\nunicode: \xc3\xa9\xe2\x82\xac \xf0\x9f\x98\x80 \xce\xbb\n"
                                 "control: \x01\x7f\r\nend: true\n";

START_TEST(round_trip_every_dtype) {
    static const st_dtype all[] = {ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL};
    const int nt = (int)(sizeof all / sizeof all[0]);
    int64_t shapes[10][3];
    int ndims[10];
    unsigned char *bufs[10];
    size_t sizes[10];
    st_writer w;
    st_writer_init(&w);
    for (int i = 0; i < nt; i++) {
        ndims[i] = i % 4; /* 0 (scalar) to 3 dimensions */
        size_t n = 1;
        for (int d = 0; d < ndims[i]; d++)
            n *= (size_t)(shapes[i][d] = 2 + (i + d) % 3);
        sizes[i] = n * (size_t)st_dtype_size(all[i]);
        bufs[i] = xmalloc(sizes[i]);
        for (size_t j = 0; j < sizes[i]; j++)
            bufs[i][j] = (unsigned char)(j * 31 + (size_t)i * 17 + 3);
        char name[64];
        snprintf(name, sizeof name, "layer.%d/%s", i, st_dtype_name(all[i]));
        st_writer_add(&w, name, all[i], ndims[i], shapes[i], bufs[i]);
    }
    int64_t zero_shape[2] = {0, 5};
    st_writer_add(&w, "empty", ST_F32, 2, zero_shape, NULL);
    st_writer_meta(&w, "trm_version", "0.1.0");
    st_writer_meta(&w, "step", "1");
    st_writer_meta(&w, "step", "1234"); /* replaces */
    st_writer_meta(&w, "config", config_text);
    st_writer_meta(&w, "crc32.layer.0/F32", "00000000"); /* the writer computes its own */
    char *path = tmp_path("roundtrip.safetensors");
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);

    st_file f;
    ck_assert_msg(st_open(&f, path, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(f.ntensors, nt + 1);
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = &f.tensors[i]; /* header keeps insertion order */
        char name[64];
        snprintf(name, sizeof name, "layer.%d/%s", i, st_dtype_name(all[i]));
        ck_assert_str_eq(t->name, name);
        ck_assert_ptr_eq(st_find(&f, name), t);
        ck_assert_int_eq(t->dtype, all[i]);
        ck_assert_int_eq(t->ndim, ndims[i]);
        for (int d = 0; d < ndims[i]; d++)
            ck_assert_int_eq(t->shape[d], shapes[i][d]);
        ck_assert_uint_eq(t->nbytes, sizes[i]);
        ck_assert(memcmp(t->data, bufs[i], sizes[i]) == 0);
        ck_assert_uint_eq(((uintptr_t)t->data) % (uintptr_t)st_dtype_size(all[i]), 0);
        free(bufs[i]);
    }
    ck_assert_uint_eq(st_find(&f, "empty")->nbytes, 0);
    ck_assert_ptr_null(st_find(&f, "nope"));
    ck_assert_str_eq(st_meta_get(&f, "config"), config_text);
    ck_assert_str_eq(st_meta_get(&f, "step"), "1234");
    ck_assert_str_eq(st_meta_get(&f, "trm_version"), "0.1.0");
    ck_assert_str_eq(st_meta_get(&f, "format"), "trm-safetensors-1");
    ck_assert_ptr_null(st_meta_get(&f, "missing"));
    int ncrc = 0;
    for (int i = 0; i < f.nmeta; i++)
        ncrc += strncmp(f.meta[i].key, "crc32.", 6) == 0;
    ck_assert_int_eq(ncrc, nt + 1);
    ck_assert_str_ne(st_meta_get(&f, "crc32.layer.0/F32"), "00000000");
    st_close(&f);
    free(path);
}
END_TEST

/* The layout must be readable by the reference library: data section 8-aligned, tensors
 * contiguous from 0 to the end of the file, no gaps. */
START_TEST(layout_is_contiguous_and_aligned) {
    uint8_t b3[3] = {1, 2, 3};
    float f5[5] = {1, 2, 3, 4, 5};
    double d1[1] = {7};
    int16_t h3[3] = {1, 2, 3};
    int64_t s3[1] = {3}, s5[1] = {5}, s1[1] = {1};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "bytes", ST_U8, 1, s3, b3);
    st_writer_add(&w, "floats", ST_F32, 1, s5, f5);
    st_writer_add(&w, "halfs", ST_I16, 1, s3, h3);
    st_writer_add(&w, "double", ST_F64, 1, s1, d1);
    st_writer_add(&w, "floats2", ST_F32, 1, s5, f5);
    char *path = tmp_path("layout.safetensors");
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
    st_file f;
    ck_assert_msg(st_open(&f, path, &e) == 0, "%s", e.msg);
    const unsigned char *base = f.map.data;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | base[i];
    ck_assert_uint_eq((8 + hl) % 8, 0);
    ck_assert_int_eq(base[8 + hl - 1] == ' ' || base[8 + hl - 1] == '}', 1);
    size_t data_size = f.map.size - 8 - hl, covered = 0;
    for (size_t pos = 0; pos < data_size;) { /* walk the tensors in file order */
        const st_tensor *next = NULL;
        for (int i = 0; i < f.ntensors; i++)
            if (f.tensors[i].offset == pos && f.tensors[i].nbytes) next = &f.tensors[i];
        ck_assert_msg(next != NULL, "gap at data offset %zu", pos);
        ck_assert_uint_eq(next->offset % (size_t)st_dtype_size(next->dtype), 0);
        pos += next->nbytes;
        covered += next->nbytes;
    }
    ck_assert_uint_eq(covered, data_size);
    ck_assert_uint_eq(st_find(&f, "double")->offset, 0);
    ck_assert_str_eq(f.tensors[0].name, "bytes");
    st_close(&f);
    free(path);
}
END_TEST

START_TEST(format_key_set_by_caller_is_kept) {
    int32_t v[2] = {1, 2};
    int64_t s[1] = {2};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "v", ST_I32, 1, s, v);
    st_writer_meta(&w, "format", "custom");
    char *path = tmp_path("format.safetensors");
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
    st_file f;
    ck_assert_msg(st_open(&f, path, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(st_meta_get(&f, "format"), "custom");
    ck_assert_int_eq(f.nmeta, 2);
    st_close(&f);
    free(path);
}
END_TEST

START_TEST(writer_refuses_bad_tensors) {
    float x[4] = {0};
    int64_t s[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[1] = {-1};
    char *path = tmp_path("writer_bad.safetensors");
    trm_err e;
    struct {
        const char *name;
        int ndim;
        const int64_t *shape;
        const char *fragment;
    } cases[] = {
        {"__metadata__", 1, s, "cannot be a tensor name"},
        {"deep", 9, s, "9 dimensions"},
        {"neg", 1, neg, "negative"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_writer w;
        st_writer_init(&w);
        st_writer_add(&w, cases[i].name, ST_F32, cases[i].ndim, cases[i].shape, x);
        ck_assert_int_eq(st_writer_save(&w, path, &e), -1);
        ck_assert_msg(strstr(e.msg, cases[i].fragment) != NULL, "'%s' lacks '%s'", e.msg, cases[i].fragment);
        st_writer_free(&w);
    }
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "dup", ST_F32, 1, s, x);
    st_writer_add(&w, "dup", ST_F32, 1, s, x);
    ck_assert_int_eq(st_writer_save(&w, path, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "duplicate tensor name 'dup'"));
    st_writer_free(&w);
    char longname[1200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    st_writer_init(&w);
    st_writer_add(&w, longname, ST_F32, 1, s, x);
    ck_assert_int_eq(st_writer_save(&w, path, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "too long"));
    st_writer_free(&w);
    ck_assert(!trm_file_exists(path));
    free(path);
}
END_TEST

/* ---- float conversion --------------------------------------------------------------------- */

static st_tensor raw_tensor(st_dtype dt, const void *data, size_t n) {
    st_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "t";
    t.dtype = dt;
    t.ndim = 1;
    t.shape[0] = (int64_t)n;
    t.nbytes = n * (size_t)st_dtype_size(dt);
    t.data = data;
    return t;
}

START_TEST(read_f32_from_f16) {
    /* 1, -2.5, 65504 (max), 2^-24 (smallest subnormal), 0x03ff (largest subnormal),
     * 2^-14 (smallest normal), -0, +inf, -inf, nan */
    const uint16_t h[] = {0x3C00, 0xC100, 0x7BFF, 0x0001, 0x03FF, 0x0400, 0x8000, 0x7C00, 0xFC00, 0x7E00};
    unsigned char bytes[sizeof h];
    for (size_t i = 0; i < 10; i++)
        bytes[2 * i] = (unsigned char)(h[i] & 0xFF), bytes[2 * i + 1] = (unsigned char)(h[i] >> 8);
    st_tensor t = raw_tensor(ST_F16, bytes, 10);
    float out[10];
    trm_err e;
    ck_assert_int_eq(st_read_f32(&t, out, &e), 0);
    ck_assert(out[0] == 1.0f);
    ck_assert(out[1] == -2.5f);
    ck_assert(out[2] == 65504.0f);
    ck_assert(out[3] == ldexpf(1.0f, -24));
    ck_assert(out[4] == 1023.0f * ldexpf(1.0f, -24));
    ck_assert(out[5] == ldexpf(1.0f, -14));
    ck_assert(out[6] == 0.0f && signbit(out[6]));
    ck_assert(isinf(out[7]) && out[7] > 0);
    ck_assert(isinf(out[8]) && out[8] < 0);
    ck_assert(isnan(out[9]));
}
END_TEST

START_TEST(read_f32_from_bf16) {
    /* 1, -2.5, 65280, largest finite, 2^-133 (smallest subnormal), +inf, nan */
    const uint16_t h[] = {0x3F80, 0xC020, 0x477F, 0x7F7F, 0x0001, 0x7F80, 0x7FC0};
    unsigned char bytes[sizeof h];
    for (size_t i = 0; i < 7; i++)
        bytes[2 * i] = (unsigned char)(h[i] & 0xFF), bytes[2 * i + 1] = (unsigned char)(h[i] >> 8);
    st_tensor t = raw_tensor(ST_BF16, bytes, 7);
    float out[7];
    trm_err e;
    ck_assert_int_eq(st_read_f32(&t, out, &e), 0);
    ck_assert(out[0] == 1.0f);
    ck_assert(out[1] == -2.5f);
    ck_assert(out[2] == 65280.0f);
    ck_assert(out[3] == 0x1.fep127f);
    ck_assert(out[4] == ldexpf(1.0f, -133));
    ck_assert(isinf(out[5]) && out[5] > 0);
    ck_assert(isnan(out[6]));
}
END_TEST

START_TEST(read_f32_from_f64_and_f32) {
    const double d[] = {1.0, -2.5, 65504.0, 0x1p-149, 0.1, 1e39, -1e39, INFINITY, NAN, 0x1.fffffefp127};
    unsigned char bytes[sizeof d + 1];
    memcpy(bytes + 1, d, sizeof d); /* deliberately misaligned */
    st_tensor t = raw_tensor(ST_F64, bytes + 1, 10);
    float out[10];
    trm_err e;
    ck_assert_int_eq(st_read_f32(&t, out, &e), 0);
    ck_assert(out[0] == 1.0f && out[1] == -2.5f && out[2] == 65504.0f);
    ck_assert(out[3] == ldexpf(1.0f, -149));
    ck_assert(out[4] == 0.1f);
    ck_assert(isinf(out[5]) && out[5] > 0);
    ck_assert(isinf(out[6]) && out[6] < 0);
    ck_assert(isinf(out[7]));
    ck_assert(isnan(out[8]));
    ck_assert(out[9] == 0x1.fffffep127f);
    const float f[] = {3.25f, -0.0f, INFINITY};
    st_tensor tf = raw_tensor(ST_F32, f, 3);
    ck_assert_int_eq(st_read_f32(&tf, out, &e), 0);
    ck_assert(out[0] == 3.25f && signbit(out[1]) && isinf(out[2]));
    const int32_t ints[] = {1};
    st_tensor ti = raw_tensor(ST_I32, ints, 1);
    ck_assert_int_eq(st_read_f32(&ti, out, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "not a floating-point type"));
}
END_TEST

/* ---- malformed files ------------------------------------------------------------------- */

START_TEST(refuses_truncated_golden) {
    char *src = xasprintf("%s/att_rope.safetensors", GOLDEN_DIR);
    size_t n;
    trm_err e;
    char *bytes = trm_read_file(src, &n, &e);
    ck_assert_msg(bytes != NULL, "%s", e.msg);
    char *path = tmp_path("truncated.safetensors");
    write_bytes(path, bytes, 5000);
    expect_refused(path, "exceeds the file size");
    write_bytes(path, bytes, n - 1); /* header intact, last tensor cut */
    expect_refused(path, "beyond the data section");
    write_bytes(path, bytes, 5);
    expect_refused(path, "too short");
    write_bytes(path, bytes, 0);
    expect_refused(path, "too short");
    free(bytes);
    free(path);
    free(src);
}
END_TEST

START_TEST(refuses_flipped_data_byte) {
    float v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (float)i * 0.5f;
    int64_t s[2] = {8, 8};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "first", ST_F32, 2, s, v);
    st_writer_add(&w, "second", ST_F32, 2, s, v);
    char *path = tmp_path("flipped.safetensors");
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
    size_t n;
    unsigned char *bytes = (unsigned char *)trm_read_file(path, &n, &e);
    ck_assert_ptr_nonnull(bytes);
    bytes[n - 3] ^= 0x10; /* inside "second" */
    write_bytes(path, bytes, n);
    expect_refused(path, "checksum mismatch for tensor 'second'");
    free(bytes);
    free(path);
}
END_TEST

START_TEST(refuses_bad_header_lengths) {
    const char *h = "{}";
    char *p1 = make_file_n("len_huge.safetensors", UINT64_MAX, h, 0);
    expect_refused(p1, "exceeds the file size");
    char *p2 = make_file_n("len_zero.safetensors", 0, h, 0);
    expect_refused(p2, "too small");
    char *p3 = make_file_n("len_one.safetensors", 1, h, 0);
    expect_refused(p3, "too small");
    char *p4 = make_file_n("len_over.safetensors", 3, h, 0);
    expect_refused(p4, "exceeds the file size");
    free(p1), free(p2), free(p3), free(p4);
}
END_TEST

START_TEST(refuses_bad_json) {
    expect_header_refused("json_unclosed.st", "{\"a\":{\"dtype\":\"F32\"", 0, "not valid JSON");
    expect_header_refused("json_array.st", "[1, 2]  ", 0, "not a JSON object");
    expect_header_refused("json_scalar.st", "\"abc\"", 0, "not a JSON object");
    expect_header_refused("json_garbage.st", "{} garbage", 0, "not valid JSON");
    expect_header_refused("json_twodocs.st", "{}\n---\n{}", 0, "extra content");
    expect_header_refused("json_badutf8.st", "{\"\xff\":1}", 0, "not valid JSON");
    expect_header_refused("json_nul.st", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
                          "contains NUL");
    expect_header_refused("json_alias.st",
                          "{\"a\":&x {\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},\"b\":*x}", 0, "aliases");
    expect_header_refused("json_entry.st", "{\"a\":5}", 0, "tensor 'a': expected an object");
}
END_TEST

START_TEST(refuses_bad_tensor_entries) {
    struct {
        const char *header, *fragment;
        size_t datalen;
    } cases[] = {
        {"{\"w\":{\"dtype\":\"F8\",\"shape\":[4],\"data_offsets\":[0,4]}}", "tensor 'w': unknown dtype 'F8'", 4},
        {"{\"w\":{\"dtype\":4,\"shape\":[4],\"data_offsets\":[0,4]}}", "tensor 'w': \"dtype\" must be a string", 4},
        {"{\"w\":{\"shape\":[4],\"data_offsets\":[0,16]}}", "tensor 'w': missing \"dtype\"", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", "tensor 'w': missing \"shape\"", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4]}}", "tensor 'w': missing \"data_offsets\"", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"shape\":[4],\"data_offsets\":[0,16]}}", "duplicate key \"shape\"",
         16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,12]}}", "needs 16 bytes", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", "shape value '-4' is negative", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,16]}}", "'1.5' is not a non-negative integer",
         16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]}}", "'4' is not a non-negative integer",
         16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", "\"shape\" must be an array", 16},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", "9 dimensions", 1},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,-16]}}", "data_offsets value '-16' is negative",
         16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0]}}", "must be an array [begin, end]", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,99999999999999999999999]}}", "is too large", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,0]}}", "begin > end", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,16]}}", "overflows", 16},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
         "end 24 is beyond the data section (16 bytes)", 16},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         "tensors 'a' [0, 8) and 'b' [4, 12) overlap", 16},
        {"{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]}}",
         "overlap", 16},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
         "duplicate tensor name 'a'", 8},
        {"{\"__metadata__\":{\"k\":1},\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
         "__metadata__: value of 'k' is not a string", 1},
        {"{\"__metadata__\":{\"k\":null}}", "value of 'k' is not a string", 0},
        {"{\"__metadata__\":[\"k\"]}", "\"__metadata__\" must be an object", 0},
        {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", "__metadata__: duplicate key 'k'", 0},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", "duplicate \"__metadata__\"", 0},
        {"{\"__metadata__\":{\"crc32.w\":\"XYZ\"},\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
         "expected 8 lowercase hex digits", 1},
        {"{\"__metadata__\":{\"crc32.v\":\"00000000\"},\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
         "'crc32.v' names no tensor", 1},
        {"{\"__metadata__\":{\"crc32.w\":\"00000000\"},\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
         "checksum mismatch for tensor 'w'", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "entry_%zu.safetensors", i);
        expect_header_refused(name, cases[i].header, cases[i].datalen, cases[i].fragment);
    }
}
END_TEST

/* Every truncation of a valid file is refused and random byte changes never crash the
 * reader (run under the sanitizer build to catch out-of-bounds reads). */
START_TEST(corruption_never_crashes) {
    double d[3] = {1, 2, 3};
    int32_t i4[4] = {1, 2, 3, 4};
    uint8_t b2[2] = {1, 0};
    int64_t s3[1] = {3}, s22[2] = {2, 2}, s2[1] = {2};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "d", ST_F64, 1, s3, d);
    st_writer_add(&w, "i", ST_I32, 2, s22, i4);
    st_writer_add(&w, "b", ST_BOOL, 1, s2, b2);
    st_writer_meta(&w, "config", "a: 1\nb: [1, 2]\n");
    char *path = tmp_path("fuzz.safetensors");
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
    size_t n;
    unsigned char *orig = (unsigned char *)trm_read_file(path, &n, &e);
    ck_assert_ptr_nonnull(orig);
    unsigned char *buf = xmalloc(n);
    st_file f;
    for (size_t len = 0; len < n; len++) {
        write_bytes(path, orig, len);
        ck_assert_msg(st_open(&f, path, &e) == -1, "truncation to %zu bytes accepted", len);
        ck_assert_ptr_nonnull(strstr(e.msg, path));
    }
    uint64_t state = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, orig, n);
        int nflip = 1 + iter % 3;
        for (int k = 0; k < nflip; k++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t pos = (size_t)(state >> 33) % n;
            buf[pos] = (unsigned char)(state >> 13);
        }
        write_bytes(path, buf, n);
        e.msg[0] = 0;
        if (st_open(&f, path, &e) == 0) {
            for (int t = 0; t < f.ntensors; t++) /* every accepted range lies inside the file */
                ck_assert((const unsigned char *)f.tensors[t].data + f.tensors[t].nbytes <=
                          (const unsigned char *)f.map.data + f.map.size);
            st_close(&f);
        } else {
            ck_assert_msg(e.msg[0] != 0, "refused without a message");
        }
    }
    free(buf);
    free(orig);
    free(path);
}
END_TEST

/* What the reference library writes (and variations JSON allows) opens fine. */
START_TEST(accepts_valid_hand_written_files) {
    char *p = make_file("valid.safetensors",
                        "{ \"__metadata__\" : {\"framework\": \"pt\"},\n"
                        "  \"a\": {\"data_offsets\": [8, 16], \"shape\": [2], \"dtype\": \"I32\", \"extra\": [1]},\n"
                        "  \"s\": {\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},\n"
                        "  \"z\": {\"dtype\":\"BOOL\",\"shape\":[0,3],\"data_offsets\":[4,4]} }   ",
                        16);
    st_file f;
    trm_err e;
    ck_assert_msg(st_open(&f, p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(f.ntensors, 3);
    ck_assert_str_eq(f.tensors[0].name, "a");
    ck_assert_int_eq(f.tensors[1].ndim, 0);
    ck_assert_uint_eq(f.tensors[1].nbytes, 8);
    ck_assert_ptr_eq(f.tensors[0].data, (const unsigned char *)f.map.data + f.map.size - 8);
    ck_assert_str_eq(st_meta_get(&f, "framework"), "pt");
    st_close(&f);
    free(p);
}
END_TEST

/* ---- golden files (Python's safetensors) ------------------------------------------------ */

START_TEST(golden_files_open) {
    for (size_t v = 0; v < sizeof golden_variants / sizeof golden_variants[0]; v++) {
        char *path = xasprintf("%s/%s.safetensors", GOLDEN_DIR, golden_variants[v]);
        st_file f;
        trm_err e;
        ck_assert_msg(st_open(&f, path, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(f.ntensors, golden_ntensors[v]);
        ck_assert_int_eq(f.nmeta, 0);
        int seen[ST_BOOL + 1] = {0};
        for (int i = 0; i < f.ntensors; i++) {
            st_dtype d = f.tensors[i].dtype;
            ck_assert(d == ST_F32 || d == ST_F64 || d == ST_I64 || d == ST_I32 || d == ST_BOOL);
            seen[d]++;
        }
        ck_assert(seen[ST_F32] > 0 && seen[ST_F64] > 0 && seen[ST_I32] > 0);
        const st_tensor *t = st_find(&f, "init/inner.lm_head.weight");
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->dtype, ST_F32);
        ck_assert_int_eq(t->ndim, 2);
        ck_assert_int_eq(t->shape[0], 6);
        ck_assert_int_eq(t->shape[1], 16); /* hidden size 16 (tests/golden/make_golden.py) */
        ck_assert_uint_eq(t->nbytes, 6 * 16 * 4);
        float w[6 * 16];
        ck_assert_int_eq(st_read_f32(t, w, &e), 0);
        double sumsq = 0;
        for (int i = 0; i < 6 * 16; i++) {
            ck_assert(isfinite(w[i]));
            sumsq += (double)w[i] * w[i];
        }
        ck_assert(sumsq > 0);
        const st_tensor *loss = st_find(&f, "step1/loss");
        ck_assert_ptr_nonnull(loss);
        float l;
        ck_assert_int_eq(st_read_f32(loss, &l, &e), 0);
        ck_assert(isfinite(l) && l > 0);
        st_close(&f);
        free(path);
    }
}
END_TEST

/* ---- atomic writes ----------------------------------------------------------------------- */

static int count_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL)
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void save_one(const char *path, float value) {
    float v[3] = {value, value, value};
    int64_t s[1] = {3};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "v", ST_F32, 1, s, v);
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
}

static float read_one(const char *path) {
    st_file f;
    trm_err e;
    float v[3];
    ck_assert_msg(st_open(&f, path, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st_read_f32(st_find(&f, "v"), v, &e), 0);
    st_close(&f);
    return v[0];
}

START_TEST(atomic_write) {
    char *dir = tmp_path("atomic");
    trm_err e;
    ck_assert_msg(trm_mkdirs(dir, &e) == 0, "%s", e.msg);
    char *path = trm_path_join(dir, "model.safetensors");
    save_one(path, 1.0f);
    save_one(path, 2.0f); /* replaces */
    ck_assert_int_eq(count_dir_entries(dir), 1);
    ck_assert(read_one(path) == 2.0f);

    char *bad = xasprintf("%s/no/such/dir/model.safetensors", dir);
    float v[1] = {5};
    int64_t s[1] = {1};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "v", ST_F32, 1, s, v);
    ck_assert_int_eq(st_writer_save(&w, bad, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "no/such/dir"));
    /* The temp file cannot be created: the existing target must stay as it was. This
     * blocks util.c's temp name (<path>.tmp.<pid>) with a directory. */
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    ck_assert_int_eq(st_writer_save(&w, path, &e), -1);
    rmdir(tmp);
    st_writer_free(&w);
    ck_assert(read_one(path) == 2.0f);
    ck_assert_int_eq(count_dir_entries(dir), 1);
    free(tmp);
    free(bad);
    free(path);
    free(dir);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *tj = tcase_create("json");
    tcase_add_test(tj, json_escaping);
    tcase_add_test(tj, json_structure_and_numbers);
    tcase_add_test(tj, json_escaping_round_trips_through_libyaml);
    suite_add_tcase(s, tj);
    TCase *tw = tcase_create("write_read");
    tcase_add_test(tw, round_trip_every_dtype);
    tcase_add_test(tw, layout_is_contiguous_and_aligned);
    tcase_add_test(tw, format_key_set_by_caller_is_kept);
    tcase_add_test(tw, writer_refuses_bad_tensors);
    tcase_add_test(tw, atomic_write);
    suite_add_tcase(s, tw);
    TCase *tf = tcase_create("convert");
    tcase_add_test(tf, read_f32_from_f16);
    tcase_add_test(tf, read_f32_from_bf16);
    tcase_add_test(tf, read_f32_from_f64_and_f32);
    suite_add_tcase(s, tf);
    TCase *tm = tcase_create("malformed");
    tcase_add_test(tm, refuses_truncated_golden);
    tcase_add_test(tm, refuses_flipped_data_byte);
    tcase_add_test(tm, refuses_bad_header_lengths);
    tcase_add_test(tm, refuses_bad_json);
    tcase_add_test(tm, refuses_bad_tensor_entries);
    tcase_add_test(tm, accepts_valid_hand_written_files);
    tcase_add_test(tm, corruption_never_crashes);
    suite_add_tcase(s, tm);
    TCase *tg = tcase_create("golden");
    tcase_add_test(tg, golden_files_open);
    suite_add_tcase(s, tg);
    return s;
}

int main(void) {
    return trm_run_suite(suite());
}
