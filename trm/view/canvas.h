/* canvas.h — an RGB raster to draw plots on before they are written as PNG: anti-aliased
 * lines of any width (solid or dashed), discs, rectangles and bitmap text. Coordinates are in
 * pixels, (0,0) the top-left corner; anything outside the canvas is cut off. */
#ifndef TRM_CANVAS_H
#define TRM_CANVAS_H
#include <stdint.h>

typedef struct {
    uint8_t r, g, b;
} trm_rgb;

typedef struct {
    int w, h;
    uint8_t *px; /* w*h*3 bytes, rows top to bottom */
} trm_canvas;

void trm_canvas_init(trm_canvas *c, int w, int h, trm_rgb background);
void trm_canvas_free(trm_canvas *c);
/* The pixels whose centres lie inside [x, x+w) × [y, y+h). */
void trm_canvas_fill_rect(trm_canvas *c, double x, double y, double w, double h, trm_rgb col);
/* A polyline of n points (xy: x0,y0,x1,y1,...), round joins; dash > 0 draws dashes of that
 * length with gaps of `gap`. Overlapping parts are covered once, not darkened. */
void trm_canvas_polyline(trm_canvas *c, const double *xy, int n, double width, trm_rgb col, double dash, double gap);
void trm_canvas_disc(trm_canvas *c, double cx, double cy, double r, trm_rgb col);
/* Text in the 6x13 font from x with its baseline at y; characters outside printable ASCII
 * are drawn as '?'. Returns the advance in pixels. */
int trm_canvas_text(trm_canvas *c, int x, int y, const char *s, trm_rgb col);
int trm_canvas_text_width(const char *s);

#endif
