/* font.h — the one bitmap font of the raster plots (6x13 cells, printable ASCII). */
#ifndef TRM_FONT_INCLUDED
#define TRM_FONT_INCLUDED

#define TRM_FONT_W 6
#define TRM_FONT_H 13
#define TRM_FONT_BASELINE 11 /* rows above the baseline, from the top of the cell */

/* Glyph rows for characters 32..126; bit 7 of each row is its leftmost pixel. */
extern const unsigned char trm_font_6x13[95][13];

#endif
