/* report.c — report.html (see report.h): plain HTML with inline CSS and SVG, built as text. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plot.h"
#include "run_display.h"
#include "util/util.h"

/* ---------------------------------------------------------------------------------------
 * which puzzles, and the picks
 * ------------------------------------------------------------------------------------- */

static int isqrt_exact(int64_t n) {
    int r = (int)lround(sqrt((double)n));
    return (int64_t)r * r == n ? r : 0;
}

trm_grid_kind trm_grid_kind_for(int64_t seq_len, int64_t vocab_size) {
    int side = isqrt_exact(seq_len);
    if (side == 0) return TRM_GRID_NONE;
    if (side == 30 && vocab_size == 12) return TRM_GRID_ARC;
    if (isqrt_exact(side) && vocab_size == side + 2) return TRM_GRID_SUDOKU;
    if (vocab_size == 6 && side >= 5) return TRM_GRID_MAZE;
    return TRM_GRID_NONE;
}

void trm_puzzle_samples_init(trm_puzzle_samples *s, trm_grid_kind kind, int64_t seq_len, int64_t n_examples,
                             const char *set) {
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->S = (int)seq_len;
    snprintf(s->set, sizeof s->set, "%s", set ? set : "");
    int want = kind == TRM_GRID_SUDOKU ? 6 : kind == TRM_GRID_MAZE ? 3 : kind == TRM_GRID_ARC ? 4 : 0;
    if (want > n_examples) want = (int)n_examples;
    for (int i = 0; i < want; i++) s->want[i] = (int64_t)i * n_examples / want;
    s->nwant = want;
    if (want) {
        s->inputs = xmalloc((size_t)want * (size_t)s->S * sizeof *s->inputs);
        s->labels = xmalloc((size_t)want * (size_t)s->S * sizeof *s->labels);
        s->preds = xmalloc((size_t)want * (size_t)s->S * sizeof *s->preds);
    }
}

void trm_puzzle_samples_reset(trm_puzzle_samples *s) { s->n = 0, s->seen = 0; }

void trm_puzzle_samples_free(trm_puzzle_samples *s) {
    free(s->inputs);
    free(s->labels);
    free(s->preds);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------------------------
 * puzzle grids (inline SVG)
 * ------------------------------------------------------------------------------------- */

enum { ROLE_INPUT, ROLE_PRED, ROLE_LABEL };
static const char *const role_names[] = {"input", "prediction", "label"};

typedef struct {
    const int32_t *in, *label, *pred;
    const unsigned char *wrong; /* per cell */
    int side;
} puzzle_view;

static void svg_open(trm_sbuf *b, int w, int h, int role) {
    sb_printf(b, "<svg class=\"grid %s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\">",
              role_names[role], w, h, w, h);
}

static void sudoku_svg(trm_sbuf *b, const puzzle_view *v, int role) {
    int side = v->side, cs = side <= 9 ? 24 : 18, W = side * cs + 2, box = isqrt_exact(side);
    const int32_t *t = role == ROLE_INPUT ? v->in : role == ROLE_PRED ? v->pred : v->label;
    svg_open(b, W, W, role);
    for (int i = 0; i < side * side; i++) {
        int x = 1 + (i % side) * cs, y = 1 + (i / side) * cs, given = v->in[i] >= 2;
        int wrong = role != ROLE_INPUT && v->wrong[i];
        const char *fill = wrong ? "#ffd6d6" : role != ROLE_INPUT && given ? "#f0f0f0" : "#ffffff";
        sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#c8c8c8\"/>", x, y, cs, cs,
                  fill);
        if (t[i] >= 2) {
            const char *col = role == ROLE_INPUT ? "#111111" : given ? "#8a8a8a" : wrong && role == ROLE_PRED ? "#d00000"
                              : role == ROLE_PRED ? "#1f5fbf" : "#111111";
            sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-size=\"%d\" text-anchor=\"middle\">%d</text>",
                      x + cs / 2.0, y + cs * 0.73, col, cs * 6 / 10, t[i] - 1);
        }
    }
    for (int k = 0; k <= side; k += box ? box : side) { /* the boxes */
        int p = 1 + k * cs;
        sb_printf(b, "<line x1=\"%d\" y1=\"1\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\" stroke-width=\"2\"/>", p, p, W - 1);
        sb_printf(b, "<line x1=\"1\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333333\" stroke-width=\"2\"/>", p, W - 1, p);
    }
    sb_puts(b, "</svg>");
}

/* Cells of one colour next to each other in a row become one rectangle (mazes are large). */
static void runs_of_cells(trm_sbuf *b, const char *const *colours, int ncol, const int32_t *t, int side, int r0,
                          int c0, int rows, int cols, int cs) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols;) {
            int v = t[(r0 + r) * side + c0 + c], n = 1;
            while (c + n < cols && t[(r0 + r) * side + c0 + c + n] == v) n++;
            const char *col = v >= 0 && v < ncol ? colours[v] : "#ffffff";
            sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>", 1 + c * cs, 1 + r * cs,
                      n * cs, cs, col);
            c += n;
        }
}

static void maze_svg(trm_sbuf *b, const puzzle_view *v, int role) {
    static const char *const colours[] = {"#eeeeee", "#3b3b3b", "#ffffff", "#2ca02c", "#d62728", "#f5a623"};
    int side = v->side, cs = side <= 30 ? 7 : 210 / side > 2 ? 210 / side : 2, W = side * cs + 2;
    const int32_t *t = role == ROLE_INPUT ? v->in : role == ROLE_PRED ? v->pred : v->label;
    svg_open(b, W, W, role);
    sb_printf(b, "<rect x=\"0.5\" y=\"0.5\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999999\"/>", W - 1, W - 1);
    runs_of_cells(b, colours, 6, t, side, 0, 0, side, side, cs);
    for (int i = 0; role != ROLE_INPUT && i < side * side; i++)
        if (v->wrong[i])
            sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#ff00ff\" "
                         "stroke-width=\"1.5\"/>", 1 + (i % side) * cs + 0.5, 1 + (i / side) * cs + 0.5, cs - 1, cs - 1);
    sb_puts(b, "</svg>");
}

/* The top-left rectangle of colour tokens (2..11) of a 30x30 ARC grid (SPEC §7). */
static void arc_extent(const int32_t *t, int *rows, int *cols) {
    int c = 0, r = 0;
    while (c < 30 && t[c] >= 2 && t[c] <= 11) c++;
    while (r < 30 && t[r * 30] >= 2 && t[r * 30] <= 11) r++;
    *rows = c ? r : 0, *cols = r ? c : 0;
}

static const char *const arc_colours[] = {"#ffffff", "#ffffff", "#000000", "#0074d9", "#ff4136", "#2ecc40",
                                          "#ffdc00", "#aaaaaa", "#f012be", "#ff851b", "#7fdbff", "#870c25"};

static void arc_svg(trm_sbuf *b, const puzzle_view *v, int role) {
    int rows, cols;
    arc_extent(role == ROLE_INPUT ? v->in : v->label, &rows, &cols); /* the prediction as the label's area */
    const int32_t *t = role == ROLE_INPUT ? v->in : role == ROLE_PRED ? v->pred : v->label;
    int big = rows > cols ? rows : cols, cs = big ? 240 / big : 8;
    cs = cs > 16 ? 16 : cs < 5 ? 5 : cs;
    int W = cols * cs + 2, H = rows * cs + 2;
    svg_open(b, W, H, role);
    runs_of_cells(b, arc_colours, 12, t, 30, 0, 0, rows, cols, cs);
    for (int k = 0; k <= cols; k++)
        sb_printf(b, "<line x1=\"%d\" y1=\"1\" x2=\"%d\" y2=\"%d\" stroke=\"#555555\" stroke-width=\"0.5\"/>", 1 + k * cs,
                  1 + k * cs, H - 1);
    for (int k = 0; k <= rows; k++)
        sb_printf(b, "<line x1=\"1\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555555\" stroke-width=\"0.5\"/>", 1 + k * cs,
                  W - 1, 1 + k * cs);
    for (int r = 0; role != ROLE_INPUT && r < rows; r++)
        for (int c = 0; c < cols; c++) {
            if (!v->wrong[r * 30 + c]) continue;
            double x0 = 1 + c * cs + 2, y0 = 1 + r * cs + 2, x1 = x0 + cs - 4, y1 = y0 + cs - 4;
            sb_printf(b, "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"#ffffff\" stroke-width=\"2\" "
                         "stroke-linecap=\"round\"/>", x0, y0, x1, y1, x1, y0, x0, y1);
        }
    sb_puts(b, "</svg>");
}

static void puzzle_html(trm_sbuf *b, const trm_puzzle_samples *s, int k) {
    int S = s->S;
    puzzle_view v = {s->inputs + (size_t)k * S, s->labels + (size_t)k * S, s->preds + (size_t)k * S, NULL,
                     isqrt_exact(S)};
    unsigned char *wrong = xcalloc((size_t)S, 1);
    int nlab = 0, nwrong = 0, arows = 0, acols = 0, prows = 0, pcols = 0;
    if (s->kind == TRM_GRID_ARC) {
        arc_extent(v.label, &arows, &acols);
        arc_extent(v.pred, &prows, &pcols);
    }
    for (int i = 0; i < S; i++) {
        int inside = s->kind != TRM_GRID_ARC || (i / 30 < arows && i % 30 < acols);
        if (v.label[i] < 0 || !inside) continue;
        nlab++;
        if (v.pred[i] != v.label[i]) wrong[i] = 1, nwrong++;
    }
    v.wrong = wrong;
    int solved = nwrong == 0 && (s->kind != TRM_GRID_ARC || (prows == arows && pcols == acols));
    sb_printf(b, "<div class=\"puzzle%s\"><p class=\"cap\">test example %lld: ", solved ? " solved" : " unsolved",
              (long long)s->index[k]);
    if (solved) sb_puts(b, "<b>solved</b>");
    else sb_printf(b, "<b>%d of %d cells wrong</b>", nwrong, nlab);
    if (s->kind == TRM_GRID_ARC && (prows != arows || pcols != acols))
        sb_printf(b, "; predicted a %dx%d grid, the answer is %dx%d", prows, pcols, arows, acols);
    sb_puts(b, "</p><div class=\"trio\">");
    for (int role = 0; role < 3; role++) {
        sb_puts(b, "<figure>");
        if (s->kind == TRM_GRID_SUDOKU) sudoku_svg(b, &v, role);
        else if (s->kind == TRM_GRID_MAZE) maze_svg(b, &v, role);
        else arc_svg(b, &v, role);
        sb_printf(b, "<figcaption>%s</figcaption></figure>", role_names[role]);
    }
    sb_puts(b, "</div></div>\n");
    free(wrong);
}

static void puzzles_section(trm_sbuf *b, const trm_report *r) {
    const trm_puzzle_samples *s = r->puzzles;
    if (!s || s->kind == TRM_GRID_NONE) return; /* not a grid task: nothing to draw */
    sb_puts(b, "<section id=\"puzzles\"><h2>Test puzzles</h2>\n");
    if (s->n == 0) {
        sb_puts(b, "<p class=\"note\">Drawn after the first evaluation.</p></section>\n");
        return;
    }
    static const char *const how[] = {"", "Predicted digits in blue; wrong cells in red. Givens are grey.",
                                       "Walls dark, start green, goal red, path orange; wrong cells outlined in magenta.",
                                       "The prediction is shown over the answer's area; wrong cells are crossed."};
    sb_printf(b, "<p class=\"note\">%d example%s of the test set <code>", s->n, s->n == 1 ? "" : "s");
    sb_escape(b, s->set);
    sb_printf(b, "</code> at the evaluation of step %lld. %s</p>\n", (long long)r->puzzles_step, how[s->kind]);
    for (int k = 0; k < s->n; k++) puzzle_html(b, s, k);
    sb_puts(b, "</section>\n");
}

/* ---------------------------------------------------------------------------------------
 * tables
 * ------------------------------------------------------------------------------------- */

static const char *const metric_keys[] = {"lm_loss", "accuracy", "exact_accuracy", "q_halt_accuracy", "steps",
                                          "q_halt_loss", "lr"};
static const char *const metric_heads[] = {"lm_loss", "accuracy", "exact_accuracy", "q_halt_accuracy",
                                           "mean ACT steps", "q_halt_loss", "lr"};
#define NMETRIC_COLS (int)(sizeof metric_keys / sizeof metric_keys[0])

static void value_cell(trm_sbuf *b, const trm_run_log *log, const char *prefix, const char *metric) {
    char key[160];
    snprintf(key, sizeof key, "%s/%s", prefix, metric);
    const trm_series *s = trm_run_log_find(log, key);
    if (!s || s->n == 0) sb_puts(b, "<td>&#8211;</td>");
    else if (!strcmp(metric, "lr")) sb_printf(b, "<td>%.3g</td>", s->value[s->n - 1]);
    else sb_printf(b, "<td>%.4f</td>", s->value[s->n - 1]);
}

static int is_metric(const char *m) {
    for (int i = 0; i < NMETRIC_COLS; i++)
        if (!strcmp(m, metric_keys[i])) return 1;
    return !strcmp(m, "count");
}

static void metrics_section(trm_sbuf *b, const trm_run_log *log) {
    sb_puts(b, "<section id=\"metrics\"><h2>Latest metrics</h2>\n");
    if (!log || log->records == 0) {
        sb_puts(b, "<p class=\"note\">None yet: the first train metrics come after log_interval steps.</p></section>\n");
        return;
    }
    sb_puts(b, "<table class=\"metrics\"><thead><tr><th></th><th>step</th>");
    for (int i = 0; i < NMETRIC_COLS; i++) sb_printf(b, "<th>%s</th>", metric_heads[i]);
    sb_puts(b, "</tr></thead><tbody>\n");
    if (log->last_train_step >= 0) {
        sb_printf(b, "<tr><th>train</th><td>%lld</td>", (long long)log->last_train_step);
        for (int i = 0; i < NMETRIC_COLS; i++) value_cell(b, log, "train", metric_keys[i]);
        sb_puts(b, "</tr>\n");
    }
    /* eval sets: the prefixes of eval keys that name a known metric ("all/lm_loss") */
    for (int i = 0; i < log->nseries; i++) {
        const trm_series *s = &log->series[i];
        const char *slash = strrchr(s->key, '/');
        if (!s->eval || !slash || strcmp(slash + 1, "lm_loss")) continue;
        char set[128];
        snprintf(set, sizeof set, "%.*s", (int)(slash - s->key), s->key);
        sb_puts(b, "<tr><th>eval <code>");
        sb_escape(b, set);
        sb_printf(b, "</code></th><td>%lld</td>", (long long)s->step[s->n - 1]);
        for (int k = 0; k < NMETRIC_COLS; k++) value_cell(b, log, set, metric_keys[k]);
        sb_puts(b, "</tr>\n");
    }
    sb_puts(b, "</tbody></table>\n");
    int header = 0; /* evaluator metrics such as ARC/pass@K */
    for (int i = 0; i < log->nseries; i++) {
        const trm_series *s = &log->series[i];
        const char *slash = strrchr(s->key, '/');
        if (!s->eval || !slash || is_metric(slash + 1)) continue;
        if (!header++) sb_puts(b, "<table class=\"metrics\"><thead><tr><th>evaluator</th><th>step</th><th>value</th></tr></thead><tbody>\n");
        sb_puts(b, "<tr><th><code>");
        sb_escape(b, s->key);
        sb_printf(b, "</code></th><td>%lld</td><td>%.4f</td></tr>\n", (long long)s->step[s->n - 1], s->value[s->n - 1]);
    }
    if (header) sb_puts(b, "</tbody></table>\n");
    sb_puts(b, "</section>\n");
}

static void row(trm_sbuf *b, const char *head, const char *value_html) {
    sb_printf(b, "<tr><th>%s</th><td>%s</td></tr>\n", head, value_html);
}

static void speed_section(trm_sbuf *b, const trm_report *r) {
    char v[512], d[32], d2[32];
    trm_sbuf esc = {0};
    sb_puts(b, "<section id=\"speed\"><h2>Device and speed</h2><table class=\"kv\">\n");
    sb_escape(&esc, r->device ? r->device : "?");
    row(b, "device", esc.p);
    row(b, "compile", r->compile ? "on (the step is planned once and replayed)" : "off (op by op)");
    if (r->world > 1) {
        snprintf(v, sizeof v, "%d (data parallel)", r->world);
        row(b, "processes", v);
    }
    snprintf(v, sizeof v, "%lld examples per step", (long long)r->global_batch_size);
    row(b, "global batch", v);
    if (r->steps_per_s > 0) {
        snprintf(v, sizeof v, "%.3g steps/s, %.4g examples/s (evaluations left out)", r->steps_per_s,
                 r->steps_per_s * (double)r->global_batch_size);
        row(b, "training speed", v);
    }
    trm_format_duration(r->elapsed_s, d, sizeof d);
    if (r->live && r->steps_per_s > 0) {
        trm_format_duration((double)(r->total_steps - r->step) / r->steps_per_s, d2, sizeof d2);
        snprintf(v, sizeof v, "%s; about %s of training left", d, d2);
    } else {
        snprintf(v, sizeof v, "%s", d);
    }
    row(b, "elapsed (this process)", v);
    if (r->last_eval_s > 0) {
        trm_format_duration(r->last_eval_s, d, sizeof d);
        row(b, "last evaluation took", d);
    }
    sb_puts(b, "</table></section>\n");
    sb_free(&esc);
}

/* ---------------------------------------------------------------------------------------
 * the page
 * ------------------------------------------------------------------------------------- */

static const char *const css =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:0 auto;max-width:1240px;"
    "padding:12px 20px 40px;color:#222;background:#fafafa}"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}"
    "section{background:#fff;padding:4px 14px 12px;border:1px solid #e6e6e6;border-radius:6px;margin-top:14px}"
    ".state{margin:2px 0 8px;color:#444}.bar{height:8px;background:#e4e4e4;border-radius:4px;overflow:hidden}"
    ".bar div{height:8px;background:#1f77b4}"
    "table{border-collapse:collapse;font-size:14px}td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #eee}"
    "table.metrics td{text-align:right;font-variant-numeric:tabular-nums}table.kv th{color:#555;font-weight:normal}"
    "svg.trm-curves{max-width:100%;height:auto}"
    ".puzzle{display:inline-block;vertical-align:top;margin:6px 18px 10px 0}.cap{margin:4px 0;font-size:14px}"
    ".solved b{color:#1b7d2a}.unsolved b{color:#c00000}.trio{display:flex;gap:10px;align-items:flex-start}"
    "figure{margin:0}figcaption{font-size:12px;color:#666;text-align:center}"
    "svg.grid text{font-family:Helvetica,Arial,sans-serif}"
    "pre{font-size:12px;background:#f6f6f6;padding:10px;overflow:auto;max-height:520px}"
    ".note{color:#666;font-size:14px}footer{margin-top:20px;color:#888;font-size:12px}";

char *trm_report_html(const trm_report *r, const trm_run_log *log, const char *log_error) {
    trm_sbuf b = {0};
    const char *name = r->run_name ? r->run_name : r->run_dir;
    double pct = r->total_steps > 0 ? 100.0 * (double)r->step / (double)r->total_steps : 0;
    sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    if (r->live) sb_puts(&b, "<meta http-equiv=\"refresh\" content=\"30\">\n");
    sb_puts(&b, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>trm: ");
    sb_escape(&b, name);
    sb_printf(&b, " (step %lld)</title>\n<style>%s</style>\n</head>\n<body>\n<header><h1>", (long long)r->step, css);
    sb_escape(&b, name);
    sb_puts(&b, "</h1><p class=\"state\"><b>");
    sb_escape(&b, r->state);
    char when[64] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    sb_printf(&b, "</b> &#183; step %lld of %lld (%.0f%%) &#183; updated %s%s</p>", (long long)r->step,
              (long long)r->total_steps, floor(pct), when, r->live ? " &#183; this page reloads every 30 s" : "");
    sb_printf(&b, "<div class=\"bar\"><div style=\"width:%.1f%%\"></div></div>\n<p class=\"note\">Run directory <code>",
              pct > 100 ? 100 : pct);
    sb_escape(&b, r->run_dir);
    sb_puts(&b, "</code></p></header>\n");
    speed_section(&b, r);
    metrics_section(&b, log);
    sb_puts(&b, "<section id=\"curves\"><h2>Curves</h2>\n");
    if (log && log->records > 0) {
        trm_plot_opts o = {.width = 1180, .title = "training curves (train solid, eval dashed)"};
        char *svg = trm_plot_svg(log, 1, &o);
        sb_puts(&b, svg);
        free(svg);
    } else if (log) {
        sb_puts(&b, "<p class=\"note\">No metrics yet.</p>\n");
    } else {
        sb_puts(&b, "<p class=\"note\">metrics.jsonl could not be read: ");
        sb_escape(&b, log_error ? log_error : "?");
        sb_puts(&b, "</p>\n");
    }
    sb_puts(&b, "</section>\n");
    puzzles_section(&b, r);
    sb_puts(&b, "<section id=\"config\"><h2>Config</h2>\n<pre>");
    sb_escape(&b, r->config_yaml ? r->config_yaml : "");
    sb_printf(&b, "</pre></section>\n<footer>written by trm %s; <code>trm plot ", TRM_VERSION);
    sb_escape(&b, r->run_dir);
    sb_puts(&b, "</code> draws the curves as SVG or PNG.</footer>\n</body>\n</html>\n");
    return sb_take(&b);
}

int trm_report_write(const trm_report *r, trm_err *e) {
    trm_run_log log;
    trm_err le = {{0}};
    char *mpath = trm_path_join(r->run_dir, "metrics.jsonl");
    int have = trm_file_exists(mpath) ? trm_run_log_read(&log, mpath, &le) == 0 : 0;
    if (!trm_file_exists(mpath)) { /* before the first log point: an empty log */
        memset(&log, 0, sizeof log);
        have = 1;
    }
    free(mpath);
    char *html = trm_report_html(r, have ? &log : NULL, le.msg);
    if (have) trm_run_log_free(&log);
    char *path = trm_path_join(r->run_dir, "report.html");
    int rc = trm_write_file_atomic(path, html, strlen(html), e);
    free(path);
    free(html);
    return rc;
}
