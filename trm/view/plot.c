/* plot.c — the learning-curve figure of plot.h. The layout (panels, ranges, ticks, legend) is
 * computed once; a small painter interface then draws it either as SVG text or on a raster,
 * so the two formats show the same figure. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canvas.h"
#include "png.h"
#include "util/util.h"

/* ---------------------------------------------------------------------------------------
 * ticks
 * ------------------------------------------------------------------------------------- */

int trm_plot_ticks(double lo, double hi, int log_scale, double *ticks, int max) {
    int n = 0;
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi) || max < 1) return 0;
    if (!log_scale) {
        double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
        double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
        double k0 = ceil(lo / step - 1e-9);
        for (int i = 0; n < max; i++) {
            double t = (k0 + i) * step;
            if (t > hi + step * 1e-9) break;
            ticks[n++] = fabs(t) < step * 1e-9 ? 0 : t;
        }
        return n;
    }
    if (lo <= 0) return 0;
    static const double mant[3][9] = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
    static const int nmant[3] = {1, 3, 9};
    int d0 = (int)floor(log10(lo)), d1 = (int)ceil(log10(hi));
    int every = (d1 - d0 + 7) / 8; /* at most ~8 decades labelled */
    for (int level = 0; level < 3; level++) {
        n = 0;
        for (int d = d0; d <= d1; d++) {
            if (level == 0 && (d - d0) % every) continue;
            for (int m = 0; m < nmant[level] && n < max; m++) {
                double t = mant[level][m] * pow(10, d);
                if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks[n++] = t;
            }
        }
        if (n >= 3) break;
    }
    return n;
}

void trm_plot_tick_label(double v, int si, char *buf, size_t n) {
    double a = fabs(v);
    if (si && a >= 1e6) snprintf(buf, n, "%.4gM", v / 1e6);
    else if (si && a >= 1e3) snprintf(buf, n, "%.4gk", v / 1e3);
    else if (a != 0 && (a < 1e-4 || a >= 1e5)) snprintf(buf, n, "%.0e", v);
    else snprintf(buf, n, "%.4g", v);
}

/* ---------------------------------------------------------------------------------------
 * figure layout
 * ------------------------------------------------------------------------------------- */

typedef struct {
    const char *title;
    const char *metric; /* train/<metric> and <set>/<metric>; NULL: the ARC pass@K panel */
    int may_log;        /* log scale when the values span a factor of 5 or more */
    int unit;           /* a fraction: the axis is [0, 1] */
    int from_zero;
} panel_def;

static const panel_def panel_defs[] = {
    {"lm_loss", "lm_loss", 1, 0, 0},
    {"accuracy (per token)", "accuracy", 0, 1, 0},
    {"exact_accuracy (whole puzzle)", "exact_accuracy", 0, 1, 0},
    {"q_halt_accuracy", "q_halt_accuracy", 0, 1, 0},
    {"mean ACT steps", "steps", 0, 0, 1},
    {"learning rate", "lr", 0, 0, 1},
    {"ARC pass@K (eval)", NULL, 0, 1, 0},
};
#define NPANEL_DEFS (int)(sizeof panel_defs / sizeof panel_defs[0])

typedef struct {
    const trm_series *s;
    int run, eval;
    char name[96]; /* set name or "@K", "" when the run colour says enough */
} plot_series;

typedef struct {
    const panel_def *def;
    plot_series *ser;
    int nser;
    int log;
    double ylo, yhi;
    double x, y, w, h; /* the plot area */
    double cx, cy;     /* the cell's top-left corner */
} panel;

typedef struct {
    int W, H;
    double xlo, xhi;
    panel panels[NPANEL_DEFS];
    int npanels;
    char title[512];
    int nruns;
    const trm_run_log *runs;
    char **labels;          /* per run, unique */
    double legend_y, legend_h;
} figure;

static const trm_rgb palette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},  {148, 103, 189},
                                  {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
#define NPALETTE (int)(sizeof palette / sizeof palette[0])
static const trm_rgb ink = {34, 34, 34}, grey = {110, 110, 110}, gridc = {229, 229, 229}, framec = {160, 160, 160},
                     white = {255, 255, 255};

enum { MARGIN = 16, LEGEND_ROW = 18, CELL_TITLE = 26, AXIS_LEFT = 58, AXIS_RIGHT = 14, AXIS_BOTTOM = 36 };

static int ends_with_metric(const char *key, const char *metric) {
    const char *slash = strrchr(key, '/');
    return slash && !strcmp(slash + 1, metric);
}

static int has_arc(const trm_run_log *runs, int nruns) {
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].nseries; i++)
            if (!strncmp(runs[r].series[i].key, "ARC/pass@", 9)) return 1;
    return 0;
}

static void add_series(panel *p, const trm_series *s, int run, const char *name) {
    if (s->n == 0) return;
    p->ser = xrealloc(p->ser, (size_t)(p->nser + 1) * sizeof *p->ser);
    plot_series *ps = &p->ser[p->nser++];
    ps->s = s, ps->run = run, ps->eval = s->eval;
    snprintf(ps->name, sizeof ps->name, "%s", name);
}

static int eval_sets(const trm_run_log *r, const char *metric) {
    int n = 0;
    for (int i = 0; i < r->nseries; i++)
        n += r->series[i].eval && ends_with_metric(r->series[i].key, metric) && strncmp(r->series[i].key, "ARC/", 4);
    return n;
}

static void collect(panel *p, const trm_run_log *runs, int nruns) {
    for (int r = 0; r < nruns; r++) {
        const trm_run_log *run = &runs[r];
        if (!p->def->metric) {
            for (int i = 0; i < run->nseries; i++)
                if (!strncmp(run->series[i].key, "ARC/pass@", 9))
                    add_series(p, &run->series[i], r, run->series[i].key + 8); /* "@K" */
            continue;
        }
        char key[128];
        snprintf(key, sizeof key, "train/%s", p->def->metric);
        const trm_series *t = trm_run_log_find(run, key);
        if (t && !t->eval) add_series(p, t, r, "");
        int sets = eval_sets(run, p->def->metric);
        for (int i = 0; i < run->nseries; i++) {
            const trm_series *s = &run->series[i];
            if (!s->eval || !ends_with_metric(s->key, p->def->metric) || !strncmp(s->key, "ARC/", 4)) continue;
            char set[96];
            snprintf(set, sizeof set, "%.*s", (int)(strrchr(s->key, '/') - s->key), s->key);
            add_series(p, s, r, sets > 1 ? set : "");
        }
    }
}

/* The nearest of 1, 2, 5 times a power of ten below (dir < 0) or above x > 0. */
static double step125(double x, int dir) {
    double mag = pow(10, floor(log10(x))), m[4] = {1, 2, 5, 10};
    if (dir < 0) {
        for (int i = 3; i >= 0; i--)
            if (m[i] * mag <= x * (1 + 1e-12)) return m[i] * mag;
        return mag;
    }
    for (int i = 0; i < 4; i++)
        if (m[i] * mag >= x * (1 - 1e-12)) return m[i] * mag;
    return 10 * mag;
}

static void y_range(panel *p) {
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < p->nser; i++)
        for (int64_t k = 0; k < p->ser[i].s->n; k++) {
            double v = p->ser[i].s->value[k];
            lo = fmin(lo, v), hi = fmax(hi, v);
        }
    if (p->def->unit) {
        p->ylo = fmin(0, lo), p->yhi = fmax(1, hi);
        return;
    }
    if (!(lo <= hi)) lo = 0, hi = 1;
    p->log = p->def->may_log && lo > 0 && hi / lo >= 5;
    if (p->log) { /* end on 1-2-5 values, so that both ends are labelled */
        p->ylo = step125(lo, -1), p->yhi = step125(hi, 1);
        return;
    }
    if (p->def->from_zero && lo > 0) lo = 0;
    if (hi - lo < 1e-12 * fmax(1, fabs(hi))) {
        double pad = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
        lo -= pad, hi += pad;
    }
    double t[16];
    int n = trm_plot_ticks(lo, hi, 0, t, 16);
    double step = n >= 2 ? t[1] - t[0] : (hi - lo) / 4;
    p->ylo = floor(lo / step + 1e-9) * step, p->yhi = ceil(hi / step - 1e-9) * step; /* end on ticks */
    if (p->yhi <= p->ylo) p->yhi = p->ylo + step;
}

static double px_x(const figure *f, const panel *p, double step) {
    return p->x + (step - f->xlo) / (f->xhi - f->xlo) * p->w;
}

static double px_y(const panel *p, double v) {
    double a = p->log ? log10(v) : v, lo = p->log ? log10(p->ylo) : p->ylo, hi = p->log ? log10(p->yhi) : p->yhi;
    return p->y + p->h - (a - lo) / (hi - lo) * p->h;
}

/* Legend text width, measured generously so both fonts fit. */
static double text_w(const char *s) { return 7.0 * (double)strlen(s); }

static void legend_item_text(const figure *f, int r, char *buf, size_t n) {
    const trm_run_log *run = &f->runs[r];
    int64_t last = run->last_train_step > run->last_eval_step ? run->last_train_step : run->last_eval_step;
    snprintf(buf, n, "%s (step %lld)", f->labels[r], (long long)last);
}

/* Rows the legend needs at this width (the runs, then the train/eval key). */
static double legend_height(const figure *f) {
    double x = MARGIN, rows = 1;
    for (int r = 0; r <= f->nruns; r++) {
        char t[256];
        if (r < f->nruns) legend_item_text(f, r, t, sizeof t);
        else snprintf(t, sizeof t, "train    - - eval");
        double w = 28 + text_w(t) + 18;
        if (x + w > f->W - MARGIN && x > MARGIN) x = MARGIN, rows++;
        x += w;
    }
    return rows * LEGEND_ROW;
}

static void unique_labels(figure *f) {
    f->labels = xcalloc((size_t)f->nruns, sizeof *f->labels);
    for (int r = 0; r < f->nruns; r++) {
        int dup = 0;
        for (int q = 0; q < f->nruns; q++) dup |= q != r && !strcmp(f->runs[q].label, f->runs[r].label);
        f->labels[r] = dup ? xasprintf("%s [%s]", f->runs[r].label, f->runs[r].dir) : xstrdup(f->runs[r].label);
    }
}

static void layout(figure *f, const trm_run_log *runs, int nruns, const trm_plot_opts *o) {
    memset(f, 0, sizeof *f);
    f->runs = runs, f->nruns = nruns;
    f->W = o && o->width >= 320 ? o->width : 1200;
    unique_labels(f);
    if (o && o->title) {
        snprintf(f->title, sizeof f->title, "%s", o->title);
    } else {
        int n = snprintf(f->title, sizeof f->title, "training curves:");
        for (int r = 0; r < nruns && n < (int)sizeof f->title; r++)
            n += snprintf(f->title + n, sizeof f->title - (size_t)n, "%s %s", r ? "," : "", f->labels[r]);
    }
    f->xlo = 0, f->xhi = 1;
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].nseries; i++)
            for (int64_t k = 0; k < runs[r].series[i].n; k++) f->xhi = fmax(f->xhi, runs[r].series[i].step[k]);
    int arc = has_arc(runs, nruns);
    for (int d = 0; d < NPANEL_DEFS; d++) {
        if (!panel_defs[d].metric && !arc) continue;
        panel *p = &f->panels[f->npanels++];
        p->def = &panel_defs[d];
        collect(p, runs, nruns);
        y_range(p);
    }
    int cols = f->W >= 900 ? 3 : f->W >= 560 ? 2 : 1, rows = (f->npanels + cols - 1) / cols;
    double cw = (double)(f->W - 2 * MARGIN) / cols, ch = fmax(200, round(cw * 0.68));
    f->legend_y = 40;
    f->legend_h = legend_height(f);
    double top = f->legend_y + f->legend_h + 6;
    for (int i = 0; i < f->npanels; i++) {
        panel *p = &f->panels[i];
        p->cx = MARGIN + (i % cols) * cw, p->cy = top + (i / cols) * ch;
        p->x = p->cx + AXIS_LEFT, p->y = p->cy + CELL_TITLE;
        p->w = cw - AXIS_LEFT - AXIS_RIGHT, p->h = ch - CELL_TITLE - AXIS_BOTTOM;
    }
    f->H = (int)ceil(top + rows * ch + MARGIN / 2);
}

static void figure_free(figure *f) {
    for (int i = 0; i < f->npanels; i++) free(f->panels[i].ser);
    for (int r = 0; r < f->nruns; r++) free(f->labels[r]);
    free(f->labels);
}

/* ---------------------------------------------------------------------------------------
 * painters
 * ------------------------------------------------------------------------------------- */

enum { ANCHOR_START = -1, ANCHOR_MIDDLE = 0, ANCHOR_END = 1 };

typedef struct painter painter;
struct painter {
    /* attrs: extra SVG attributes that describe a data series (ignored on a raster) */
    void (*polyline)(painter *p, const double *xy, int n, trm_rgb col, double width, int dashed, const char *attrs);
    void (*rect)(painter *p, double x, double y, double w, double h, const trm_rgb *fill, const trm_rgb *stroke);
    void (*text)(painter *p, double x, double y, const char *s, int anchor, trm_rgb col, int big);
    void (*disc)(painter *p, double x, double y, double r, trm_rgb col);
};

typedef struct {
    painter p;
    trm_sbuf b;
} svg_painter;

static void hex(char *buf, trm_rgb c) { snprintf(buf, 8, "#%02x%02x%02x", c.r, c.g, c.b); }

static void svg_polyline(painter *pp, const double *xy, int n, trm_rgb col, double width, int dashed, const char *attrs) {
    trm_sbuf *b = &((svg_painter *)pp)->b;
    char c[8];
    hex(c, col);
    sb_printf(b, "<polyline%s fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-linejoin=\"round\"%s points=\"",
              attrs ? attrs : "", c, width, dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (int i = 0; i < n; i++) sb_printf(b, "%s%.1f,%.1f", i ? " " : "", xy[2 * i], xy[2 * i + 1]);
    sb_puts(b, "\"/>\n");
}

static void svg_rect(painter *pp, double x, double y, double w, double h, const trm_rgb *fill, const trm_rgb *stroke) {
    trm_sbuf *b = &((svg_painter *)pp)->b;
    char f[8] = "none", s[8] = "none";
    if (fill) hex(f, *fill);
    if (stroke) hex(s, *stroke);
    sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"%s\"/>\n", x, y, w, h,
              f, s);
}

static void svg_text(painter *pp, double x, double y, const char *s, int anchor, trm_rgb col, int big) {
    trm_sbuf *b = &((svg_painter *)pp)->b;
    char c[8];
    hex(c, col);
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\"%s%s>", x, y, c,
              anchor == ANCHOR_MIDDLE ? " text-anchor=\"middle\"" : anchor == ANCHOR_END ? " text-anchor=\"end\"" : "",
              big ? " font-size=\"15\" font-weight=\"bold\"" : "");
    sb_escape(b, s);
    sb_puts(b, "</text>\n");
}

static void svg_disc(painter *pp, double x, double y, double r, trm_rgb col) {
    char c[8];
    hex(c, col);
    sb_printf(&((svg_painter *)pp)->b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>\n", x, y, r, c);
}

typedef struct {
    painter p;
    trm_canvas c;
} raster_painter;

static void ras_polyline(painter *pp, const double *xy, int n, trm_rgb col, double width, int dashed, const char *attrs) {
    (void)attrs;
    trm_canvas_polyline(&((raster_painter *)pp)->c, xy, n, width, col, dashed ? 6 : 0, 4);
}

static void ras_rect(painter *pp, double x, double y, double w, double h, const trm_rgb *fill, const trm_rgb *stroke) {
    trm_canvas *c = &((raster_painter *)pp)->c;
    if (fill) trm_canvas_fill_rect(c, x, y, w, h, *fill);
    if (stroke) { /* a crisp one-pixel frame on the pixel grid */
        double x0 = floor(x) + 0.5, y0 = floor(y) + 0.5, x1 = floor(x + w) + 0.5, y1 = floor(y + h) + 0.5;
        double xy[10] = {x0, y0, x1, y0, x1, y1, x0, y1, x0, y0};
        trm_canvas_polyline(c, xy, 5, 1.0, *stroke, 0, 0);
    }
}

static void ras_text(painter *pp, double x, double y, const char *s, int anchor, trm_rgb col, int big) {
    trm_canvas *c = &((raster_painter *)pp)->c;
    int w = trm_canvas_text_width(s), x0 = (int)lround(x - (anchor == ANCHOR_MIDDLE ? w / 2.0 : anchor == ANCHOR_END ? w : 0));
    trm_canvas_text(c, x0, (int)lround(y), s, col);
    if (big) trm_canvas_text(c, x0 + 1, (int)lround(y), s, col); /* bold by doubling */
}

static void ras_disc(painter *pp, double x, double y, double r, trm_rgb col) {
    trm_canvas_disc(&((raster_painter *)pp)->c, x, y, r, col);
}

/* ---------------------------------------------------------------------------------------
 * drawing
 * ------------------------------------------------------------------------------------- */

/* Long series are thinned to the first, lowest, highest and last point of each pixel column,
 * which keeps the drawn envelope exactly while bounding the output's size. */
static int thin(double *xy, int n, double width) {
    if (n <= 4 * (int)width) return n;
    int out = 0;
    for (int i = 0; i < n;) {
        int j = i, col = (int)floor(xy[2 * i]), lo = i, hi = i;
        while (j < n && (int)floor(xy[2 * j]) == col) {
            if (xy[2 * j + 1] < xy[2 * lo + 1]) lo = j;
            if (xy[2 * j + 1] > xy[2 * hi + 1]) hi = j;
            j++;
        }
        int keep[4] = {i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1}, last = -1;
        for (int k = 0; k < 4; k++) {
            if (keep[k] == last) continue;
            xy[2 * out] = xy[2 * keep[k]], xy[2 * out + 1] = xy[2 * keep[k] + 1];
            out++, last = keep[k];
        }
        i = j;
    }
    return out;
}

static void draw_axes(painter *pp, const figure *f, const panel *p) {
    pp->rect(pp, p->x, p->y, p->w, p->h, &white, NULL);
    double t[40];
    char lab[32];
    int n = trm_plot_ticks(p->ylo, p->yhi, p->log, t, 40);
    for (int i = 0; i < n; i++) {
        double y = px_y(p, t[i]), xy[4] = {p->x, y, p->x + p->w, y};
        pp->polyline(pp, xy, 2, gridc, 1, 0, NULL);
        trm_plot_tick_label(t[i], 0, lab, sizeof lab);
        pp->text(pp, p->x - 6, y + 4, lab, ANCHOR_END, grey, 0);
    }
    n = trm_plot_ticks(f->xlo, f->xhi, 0, t, 40);
    for (int i = 0; i < n; i++) {
        double x = px_x(f, p, t[i]), xy[4] = {x, p->y, x, p->y + p->h};
        pp->polyline(pp, xy, 2, gridc, 1, 0, NULL);
        trm_plot_tick_label(t[i], 1, lab, sizeof lab);
        pp->text(pp, x, p->y + p->h + 15, lab, ANCHOR_MIDDLE, grey, 0);
    }
    pp->rect(pp, p->x, p->y, p->w, p->h, NULL, &framec);
    pp->text(pp, p->x + p->w, p->y + p->h + 30, "step", ANCHOR_END, grey, 0);
    char title[160];
    snprintf(title, sizeof title, "%s%s", p->def->title, p->log ? " (log scale)" : "");
    pp->text(pp, p->cx + 8, p->cy + 17, title, ANCHOR_START, ink, 1);
}

/* End-of-line labels placed so far in a panel, to keep them from overprinting each other. */
typedef struct {
    double x[64], y[64];
    int n;
} label_spots;

static double free_spot(label_spots *ls, double x, double y) {
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < ls->n; i++)
            if (fabs(ls->x[i] - x) < 40 && fabs(ls->y[i] - y) < 12) y = ls->y[i] - 12, moved = 1;
    }
    if (ls->n < 64) ls->x[ls->n] = x, ls->y[ls->n++] = y;
    return y;
}

static void draw_series(painter *pp, const figure *f, const panel *p, const plot_series *ps, label_spots *ls) {
    const trm_series *s = ps->s;
    double *xy = xmalloc((size_t)s->n * 2 * sizeof *xy);
    int n = 0;
    for (int64_t k = 0; k < s->n; k++) {
        if (p->log && s->value[k] <= 0) continue;
        xy[2 * n] = px_x(f, p, s->step[k]), xy[2 * n + 1] = px_y(p, s->value[k]);
        n++;
    }
    int npoints = n;
    trm_rgb col = palette[ps->run % NPALETTE];
    trm_sbuf attrs = {0};
    sb_printf(&attrs, " class=\"%s\" data-run=\"", ps->eval ? "eval" : "train");
    sb_escape(&attrs, f->labels[ps->run]);
    sb_puts(&attrs, "\" data-key=\"");
    sb_escape(&attrs, s->key);
    sb_printf(&attrs, "\" data-n=\"%d\"", npoints);
    int markers = ps->eval && npoints <= 120;
    n = thin(xy, n, p->w);
    if (n > 0) pp->polyline(pp, xy, n, col, ps->eval ? 2.0 : 1.5, ps->eval, attrs.p);
    if (markers)
        for (int i = 0; i < n; i++) pp->disc(pp, xy[2 * i], xy[2 * i + 1], 3, col);
    if (n > 0 && ps->name[0]) { /* which set, or which K, at the line's end */
        double x = xy[2 * (n - 1)] - 4, y = free_spot(ls, x, xy[2 * (n - 1) + 1] - 6);
        pp->text(pp, x, y, ps->name, ANCHOR_END, col, 0);
    }
    sb_free(&attrs);
    free(xy);
}

static void draw_legend(painter *pp, const figure *f) {
    double x = MARGIN, y = f->legend_y;
    for (int r = 0; r <= f->nruns; r++) {
        char t[256];
        if (r < f->nruns) legend_item_text(f, r, t, sizeof t);
        else snprintf(t, sizeof t, "train    - - eval");
        double w = 28 + text_w(t) + 18;
        if (x + w > f->W - MARGIN && x > MARGIN) x = MARGIN, y += LEGEND_ROW;
        double ly = y + LEGEND_ROW / 2.0;
        if (r < f->nruns) {
            double xy[4] = {x, ly - 4, x + 22, ly - 4};
            pp->polyline(pp, xy, 2, palette[r % NPALETTE], 3, 0, NULL);
            pp->text(pp, x + 28, ly, t, ANCHOR_START, ink, 0);
        } else { /* the line styles: solid train, dashed eval with markers */
            double a[4] = {x, ly - 4, x + 22, ly - 4}, b[4] = {x + 84, ly - 4, x + 106, ly - 4};
            pp->polyline(pp, a, 2, grey, 1.5, 0, NULL);
            pp->text(pp, x + 28, ly, "train", ANCHOR_START, grey, 0);
            pp->polyline(pp, b, 2, grey, 2, 1, NULL);
            pp->disc(pp, x + 95, ly - 4, 3, grey);
            pp->text(pp, x + 112, ly, "eval", ANCHOR_START, grey, 0);
        }
        x += w;
    }
}

static void draw(painter *pp, const figure *f) {
    pp->rect(pp, 0, 0, f->W, f->H, &white, NULL);
    pp->text(pp, MARGIN, 26, f->title, ANCHOR_START, ink, 1);
    draw_legend(pp, f);
    for (int i = 0; i < f->npanels; i++) {
        const panel *p = &f->panels[i];
        draw_axes(pp, f, p);
        int any = 0;
        label_spots ls = {.n = 0};
        for (int pass = 0; pass < 2; pass++) /* train under eval */
            for (int k = 0; k < p->nser; k++)
                if (p->ser[k].eval == pass) draw_series(pp, f, p, &p->ser[k], &ls), any = 1;
        if (!any) pp->text(pp, p->x + p->w / 2, p->y + p->h / 2, "no data yet", ANCHOR_MIDDLE, grey, 0);
    }
}

char *trm_plot_svg(const trm_run_log *runs, int nruns, const trm_plot_opts *o) {
    figure f;
    layout(&f, runs, nruns, o);
    svg_painter sp = {{svg_polyline, svg_rect, svg_text, svg_disc}, {0}};
    sb_printf(&sp.b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"trm-curves\" width=\"%d\" height=\"%d\" "
              "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n<title>",
              f.W, f.H, f.W, f.H);
    sb_escape(&sp.b, f.title);
    sb_puts(&sp.b, "</title>\n");
    draw(&sp.p, &f);
    sb_puts(&sp.b, "</svg>\n");
    figure_free(&f);
    return sb_take(&sp.b);
}

int trm_plot_png(const trm_run_log *runs, int nruns, const trm_plot_opts *o, unsigned char **png, size_t *len,
                 trm_err *e) {
    figure f;
    layout(&f, runs, nruns, o);
    raster_painter rp = {{ras_polyline, ras_rect, ras_text, ras_disc}, {0}};
    trm_canvas_init(&rp.c, f.W, f.H, white);
    draw(&rp.p, &f);
    int rc = trm_png_encode(rp.c.px, rp.c.w, rp.c.h, png, len, e);
    trm_canvas_free(&rp.c);
    figure_free(&f);
    return rc;
}

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), m = strlen(ext);
    if (n < m) return 0;
    for (size_t i = 0; i < m; i++)
        if ((path[n - m + i] | 0x20) != ext[i]) return 0;
    return 1;
}

int trm_plot_write(const char *path, const trm_run_log *runs, int nruns, const trm_plot_opts *o, trm_err *e) {
    if (trm_mkdirs_for(path, e)) return -1;
    if (has_ext(path, ".png")) {
        unsigned char *png;
        size_t len;
        if (trm_plot_png(runs, nruns, o, &png, &len, e)) return -1;
        int rc = trm_write_file_atomic(path, png, len, e);
        free(png);
        return rc;
    }
    if (!has_ext(path, ".svg")) return trm_errf(e, "%s: the output must end in .svg or .png", path);
    char *svg = trm_plot_svg(runs, nruns, o);
    trm_sbuf b = {0};
    sb_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb_puts(&b, svg);
    free(svg);
    int rc = trm_write_file_atomic(path, b.p, b.len, e);
    sb_free(&b);
    return rc;
}
