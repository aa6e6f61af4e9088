/* png.c — the PNG encoder of png.h. Each row takes the filter (None, Sub, Up, Paeth) with the
 * smallest sum of absolute byte values, the usual heuristic: plots are mostly flat colour,
 * which Sub and Up turn into runs of zeros that deflate well. */
#include "png.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8),
    p[3] = (unsigned char)v;
}

/* Appends one chunk (length, type, data, CRC of type + data) at *o. */
static void chunk(unsigned char *buf, size_t *o, const char *type, const unsigned char *data, size_t n) {
    put32(buf + *o, (uint32_t)n);
    memcpy(buf + *o + 4, type, 4);
    if (n) memcpy(buf + *o + 8, data, n);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, buf + *o + 4, (uInt)(n + 4));
    put32(buf + *o + 8 + n, (uint32_t)crc);
    *o += n + 12;
}

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Filters one row of `stride` bytes with PNG filter f (0, 1, 2 or 4) into out; returns the heuristic's cost. */
static long filter_row(int f, const uint8_t *row, const uint8_t *prev, size_t stride, uint8_t *out) {
    long cost = 0;
    for (size_t i = 0; i < stride; i++) {
        int a = i >= 3 ? row[i - 3] : 0, b = prev ? prev[i] : 0, c = prev && i >= 3 ? prev[i - 3] : 0;
        int pred = f == 0 ? 0 : f == 1 ? a : f == 2 ? b : paeth(a, b, c);
        out[i] = (uint8_t)(row[i] - pred);
        cost += out[i] < 128 ? out[i] : 256 - out[i];
    }
    return cost;
}

int trm_png_encode(const uint8_t *rgb, int w, int h, unsigned char **out, size_t *len, trm_err *e) {
    if (w <= 0 || h <= 0 || w > 16384 || h > 16384) return trm_errf(e, "PNG size %dx%d is out of range", w, h);
    size_t stride = (size_t)w * 3, raw_len = (stride + 1) * (size_t)h;
    uint8_t *raw = xmalloc(raw_len), *trial = xmalloc(stride);
    static const int filters[] = {0, 1, 2, 4}; /* PNG filter numbers; 4 = Paeth */
    for (int y = 0; y < h; y++) {
        const uint8_t *row = rgb + (size_t)y * stride, *prev = y ? row - stride : NULL;
        uint8_t *dst = raw + (size_t)y * (stride + 1);
        long best = -1;
        for (int k = 0; k < 4; k++) {
            int f = filters[k];
            long c = filter_row(f, row, prev, stride, trial);
            if (best < 0 || c < best) {
                best = c;
                dst[0] = (uint8_t)f;
                memcpy(dst + 1, trial, stride);
            }
        }
    }
    free(trial);
    uLongf zlen = compressBound((uLong)raw_len);
    unsigned char *z = xmalloc(zlen);
    int zrc = compress2(z, &zlen, raw, (uLong)raw_len, 9);
    free(raw);
    if (zrc != Z_OK) {
        free(z);
        return trm_errf(e, "PNG: zlib compression failed (%d)", zrc);
    }
    unsigned char *buf = xmalloc(8 + 25 + 12 + zlen + 12);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    memcpy(buf, sig, 8);
    size_t o = 8;
    unsigned char ihdr[13];
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bits per sample */
    ihdr[9] = 2;  /* truecolour RGB */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    chunk(buf, &o, "IHDR", ihdr, sizeof ihdr);
    chunk(buf, &o, "IDAT", z, zlen);
    chunk(buf, &o, "IEND", NULL, 0);
    free(z);
    *out = buf;
    *len = o;
    return 0;
}
