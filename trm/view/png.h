/* png.h — PNG writing with zlib (no image library): 8-bit RGB, one IDAT, adaptive row filters. */
#ifndef TRM_PNG_H
#define TRM_PNG_H
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* Encodes w×h pixels (rgb: 3 bytes each, rows top to bottom) into a new buffer *out. */
int trm_png_encode(const uint8_t *rgb, int w, int h, unsigned char **out, size_t *len, trm_err *e);

#endif
