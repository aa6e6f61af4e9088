/* test_plot.c — looking at a run: metrics.jsonl read back (resumed runs, a line still being
 * written, halted-sample means, errors naming file and line), axis ticks and labels, the SVG
 * figure's series, the PNG encoder (decoded here with zlib, every filter undone, pixels
 * compared), the raster's lines and text, the status line fitted to any terminal width, the
 * puzzle kinds, report.html's content and escaping, and the "did you mean" helper. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "view/canvas.h"
#include "check_main.h"
#include "view/metrics_log.h"
#include "view/plot.h"
#include "view/png.h"
#include "train/train.h"
#include "view/report.h"
#include "view/run_display.h"
#include "util/base.h"

static char *tmp_dir(const char *name) {
    trm_err e = {{0}};
    char *d = trm_path_join(TRM_TEST_TMP "/plot", name);
    trm_remove_tree(d, NULL);
    ck_assert_msg(trm_mkdirs(d, &e) == 0, "%s", e.msg);
    return d;
}

static void write_text(const char *dir, const char *name, const char *text) {
    trm_err e = {{0}};
    char *p = trm_path_join(dir, name);
    ck_assert_msg(trm_write_file_atomic(p, text, strlen(text), &e) == 0, "%s", e.msg);
    free(p);
}

static const char *const run_a =
    "{\"step\":10,\"kind\":\"train\",\"train/accuracy\":0.25,\"train/exact_accuracy\":0,\"train/steps\":16,"
    "\"train/lm_loss\":2.0,\"train/q_halt_loss\":0.01,\"train/lr\":0.0001}\n"
    "{\"step\":20,\"kind\":\"train\",\"train/accuracy\":0,\"train/exact_accuracy\":0,\"train/steps\":0,"
    "\"train/lm_loss\":1.0,\"train/q_halt_loss\":0.01,\"train/lr\":0.0002}\n"
    "{\"step\":30,\"kind\":\"train\",\"train/accuracy\":0.5,\"train/exact_accuracy\":0.125,\"train/steps\":8,"
    "\"train/lm_loss\":0.5,\"train/q_halt_loss\":0.02,\"train/lr\":0.0003}\n"
    "{\"step\":30,\"kind\":\"eval\",\"all/accuracy\":0.5,\"all/exact_accuracy\":0.25,\"all/lm_loss\":0.6,"
    "\"all/steps\":16,\"all/count\":500,\"ARC/pass@2\":0.125}\n"
    /* resumed from the checkpoint of step 20: step 30 is logged again, with other numbers */
    "{\"step\":30,\"kind\":\"train\",\"train/accuracy\":0.75,\"train/exact_accuracy\":0.5,\"train/steps\":4,"
    "\"train/lm_loss\":0.25,\"train/q_halt_loss\":0.02,\"train/lr\":0.0003}\n"
    "{\"step\":40,\"kind\":\"train\",\"train/accuracy\":0.875,\"train/exact_accuracy\":0.75,\"train/steps\":2,"
    "\"train/lm_loss\":0.125,\"train/q_halt_loss\":null,\"train/lr\":0.0004}\n"
    "{\"step\":50,\"kind\":\"train\",\"train/lm_lo"; /* still being written */

START_TEST(metrics_log_reads_what_runs_leave) {
    char *d = tmp_dir("reader");
    write_text(d, "metrics.jsonl", run_a);
    write_text(d, "config.yaml", "run_name: tiny <a&b>\nlr: 0.001\n");
    trm_run_log r;
    trm_err e = {{0}};
    ck_assert_msg(trm_run_log_read(&r, d, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(r.label, "tiny <a&b>");
    ck_assert_int_eq(r.partial, 1);
    ck_assert_int_eq(r.records, 6);
    ck_assert_int_eq(r.last_train_step, 40);
    ck_assert_int_eq(r.last_eval_step, 30);
    const trm_series *loss = trm_run_log_find(&r, "train/lm_loss");
    ck_assert_ptr_nonnull(loss);
    ck_assert_int_eq(loss->n, 4); /* 10, 20, 30 (the resumed value), 40 */
    ck_assert(loss->step[2] == 30 && loss->value[2] == 0.25);
    ck_assert(loss->step[3] == 40 && loss->value[3] == 0.125);
    const trm_series *acc = trm_run_log_find(&r, "train/accuracy");
    ck_assert_int_eq(acc->n, 3); /* step 20 halted no sample: left out */
    ck_assert(acc->step[0] == 10 && acc->step[1] == 30 && acc->step[2] == 40);
    ck_assert_int_eq(trm_run_log_find(&r, "train/q_halt_loss")->n, 3); /* null is no point */
    const trm_series *ev = trm_run_log_find(&r, "all/exact_accuracy");
    ck_assert(ev && ev->eval && ev->n == 1 && ev->value[0] == 0.25);
    ck_assert_ptr_nonnull(trm_run_log_find(&r, "ARC/pass@2"));
    trm_run_log_free(&r);

    /* a complete line that is not a record: the file and line are named */
    write_text(d, "metrics.jsonl", "{\"step\":1,\"kind\":\"train\",\"train/lm_loss\":1}\nnot json\n");
    ck_assert_int_eq(trm_run_log_read(&r, d, &e), -1);
    ck_assert_msg(strstr(e.msg, "metrics.jsonl:2") != NULL, "%s", e.msg);
    write_text(d, "metrics.jsonl", "{\"kind\":\"train\"}\n");
    ck_assert_int_eq(trm_run_log_read(&r, d, &e), -1);
    ck_assert_msg(strstr(e.msg, "metrics.jsonl:1") && strstr(e.msg, "\"step\""), "%s", e.msg);
    char *missing = trm_path_join(d, "nothing-here");
    ck_assert_int_eq(trm_run_log_read(&r, missing, &e), -1);
    ck_assert_msg(strstr(e.msg, "nothing-here") != NULL, "%s", e.msg);
    free(missing);
    free(d);
}
END_TEST

START_TEST(ticks_and_labels) {
    double t[40];
    int n = trm_plot_ticks(0, 1, 0, t, 40);
    ck_assert_int_eq(n, 6);
    for (int i = 0; i < n; i++) ck_assert_double_eq_tol(t[i], 0.2 * i, 1e-12);
    n = trm_plot_ticks(0, 250, 0, t, 40);
    ck_assert_int_eq(n, 6);
    ck_assert(t[1] == 50 && t[5] == 250);
    n = trm_plot_ticks(0.08, 2.1, 1, t, 40); /* log, less than two decades: 1-2-5 */
    double want[] = {0.1, 0.2, 0.5, 1, 2};
    ck_assert_int_eq(n, 5);
    for (int i = 0; i < n; i++) ck_assert_double_eq_tol(t[i], want[i], 1e-12);
    n = trm_plot_ticks(1e-6, 10, 1, t, 40); /* many decades: powers of ten only */
    ck_assert_int_eq(n, 8);
    ck_assert_double_eq_tol(t[0], 1e-6, 1e-18);
    ck_assert_int_eq(trm_plot_ticks(0, 1, 1, t, 40), 0); /* log of 0 has no ticks */
    char b[32];
    trm_plot_tick_label(1500, 1, b, sizeof b);
    ck_assert_str_eq(b, "1.5k");
    trm_plot_tick_label(2e6, 1, b, sizeof b);
    ck_assert_str_eq(b, "2M");
    trm_plot_tick_label(0.0008, 0, b, sizeof b);
    ck_assert_str_eq(b, "0.0008");
    trm_plot_tick_label(1e-5, 0, b, sizeof b);
    ck_assert_str_eq(b, "1e-05");
    trm_plot_tick_label(0.25, 0, b, sizeof b);
    ck_assert_str_eq(b, "0.25");
}
END_TEST

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

START_TEST(svg_has_every_series_of_every_run) {
    char *a = tmp_dir("svg_a"), *b = tmp_dir("svg_b");
    write_text(a, "metrics.jsonl", run_a);
    write_text(a, "config.yaml", "run_name: tiny <a&b>\n");
    write_text(b, "metrics.jsonl",
               "{\"step\":5,\"kind\":\"train\",\"train/lm_loss\":1.5,\"train/accuracy\":0.5,\"train/steps\":3}\n"
               "{\"step\":5,\"kind\":\"eval\",\"all/lm_loss\":1.4,\"all/accuracy\":0.5}\n"
               "{\"step\":9,\"kind\":\"eval\",\"all/lm_loss\":1.2,\"all/accuracy\":0.6}\n");
    trm_run_log runs[2];
    trm_err e = {{0}};
    ck_assert_msg(trm_run_log_read(&runs[0], a, &e) == 0, "%s", e.msg);
    ck_assert_msg(trm_run_log_read(&runs[1], b, &e) == 0, "%s", e.msg);
    char *svg = trm_plot_svg(runs, 2, NULL);
    ck_assert(!strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39));
    ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
    ck_assert_ptr_nonnull(strstr(svg, "data-run=\"tiny &lt;a&amp;b&gt;\" data-key=\"train/lm_loss\" data-n=\"4\""));
    ck_assert_ptr_nonnull(strstr(svg, "data-run=\"tiny &lt;a&amp;b&gt;\" data-key=\"train/accuracy\" data-n=\"3\""));
    ck_assert_ptr_nonnull(strstr(svg, "class=\"eval\" data-run=\"svg_b\" data-key=\"all/lm_loss\" data-n=\"2\""));
    ck_assert_ptr_nonnull(strstr(svg, "data-key=\"train/lr\" data-n=\"4\""));
    ck_assert_ptr_nonnull(strstr(svg, "data-key=\"ARC/pass@2\""));
    ck_assert_ptr_nonnull(strstr(svg, "ARC pass@K"));
    ck_assert_ptr_nonnull(strstr(svg, "lm_loss (log scale)")); /* 2.0 .. 0.125 spans 16x */
    ck_assert_ptr_nonnull(strstr(svg, "tiny &lt;a&amp;b&gt; (step 40)")); /* the legend */
    ck_assert_ptr_nonnull(strstr(svg, "svg_b (step 9)"));
    ck_assert_ptr_null(strstr(svg, "<a&b>")); /* escaped everywhere */
    /* one colour per run: run a blue, run b orange */
    ck_assert_int_ge(count(svg, "stroke=\"#1f77b4\""), 6);
    ck_assert_int_ge(count(svg, "stroke=\"#ff7f0e\""), 3);
    free(svg);
    trm_run_log_free(&runs[0]);
    trm_run_log_free(&runs[1]);
    free(a);
    free(b);
}
END_TEST

/* A minimal PNG reader for the test: chunks with their CRCs, zlib inflate, all five filters. */
static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static uint8_t *decode_png(const unsigned char *png, size_t len, int *w, int *h) {
    ck_assert(len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
    unsigned char *idat = NULL;
    size_t nidat = 0, o = 8;
    int seen_end = 0;
    while (o + 12 <= len) {
        uint32_t n = be32(png + o);
        ck_assert(o + 12 + n <= len);
        uLong crc = crc32(crc32(0L, Z_NULL, 0), png + o + 4, n + 4);
        ck_assert_uint_eq(crc, be32(png + o + 8 + n));
        if (!memcmp(png + o + 4, "IHDR", 4)) {
            *w = (int)be32(png + o + 8), *h = (int)be32(png + o + 12);
            ck_assert_int_eq(png[o + 16], 8);
            ck_assert_int_eq(png[o + 17], 2);
        } else if (!memcmp(png + o + 4, "IDAT", 4)) {
            idat = realloc(idat, nidat + n);
            memcpy(idat + nidat, png + o + 8, n);
            nidat += n;
        } else if (!memcmp(png + o + 4, "IEND", 4)) {
            seen_end = 1;
        }
        o += 12 + n;
    }
    ck_assert(seen_end && o == len);
    size_t stride = (size_t)*w * 3, rawn = (stride + 1) * (size_t)*h;
    uLongf got = rawn;
    unsigned char *raw = malloc(rawn);
    ck_assert_int_eq(uncompress(raw, &got, idat, nidat), Z_OK);
    ck_assert_uint_eq(got, rawn);
    uint8_t *px = malloc(stride * (size_t)*h);
    for (int y = 0; y < *h; y++) {
        int f = raw[(size_t)y * (stride + 1)];
        ck_assert(f >= 0 && f <= 4);
        const unsigned char *in = raw + (size_t)y * (stride + 1) + 1;
        uint8_t *row = px + (size_t)y * stride, *prev = y ? row - stride : NULL;
        for (size_t i = 0; i < stride; i++) {
            int a = i >= 3 ? row[i - 3] : 0, b = prev ? prev[i] : 0, c = prev && i >= 3 ? prev[i - 3] : 0;
            int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : paeth(a, b, c);
            row[i] = (uint8_t)(in[i] + pred);
        }
    }
    free(raw);
    free(idat);
    return px;
}

START_TEST(png_round_trips_exactly) {
    /* noise, flat areas and gradients, so that every filter gets chosen somewhere */
    int w = 97, h = 61;
    uint8_t *img = malloc((size_t)w * h * 3);
    uint32_t x = 12345;
    for (int i = 0; i < w * h * 3; i++) {
        x = x * 1103515245u + 12345u;
        int px = (i / 3) % w, py = (i / 3) / w;
        img[i] = py < 20 ? (uint8_t)(x >> 24) : py < 40 ? (uint8_t)(px * 2 + i % 3) : (uint8_t)(200 + (px > 50));
    }
    unsigned char *png;
    size_t len;
    trm_err e = {{0}};
    ck_assert_int_eq(trm_png_encode(img, w, h, &png, &len, &e), 0);
    int dw = 0, dh = 0;
    uint8_t *back = decode_png(png, len, &dw, &dh);
    ck_assert_int_eq(dw, w);
    ck_assert_int_eq(dh, h);
    ck_assert_int_eq(memcmp(back, img, (size_t)w * h * 3), 0);
    free(back);
    free(png);
    free(img);
    ck_assert_int_eq(trm_png_encode(NULL, 0, 5, &png, &len, &e), -1);
}
END_TEST

static int is_colour(const uint8_t *p, trm_rgb c) { return p[0] == c.r && p[1] == c.g && p[2] == c.b; }

START_TEST(canvas_draws_lines_and_text) {
    trm_canvas c;
    trm_rgb white = {255, 255, 255}, red = {200, 0, 0}, black = {0, 0, 0};
    trm_canvas_init(&c, 40, 30, white);
    double xy[4] = {5, 10.5, 35, 10.5};
    trm_canvas_polyline(&c, xy, 2, 3.0, red, 0, 0);
    for (int x = 6; x < 34; x++) { /* the stroke's middle row is solid, far rows untouched */
        ck_assert(is_colour(c.px + (10 * 40 + x) * 3, red));
        ck_assert(is_colour(c.px + (20 * 40 + x) * 3, white));
    }
    double dash[4] = {2, 25.5, 38, 25.5}; /* dashed: both colours along the line */
    trm_canvas_polyline(&c, dash, 2, 1.0, red, 6, 4);
    int on = 0, off = 0;
    for (int x = 3; x < 37; x++) is_colour(c.px + (25 * 40 + x) * 3, white) ? off++ : on++;
    ck_assert_msg(on > 20 && off >= 5, "on %d off %d", on, off); /* 6 on, 4 off, soft ends */
    trm_canvas_free(&c);
    trm_canvas_init(&c, 20, 16, white);
    ck_assert_int_eq(trm_canvas_text(&c, 1, 12, "Hi", black), 12);
    int ink = 0;
    for (int i = 0; i < 20 * 16; i++) ink += is_colour(c.px + i * 3, black);
    ck_assert(ink > 15 && ink < 60);
    ck_assert_int_eq(trm_canvas_text_width("h\xc3\xa9llo"), 30); /* one cell per character */
    trm_canvas_free(&c);
}
END_TEST

START_TEST(status_line_fits_every_width) {
    trm_train_status st = {.step = 1234, .total_steps = 5000, .steps_per_s = 12.34, .examples_per_s = 790,
                           .eta_s = 312, .have_metrics = 1, .lm_loss = 0.41234, .q_halt_loss = 0.031,
                           .accuracy = 0.953, .exact_accuracy = 0.931, .act_steps = 3.2, .lr = 1e-4};
    char line[512];
    for (int w = 10; w <= 240; w++) {
        size_t n = trm_train_status_format(&st, w, line, sizeof line);
        ck_assert_uint_eq(n, strlen(line));
        ck_assert_msg(n <= (size_t)(w - 1), "width %d: %zu chars: %s", w, n, line);
        ck_assert(!strchr(line, '\n') && !strchr(line, '\r'));
    }
    trm_train_status_format(&st, 80, line, sizeof line);
    /* at 80 columns: the count, the bar, both rates, ETA, the loss and exact accuracy */
    ck_assert_msg(!strncmp(line, "step 1234/5000 [", 16), "%s", line);
    ck_assert_msg(strstr(line, "12.3 it/s") && strstr(line, "790 ex/s") && strstr(line, "ETA 5m12s") &&
                  strstr(line, "loss 0.4123") && strstr(line, "exact 0.931"), "%s", line);
    trm_train_status_format(&st, 40, line, sizeof line); /* narrow: what matters most stays */
    ck_assert_msg(strstr(line, "step 1234/5000") && strstr(line, "ETA 5m12s") && strstr(line, "loss"), "%s", line);
    trm_train_status_format(&st, 200, line, sizeof line); /* wide: everything, a long bar */
    ck_assert_msg(strstr(line, "q_halt_loss 0.031") && strstr(line, "lr 0.0001") && strstr(line, "ACT steps 3.20"),
                  "%s", line);
    const char *bar = strchr(line, '[');
    ck_assert_msg(bar && bar[29] == ']', "%s", line); /* the widest bar: 30 columns */
    int filled = 0;
    for (int i = 1; i < 29; i++) filled += bar[i] == '#';
    ck_assert_int_eq(filled, 6); /* 1234/5000 of 28 cells */
    /* the bar keeps its width while fields come and go (no metrics yet, no rate yet) */
    for (int w = 80; w <= 200; w += 20) {
        trm_train_status bare = st;
        bare.have_metrics = 0, bare.steps_per_s = 0, bare.examples_per_s = 0;
        char other[512];
        trm_train_status_format(&st, w, line, sizeof line);
        trm_train_status_format(&bare, w, other, sizeof other);
        const char *a = strchr(line, '['), *b = strchr(other, '[');
        ck_assert_msg(a && b && strchr(a, ']') - a == strchr(b, ']') - b, "width %d:\n%s\n%s", w, line, other);
    }
    trm_eval_status_format(250, "all", 12, 40, 3, 80, line, sizeof line);
    ck_assert_msg(!strncmp(line, "eval step 250 [all] 12/40 [", 27) && strstr(line, "30%") && strstr(line, "ETA 3s"),
                  "%s", line);
    char d[32];
    trm_format_duration(3 * 3600 + 5 * 60 + 9, d, sizeof d);
    ck_assert_str_eq(d, "3h05m");
    trm_format_duration(2 * 86400 + 3 * 3600, d, sizeof d);
    ck_assert_str_eq(d, "2d03h");
}
END_TEST

START_TEST(grid_kinds_follow_the_dataset) {
    ck_assert_int_eq(trm_grid_kind_for(81, 11), TRM_GRID_SUDOKU);
    ck_assert_int_eq(trm_grid_kind_for(16, 6), TRM_GRID_SUDOKU);
    ck_assert_int_eq(trm_grid_kind_for(900, 6), TRM_GRID_MAZE);
    ck_assert_int_eq(trm_grid_kind_for(900, 12), TRM_GRID_ARC);
    ck_assert_int_eq(trm_grid_kind_for(900, 11), TRM_GRID_NONE);
    ck_assert_int_eq(trm_grid_kind_for(80, 11), TRM_GRID_NONE);
}
END_TEST

/* Two 4x4 Sudoku test examples through the sink: one solved, one with two wrong cells. */
START_TEST(report_draws_puzzles_and_escapes) {
    trm_puzzle_samples s;
    trm_puzzle_samples_init(&s, TRM_GRID_SUDOKU, 16, 4, "all");
    ck_assert_int_eq(s.nwant, 4);
    int32_t in[4 * 16], lab[4 * 16], pred[4 * 16];
    static const int sol[16] = {1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1};
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 16; i++) {
            lab[r * 16 + i] = pred[r * 16 + i] = sol[i] + 1;
            in[r * 16 + i] = i % 3 ? 1 : sol[i] + 1;
        }
    pred[16 + 5] = 2, pred[16 + 7] = 5; /* example 1: two wrong cells (not givens) */
    trm_batch b = {.batch_size = 4, .seq_len = 16, .inputs = in, .labels = lab, .set_index = 0};
    trm_eval_sink k = trm_puzzle_samples_sink(&s);
    trm_err e = {{0}};
    ck_assert_int_eq(k.batch(k.ctx, &b, 4, pred, NULL, NULL, &e), 0);
    ck_assert_int_eq(s.n, 4);
    trm_report r = {.run_dir = "runs/x", .run_name = "demo <b>", .config_yaml = "lr: 0.001\nname: \"a<b>\"\n",
                    .state = "training", .live = 1, .step = 50, .total_steps = 200, .global_batch_size = 64,
                    .device = "device=cpu: cpu (2 threads)", .steps_per_s = 2.5, .elapsed_s = 20, .puzzles = &s,
                    .puzzles_step = 50};
    trm_run_log log = {0};
    log.last_train_step = log.last_eval_step = -1;
    char *html = trm_report_html(&r, &log, NULL);
    ck_assert(!strncmp(html, "<!DOCTYPE html>", 15));
    ck_assert_ptr_nonnull(strstr(html, "<meta http-equiv=\"refresh\" content=\"30\">"));
    ck_assert_ptr_nonnull(strstr(html, "<h1>demo &lt;b&gt;</h1>"));
    ck_assert_ptr_nonnull(strstr(html, "name: &quot;a&lt;b&gt;&quot;"));
    ck_assert_ptr_nonnull(strstr(html, "step 50 of 200 (25%)"));
    ck_assert_ptr_nonnull(strstr(html, "2.5 steps/s, 160 examples/s"));
    ck_assert_int_eq(count(html, "<b>solved</b>"), 3);
    ck_assert_ptr_nonnull(strstr(html, "test example 1: <b>2 of 16 cells wrong</b>"));
    ck_assert_int_eq(count(html, "<figure>"), 12); /* input, prediction, label per example */
    ck_assert_int_eq(count(html, "fill=\"#ffd6d6\""), 4); /* the wrong cells, in prediction and label */
    ck_assert_ptr_null(strstr(html, "<script"));
    free(html);
    r.live = 0;
    html = trm_report_html(&r, NULL, "metrics.jsonl:3: broken");
    ck_assert_ptr_null(strstr(html, "http-equiv=\"refresh\"")); /* a finished run's page stays */
    ck_assert_ptr_nonnull(strstr(html, "metrics.jsonl:3: broken"));
    free(html);
    trm_puzzle_samples_free(&s);
}
END_TEST

/* ARC: grids cropped to their top-left rectangle of colours, the prediction over the answer's
 * area with wrong cells crossed and a wrong size named; Maze: wrong cells outlined. */
START_TEST(report_draws_arc_and_maze) {
    trm_puzzle_samples s;
    trm_puzzle_samples_init(&s, TRM_GRID_ARC, 900, 1, "all");
    ck_assert_int_eq(s.nwant, 1);
    int32_t in[900], lab[900], pred[900];
    for (int i = 0; i < 900; i++) in[i] = 0, lab[i] = -100, pred[i] = 0;
    for (int r = 0; r < 3; r++) /* a 3x2 answer followed by its EOS row and column */
        for (int c = 0; c < 2; c++) lab[r * 30 + c] = pred[r * 30 + c] = 2 + (r + c) % 10;
    for (int r = 0; r < 4; r++) lab[r * 30 + 2] = 1;
    for (int c = 0; c < 3; c++) lab[3 * 30 + c] = 1;
    for (int r = 0; r < 5; r++) /* a 5x5 input */
        for (int c = 0; c < 5; c++) in[r * 30 + c] = 3;
    pred[0] = 7;          /* one wrong cell */
    pred[2] = 4;          /* and a third column: the predicted grid is 3 wide */
    pred[30 + 2] = 4, pred[60 + 2] = 4;
    trm_batch b = {.batch_size = 1, .seq_len = 900, .inputs = in, .labels = lab, .set_index = 0};
    trm_eval_sink k = trm_puzzle_samples_sink(&s);
    trm_err e = {{0}};
    ck_assert_int_eq(k.batch(k.ctx, &b, 1, pred, NULL, NULL, &e), 0);
    trm_report r = {.run_dir = "r", .run_name = "arc", .state = "training", .step = 1, .total_steps = 2, .puzzles = &s};
    char *html = trm_report_html(&r, NULL, "none");
    ck_assert_ptr_nonnull(strstr(html, "<b>1 of 6 cells wrong</b>; predicted a 3x3 grid, the answer is 3x2"));
    /* cells of 240/5 -> 16 px for the 5x5 input; 240/3 -> 80, capped at 16 px, for the 3x2 answer */
    ck_assert_ptr_nonnull(strstr(html, "<svg class=\"grid input\" xmlns=\"http://www.w3.org/2000/svg\" width=\"82\" height=\"82\""));
    ck_assert_ptr_nonnull(strstr(html, "<svg class=\"grid label\" xmlns=\"http://www.w3.org/2000/svg\" width=\"34\" height=\"50\""));
    ck_assert_int_eq(count(html, "stroke-linecap=\"round\""), 2); /* the crossed cell, in prediction and label */
    free(html);
    trm_puzzle_samples_free(&s);

    trm_puzzle_samples_init(&s, TRM_GRID_MAZE, 900, 3, "all");
    ck_assert_int_eq(s.nwant, 3);
    for (int i = 0; i < 900; i++) in[i] = i % 7 ? 2 : 1, lab[i] = pred[i] = in[i];
    in[0] = lab[0] = pred[0] = 3, in[899] = lab[899] = pred[899] = 4;
    lab[31] = lab[32] = 5;
    pred[31] = 5; /* the path's second cell missed */
    b.inputs = in, b.labels = lab;
    for (int i = 0; i < 3; i++) ck_assert_int_eq(k.batch(&s, &b, 1, pred, NULL, NULL, &e), 0);
    r.puzzles = &s;
    html = trm_report_html(&r, NULL, "none");
    ck_assert_int_eq(count(html, "<b>1 of 900 cells wrong</b>"), 3);
    ck_assert_int_eq(count(html, "stroke=\"#ff00ff\""), 6); /* prediction and label, 3 mazes */
    ck_assert_ptr_nonnull(strstr(html, "width=\"212\" height=\"212\"")); /* 30 cells of 7 px */
    free(html);
    trm_puzzle_samples_free(&s);
}
END_TEST

START_TEST(nearest_word_for_hints) {
    const char *cmds[] = {"pretrain", "generate", "data", "config", "inspect", "devices", "bench", "plot", "version"};
    ck_assert_str_eq(trm_nearest("pretian", cmds, 9), "pretrain");
    ck_assert_str_eq(trm_nearest("gen", cmds, 9), "generate"); /* a unique prefix */
    ck_assert_str_eq(trm_nearest("plto", cmds, 9), "plot");
    ck_assert_ptr_null(trm_nearest("zzzzzz", cmds, 9));
    ck_assert_uint_eq(trm_edit_distance("kitten", "sitting"), 3);
}
END_TEST

int main(void) {
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("plot");
    tcase_add_test(tc, metrics_log_reads_what_runs_leave);
    tcase_add_test(tc, ticks_and_labels);
    tcase_add_test(tc, svg_has_every_series_of_every_run);
    tcase_add_test(tc, png_round_trips_exactly);
    tcase_add_test(tc, canvas_draws_lines_and_text);
    tcase_add_test(tc, status_line_fits_every_width);
    tcase_add_test(tc, grid_kinds_follow_the_dataset);
    tcase_add_test(tc, report_draws_puzzles_and_escapes);
    tcase_add_test(tc, report_draws_arc_and_maze);
    tcase_add_test(tc, nearest_word_for_hints);
    suite_add_tcase(s, tc);
    return trm_run_suite(s);
}
