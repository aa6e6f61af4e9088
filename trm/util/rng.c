/* rng.c — Philox4x32-10 (Random123) and the draws built on it: uniform, unbiased bounded
 * integers, normals and Fisher–Yates permutations. Being counter-based, a generator is
 * fully described by (seed, stream, counter), which is what makes sampling resumable. */
#include "rng.h"

#include "philox.h"

#include <math.h>

void trm_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]) {
    trm_philox_block(key, ctr_hi, ctr_lo, out);
}

void trm_rng_init(trm_rng *r, uint64_t seed, uint64_t stream) {
    r->key = seed;
    r->stream = stream;
    r->counter = 0;
    r->buf_pos = 4;
    for (int i = 0; i < 4; i++) r->buf[i] = 0;
}

uint32_t trm_rng_u32(trm_rng *r) {
    if (r->buf_pos < 0 || r->buf_pos >= 4) {
        trm_philox4x32(r->key, r->stream, r->counter++, r->buf);
        r->buf_pos = 0;
    }
    return r->buf[r->buf_pos++];
}

/* First word is the low half, so the 64-bit value is the block read little-endian. */
uint64_t trm_rng_u64(trm_rng *r) {
    uint64_t lo = trm_rng_u32(r);
    uint64_t hi = trm_rng_u32(r);
    return lo | (hi << 32);
}

double trm_rng_uniform(trm_rng *r) { return (double)(trm_rng_u64(r) >> 11) * 0x1.0p-53; }

/* Rejects the lowest (2^k mod n) raw values so that every residue is equally likely;
 * bounds that fit 32 bits draw 32-bit words to use half the stream. n == 0 gives 0. */
uint64_t trm_rng_below(trm_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    if (n <= 0xFFFFFFFFull) {
        uint32_t n32 = (uint32_t)n;
        uint32_t threshold = (uint32_t)(-n32) % n32;
        for (;;) {
            uint32_t x = trm_rng_u32(r);
            if (x >= threshold) return x % n32;
        }
    }
    uint64_t threshold = (-n) % n;
    for (;;) {
        uint64_t x = trm_rng_u64(r);
        if (x >= threshold) return x % n;
    }
}

/* Box–Muller, first output only: no cached second value keeps the state plain integers. */
double trm_rng_normal(trm_rng *r) {
    double u1 = 1.0 - trm_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = trm_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

void trm_rng_permutation(trm_rng *r, int64_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)trm_rng_below(r, (uint64_t)i + 1);
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}
