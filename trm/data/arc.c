/* arc.c — see arc.h. SHA-256 is implemented here (FIPS 180-4) so that grid hashes are the
 * reference's and the binary needs no crypto library. */
#include "arc.h"

#include <stdlib.h>
#include <string.h>

#include "dihedral.h"

/* ---- grids from JSON ------------------------------------------------------------------- */

int arc_grid_from_cfg(const cfg_node *n, arc_grid *g, const char *what, trm_err *e) {
    if (!n || n->type != CFG_LIST) return trm_errf(e, "%s: expected a list of rows", what);
    if (n->n < 1 || n->n > ARC_MAX_GRID)
        return trm_errf(e, "%s: expected 1 to %d rows, got %d", what, ARC_MAX_GRID, n->n);
    g->rows = n->n;
    g->cols = 0;
    for (int r = 0; r < n->n; r++) {
        const cfg_node *row = n->items[r];
        if (row->type != CFG_LIST) return trm_errf(e, "%s: row %d is not a list", what, r);
        if (r == 0) {
            if (row->n < 1 || row->n > ARC_MAX_GRID)
                return trm_errf(e, "%s: expected 1 to %d columns, got %d", what, ARC_MAX_GRID, row->n);
            g->cols = row->n;
        } else if (row->n != g->cols) {
            return trm_errf(e, "%s: row %d has %d cells, row 0 has %d (not rectangular)", what, r, row->n,
                            g->cols);
        }
        for (int c = 0; c < row->n; c++) {
            const cfg_node *v = row->items[c];
            if (v->type != CFG_INT || v->i < 0 || v->i > 9)
                return trm_errf(e, "%s: cell (%d, %d) is not an integer 0..9", what, r, c);
            g->c[r * g->cols + c] = (uint8_t)v->i;
        }
    }
    return 0;
}

void arc_grid_to_json(json_buf *b, const arc_grid *g) {
    json_arr_begin(b);
    for (int r = 0; r < g->rows; r++) {
        json_arr_begin(b);
        for (int c = 0; c < g->cols; c++) json_int(b, g->c[r * g->cols + c]);
        json_arr_end(b);
    }
    json_arr_end(b);
}

/* ---- augmentations ------------------------------------------------------------------------- */

void arc_aug_apply(const arc_aug *a, const arc_grid *in, arc_grid *out) {
    uint8_t mapped[ARC_SEQ_LEN];
    int n = in->rows * in->cols;
    for (int i = 0; i < n; i++) mapped[i] = a->perm[in->c[i] % 10];
    trm_dihedral(mapped, in->rows, in->cols, a->tid, out->c, &out->rows, &out->cols);
}

void arc_aug_invert(const arc_aug *a, const arc_grid *in, arc_grid *out) {
    uint8_t inv[10] = {0};
    for (int i = 0; i < 10; i++) inv[a->perm[i] % 10] = (uint8_t)i;
    trm_dihedral(in->c, in->rows, in->cols, trm_dihedral_inverse(a->tid), out->c, &out->rows, &out->cols);
    int n = out->rows * out->cols;
    for (int i = 0; i < n; i++) out->c[i] = inv[out->c[i] % 10];
}

char *arc_aug_name(const char *base, const arc_aug *a) {
    char digits[11];
    for (int i = 0; i < 10; i++) digits[i] = (char)('0' + a->perm[i]);
    digits[10] = 0;
    return xasprintf("%s" ARC_SEP "t%d" ARC_SEP "%s", base, a->tid, digits);
}

int arc_aug_parse(const char *name, char **orig, arc_aug *a, int *has_aug, trm_err *e) {
    const char *first = strstr(name, ARC_SEP);
    *orig = NULL;
    *has_aug = 0;
    a->tid = 0;
    for (int i = 0; i < 10; i++) a->perm[i] = (uint8_t)i;
    if (!first) {
        *orig = xstrdup(name);
        return 0;
    }
    /* The reference takes the last two "|||"-separated fields. */
    const char *last = NULL, *prev = NULL;
    for (const char *p = first; p; p = strstr(p + 1, ARC_SEP)) prev = last, last = p;
    if (!prev) return trm_errf(e, "identifier '%s': expected NAME|||tK|||PERM", name);
    const char *t = prev + 3, *perm = last + 3;
    if (last - t != 2 || t[0] != 't' || t[1] < '0' || t[1] > '7')
        return trm_errf(e, "identifier '%s': expected a transform t0..t7", name);
    int seen[10] = {0};
    if (strlen(perm) != 10) return trm_errf(e, "identifier '%s': expected 10 colour digits", name);
    for (int i = 0; i < 10; i++) {
        int d = perm[i] - '0';
        if (d < 0 || d > 9 || seen[d]++)
            return trm_errf(e, "identifier '%s': colour mapping is not a permutation of 0..9", name);
        a->perm[i] = (uint8_t)d;
    }
    a->tid = t[1] - '0';
    *orig = xstrndup(name, (size_t)(first - name));
    *has_aug = 1;
    return 0;
}

/* ---- tokens ----------------------------------------------------------------------------------- */

void arc_tokenize(const arc_grid *g, int pad_r, int pad_c, uint8_t *out) {
    memset(out, 0, ARC_SEQ_LEN);
    for (int r = 0; r < g->rows; r++)
        for (int c = 0; c < g->cols; c++)
            out[(pad_r + r) * ARC_MAX_GRID + pad_c + c] = (uint8_t)(g->c[r * g->cols + c] + 2);
    int eos_r = pad_r + g->rows, eos_c = pad_c + g->cols;
    if (eos_r < ARC_MAX_GRID)
        for (int c = pad_c; c < eos_c; c++) out[eos_r * ARC_MAX_GRID + c] = 1;
    if (eos_c < ARC_MAX_GRID)
        for (int r = pad_r; r < eos_r; r++) out[r * ARC_MAX_GRID + eos_c] = 1;
}

void arc_crop(const int32_t *t, arc_grid *out) {
    int max_area = 0, best_r = 0, best_c = 0, num_c = ARC_MAX_GRID;
    for (int num_r = 1; num_r <= ARC_MAX_GRID; num_r++) {
        for (int c = 1; c <= num_c; c++) {
            int32_t x = t[(num_r - 1) * ARC_MAX_GRID + c - 1];
            if (x < 2 || x > 11) {
                num_c = c - 1;
                break;
            }
        }
        if (num_r * num_c > max_area) max_area = num_r * num_c, best_r = num_r, best_c = num_c;
    }
    out->rows = best_r;
    out->cols = best_c;
    for (int r = 0; r < best_r; r++)
        for (int c = 0; c < best_c; c++) out->c[r * best_c + c] = (uint8_t)(t[r * ARC_MAX_GRID + c] - 2);
}

/* ---- SHA-256 -------------------------------------------------------------------------------- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void arc_sha256(const void *data, size_t n, uint8_t out[32]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t full = n / 64 * 64;
    for (size_t i = 0; i < full; i += 64) sha_block(h, p + i);
    uint8_t tail[128] = {0};
    size_t rem = n - full;
    memcpy(tail, p + full, rem);
    tail[rem] = 0x80;
    size_t tl = rem + 9 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha_block(h, tail);
    if (tl == 128) sha_block(h, tail + 64);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

void arc_grid_hash(const arc_grid *g, uint8_t out[32]) {
    uint8_t buf[2 + ARC_SEQ_LEN];
    buf[0] = (uint8_t)g->rows;
    buf[1] = (uint8_t)g->cols;
    memcpy(buf + 2, g->c, (size_t)(g->rows * g->cols));
    arc_sha256(buf, 2 + (size_t)(g->rows * g->cols), out);
}

void *arc_reserve(void *p, int64_t *cap, int64_t n, size_t elem) {
    if (n < *cap) return p;
    *cap = *cap ? *cap * 2 : 256;
    return xrealloc(p, (size_t)*cap * elem);
}

/* ---- digest table ---------------------------------------------------------------------------- */

void arc_htab_init(arc_htab *t) { memset(t, 0, sizeof *t); }

void arc_htab_free(arc_htab *t) {
    free(t->keys);
    free(t->vals);
    free(t->used);
    memset(t, 0, sizeof *t);
}

void arc_htab_clear(arc_htab *t) {
    if (t->used) memset(t->used, 0, t->cap);
    t->n = 0;
}

static size_t slot_of(const arc_htab *t, const uint8_t key[32]) {
    uint64_t h;
    memcpy(&h, key, sizeof h);
    size_t i = (size_t)h & (t->cap - 1);
    while (t->used[i] && memcmp(t->keys[i], key, 32)) i = (i + 1) & (t->cap - 1);
    return i;
}

int64_t *arc_htab_get(const arc_htab *t, const uint8_t key[32]) {
    if (!t->cap) return NULL;
    size_t i = slot_of(t, key);
    return t->used[i] ? &t->vals[i] : NULL;
}

static void grow(arc_htab *t) {
    arc_htab old = *t;
    t->cap = old.cap ? old.cap * 2 : 64;
    t->keys = xmalloc(t->cap * 32);
    t->vals = xmalloc(t->cap * sizeof *t->vals);
    t->used = xcalloc(t->cap, 1);
    t->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.used[i]) arc_htab_put(t, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
    free(old.used);
}

int arc_htab_put(arc_htab *t, const uint8_t key[32], int64_t val) {
    if ((t->n + 1) * 2 > t->cap) grow(t);
    size_t i = slot_of(t, key);
    if (t->used[i]) return 0;
    t->used[i] = 1;
    memcpy(t->keys[i], key, 32);
    t->vals[i] = val;
    t->n++;
    return 1;
}
