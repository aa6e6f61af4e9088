/* test_tfevents.c — TensorBoard event files from the C side: CRC-32C against its check value,
 * the records a writer makes (file version, START, config, one event per record), the cut a
 * resume makes (later steps and a half-written record go, earlier ones stay byte for byte),
 * hostile files (lengths past the end, bad CRCs) cut without reading out of bounds, and a new
 * file named after an earlier one whose clock ran ahead. cli_tensorboard.sh decodes the files
 * with Google's protobuf library. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "util/base.h"
#include "util/strbuf.h"
#include "view/tfevents.h"

static char *tmp_dir(const char *name) {
    trm_err e = {{0}};
    char *d = trm_path_join(TRM_TEST_TMP "/tfevents", name);
    trm_remove_tree(d, NULL);
    ck_assert_msg(trm_mkdirs(d, &e) == 0, "%s", e.msg);
    return d;
}

/* The one events file in dir (NULL when none; free it), and how many there are. */
static char *events_file(const char *dir, int *count) {
    int n;
    char **names = trm_list_dir(dir, &n);
    char *found = NULL;
    *count = 0;
    for (int i = 0; i < n; i++)
        if (!strncmp(names[i], TRM_TFEVENTS_PREFIX, strlen(TRM_TFEVENTS_PREFIX))) {
            free(found);
            found = trm_path_join(dir, names[i]);
            ++*count;
        }
    trm_free_names(names, n);
    return found;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Whole, CRC-checked records of a file; -1 when anything else is there. */
static int count_records(const char *path) {
    size_t len, off = 0;
    trm_err e;
    unsigned char *b = (unsigned char *)trm_read_file(path, &len, &e);
    ck_assert_ptr_nonnull(b);
    int n = 0;
    while (off < len) {
        if (len - off < 16) return free(b), -1;
        uint64_t k = le(b + off, 8);
        if (le(b + off + 8, 4) != trm_crc32c_mask(trm_crc32c(b + off, 8)) || k > len - off - 16) return free(b), -1;
        if (le(b + off + 12 + k, 4) != trm_crc32c_mask(trm_crc32c(b + off + 12, k))) return free(b), -1;
        off += 16 + k, n++;
    }
    free(b);
    return n;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    trm_err e = {{0}};
    ck_assert_msg(trm_write_file_atomic(path, p, n, &e) == 0, "%s", e.msg);
}

START_TEST(crc32c_check_value) {
    ck_assert_uint_eq(trm_crc32c("123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(trm_crc32c("", 0), 0);
    /* TFRecord's mask: rotate right by 15, add a constant */
    ck_assert_uint_eq(trm_crc32c_mask(0), 0xA282EAD8u);
    ck_assert_uint_eq(trm_crc32c_mask(1), 0xA282EAD8u + (1u << 17));
}
END_TEST

START_TEST(writer_records_and_cut) {
    char *dir = tmp_dir("cut");
    trm_err e = {{0}};
    trm_tfevents *w = trm_tfevents_new(dir, 1, "lr: 0.1\n");
    int nfiles;
    trm_tfevents_free(trm_tfevents_new(dir, 1, "x"));
    ck_assert_ptr_null(events_file(dir, &nfiles)); /* nothing recorded: no file */
    for (int64_t step = 2; step <= 10; step += 2) {
        trm_tfevents_begin(w, step);
        trm_tfevents_scalar(w, "train/lm_loss", 1.0 / (double)step);
        trm_tfevents_scalar(w, "train/lr", 0.1);
        ck_assert_msg(trm_tfevents_end(w, &e) == 0, "%s", e.msg);
    }
    trm_tfevents_begin(w, 12); /* a record without values writes nothing */
    ck_assert_int_eq(trm_tfevents_end(w, &e), 0);
    trm_tfevents_free(w);
    char *path = events_file(dir, &nfiles);
    ck_assert_int_eq(nfiles, 1);
    ck_assert_int_eq(count_records(path), 3 + 5); /* version, START, config + 5 records */

    size_t len0, len1;
    char *before = trm_read_file(path, &len0, &e);
    ck_assert_msg(trm_tfevents_cut(dir, 10, &e) == 0, "%s", e.msg); /* nothing past 10 */
    char *same = trm_read_file(path, &len1, &e);
    ck_assert(len0 == len1 && !memcmp(before, same, len0));
    free(same);
    ck_assert_msg(trm_tfevents_cut(dir, 6, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_records(path), 3 + 3);
    char *cut = trm_read_file(path, &len1, &e);
    ck_assert(len1 < len0 && !memcmp(before, cut, len1)); /* the kept records, byte for byte */
    /* a half-written record (a kill mid-write) goes; the whole ones stay */
    trm_sbuf b = {0};
    sb_putn(&b, cut, len1);
    sb_putn(&b, cut + len1 - 30, 20);
    write_bytes(path, b.p, b.len);
    ck_assert_msg(trm_tfevents_cut(dir, 6, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_records(path), 6);
    sb_free(&b);
    free(before), free(cut), free(path), free(dir);
}
END_TEST

START_TEST(hostile_files_are_cut_safely) {
    char *dir = tmp_dir("hostile");
    trm_err e = {{0}};
    char *p = trm_path_join(dir, TRM_TFEVENTS_PREFIX "1.h.1.x");
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    uint32_t c = trm_crc32c_mask(trm_crc32c(huge, 8));
    for (int i = 0; i < 4; i++) huge[8 + i] = (unsigned char)(c >> (8 * i));
    write_bytes(p, huge, sizeof huge); /* a valid length CRC over a length past the end */
    ck_assert_msg(trm_tfevents_cut(dir, 100, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_records(p), 0);
    char junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (char)(i * 37 + 11);
    write_bytes(p, junk, sizeof junk); /* bad CRCs */
    ck_assert_msg(trm_tfevents_cut(dir, 100, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_records(p), 0);
    free(p), free(dir);
}
END_TEST

START_TEST(new_file_sorts_after_older_ones) {
    char *dir = tmp_dir("order");
    trm_err e = {{0}};
    char *ahead = trm_path_join(dir, TRM_TFEVENTS_PREFIX "9999999990.otherhost.7.trm");
    write_bytes(ahead, "", 0);
    trm_tfevents *w = trm_tfevents_new(dir, 1, NULL);
    trm_tfevents_begin(w, 1);
    trm_tfevents_scalar(w, "x", 1);
    ck_assert_msg(trm_tfevents_end(w, &e) == 0, "%s", e.msg);
    trm_tfevents_free(w);
    int n;
    char **names = trm_list_dir(dir, &n);
    ck_assert_int_eq(n, 2);
    ck_assert_msg(!strncmp(names[1], TRM_TFEVENTS_PREFIX "9999999991.", strlen(TRM_TFEVENTS_PREFIX) + 11),
                  "%s", names[1]);
    trm_free_names(names, n);
    free(ahead), free(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("tfevents");
    TCase *tc = tcase_create("tfevents");
    tcase_add_test(tc, crc32c_check_value);
    tcase_add_test(tc, writer_records_and_cut);
    tcase_add_test(tc, hostile_files_are_cut_safely);
    tcase_add_test(tc, new_file_sorts_after_older_ones);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
