/* canvas.c — the raster of canvas.h. Lines are drawn by coverage: each pixel gets the
 * fraction of its area inside the stroke (approximated by its centre's distance to the
 * segment), collected per polyline as a maximum and blended once, so joins and dashes do not
 * leave darker dots. */
#include "canvas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "font.h"
#include "util/util.h"

void trm_canvas_init(trm_canvas *c, int w, int h, trm_rgb bg) {
    c->w = w, c->h = h;
    c->px = xmalloc((size_t)w * (size_t)h * 3);
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) c->px[3 * i] = bg.r, c->px[3 * i + 1] = bg.g, c->px[3 * i + 2] = bg.b;
}

void trm_canvas_free(trm_canvas *c) {
    free(c->px);
    memset(c, 0, sizeof *c);
}

static void blend(trm_canvas *c, int x, int y, trm_rgb col, double a) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h || a <= 0) return;
    if (a > 1) a = 1;
    uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    p[0] = (uint8_t)lround(p[0] + (col.r - p[0]) * a);
    p[1] = (uint8_t)lround(p[1] + (col.g - p[1]) * a);
    p[2] = (uint8_t)lround(p[2] + (col.b - p[2]) * a);
}

void trm_canvas_fill_rect(trm_canvas *c, double x, double y, double w, double h, trm_rgb col) {
    int x0 = (int)ceil(x - 0.5), x1 = (int)ceil(x + w - 0.5), y0 = (int)ceil(y - 0.5), y1 = (int)ceil(y + h - 0.5);
    for (int j = y0 < 0 ? 0 : y0; j < y1 && j < c->h; j++)
        for (int i = x0 < 0 ? 0 : x0; i < x1 && i < c->w; i++) blend(c, i, j, col, 1.0);
}

/* Coverage mask over a box of the canvas, for one polyline. */
typedef struct {
    int x0, y0, w, h;
    float *a;
} mask;

static double seg_dist(double px, double py, double ax, double ay, double bx, double by) {
    double dx = bx - ax, dy = by - ay, l2 = dx * dx + dy * dy;
    double t = l2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / l2 : 0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double qx = ax + t * dx - px, qy = ay + t * dy - py;
    return sqrt(qx * qx + qy * qy);
}

static void mask_segment(mask *m, double ax, double ay, double bx, double by, double width) {
    double r = width / 2 + 1;
    int i0 = (int)floor(fmin(ax, bx) - r), i1 = (int)ceil(fmax(ax, bx) + r);
    int j0 = (int)floor(fmin(ay, by) - r), j1 = (int)ceil(fmax(ay, by) + r);
    if (i0 < m->x0) i0 = m->x0;
    if (j0 < m->y0) j0 = m->y0;
    if (i1 > m->x0 + m->w - 1) i1 = m->x0 + m->w - 1;
    if (j1 > m->y0 + m->h - 1) j1 = m->y0 + m->h - 1;
    for (int j = j0; j <= j1; j++)
        for (int i = i0; i <= i1; i++) {
            double cov = width / 2 + 0.5 - seg_dist(i + 0.5, j + 0.5, ax, ay, bx, by);
            if (cov <= 0) continue;
            float *a = &m->a[(size_t)(j - m->y0) * (size_t)m->w + (size_t)(i - m->x0)];
            if (cov > *a) *a = cov > 1 ? 1.0f : (float)cov;
        }
}

void trm_canvas_polyline(trm_canvas *c, const double *xy, int n, double width, trm_rgb col, double dash, double gap) {
    if (n < 1) return;
    double minx = xy[0], maxx = xy[0], miny = xy[1], maxy = xy[1];
    for (int k = 1; k < n; k++) {
        minx = fmin(minx, xy[2 * k]), maxx = fmax(maxx, xy[2 * k]);
        miny = fmin(miny, xy[2 * k + 1]), maxy = fmax(maxy, xy[2 * k + 1]);
    }
    double r = width / 2 + 2;
    mask m;
    m.x0 = (int)floor(fmax(minx - r, 0)), m.y0 = (int)floor(fmax(miny - r, 0));
    int x1 = (int)ceil(fmin(maxx + r, c->w - 1)), y1 = (int)ceil(fmin(maxy + r, c->h - 1));
    if (x1 < m.x0 || y1 < m.y0) return;
    m.w = x1 - m.x0 + 1, m.h = y1 - m.y0 + 1;
    m.a = xcalloc((size_t)m.w * (size_t)m.h, sizeof *m.a);
    if (n == 1) mask_segment(&m, xy[0], xy[1], xy[0], xy[1], width);
    double along = 0; /* position inside the dash pattern */
    for (int k = 0; k + 1 < n; k++) {
        double ax = xy[2 * k], ay = xy[2 * k + 1], bx = xy[2 * k + 2], by = xy[2 * k + 3];
        double len = hypot(bx - ax, by - ay);
        if (dash <= 0 || len == 0) {
            mask_segment(&m, ax, ay, bx, by, width);
            continue;
        }
        double t = 0, period = dash + gap;
        while (t < len) {
            double ph = fmod(along, period), step;
            if (ph < dash) {
                step = fmin(dash - ph, len - t);
                double u0 = t / len, u1 = (t + step) / len;
                mask_segment(&m, ax + (bx - ax) * u0, ay + (by - ay) * u0, ax + (bx - ax) * u1, ay + (by - ay) * u1,
                             width);
            } else {
                step = fmin(period - ph, len - t);
            }
            t += step, along += step;
        }
    }
    for (int j = 0; j < m.h; j++)
        for (int i = 0; i < m.w; i++) blend(c, m.x0 + i, m.y0 + j, col, m.a[(size_t)j * (size_t)m.w + (size_t)i]);
    free(m.a);
}

void trm_canvas_disc(trm_canvas *c, double cx, double cy, double r, trm_rgb col) {
    for (int j = (int)floor(cy - r - 1); j <= (int)ceil(cy + r + 1); j++)
        for (int i = (int)floor(cx - r - 1); i <= (int)ceil(cx + r + 1); i++)
            blend(c, i, j, col, r + 0.5 - hypot(i + 0.5 - cx, j + 0.5 - cy));
}

/* One glyph per character: UTF-8 continuation bytes take no cell. */
static int is_continuation(unsigned char ch) { return (ch & 0xC0) == 0x80; }

int trm_canvas_text_width(const char *s) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += !is_continuation(*p);
    return n * TRM_FONT_W;
}

int trm_canvas_text(trm_canvas *c, int x, int y, const char *s, trm_rgb col) {
    int adv = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (is_continuation(*p)) continue;
        int ch = *p >= 32 && *p <= 126 ? *p : '?';
        const unsigned char *g = trm_font_6x13[ch - 32];
        for (int gy = 0; gy < TRM_FONT_H; gy++)
            for (int gx = 0; gx < TRM_FONT_W; gx++) {
                if (!(g[gy] & (0x80 >> gx))) continue;
                blend(c, x + adv + gx, y + gy - TRM_FONT_BASELINE, col, 1.0);
            }
        adv += TRM_FONT_W;
    }
    return adv;
}
