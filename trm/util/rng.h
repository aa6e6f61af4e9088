/* rng.h — counter-based random numbers (Philox4x32-10): the same (seed, stream, counter)
 * gives the same numbers on every machine and device, so runs resume and shard exactly. */
#ifndef TRM_RNG_H
#define TRM_RNG_H
#include <stdint.h>

typedef struct {
    uint64_t key;     /* seed */
    uint64_t stream;  /* independent sub-stream (e.g. epoch, batch index) */
    uint64_t counter; /* number of 128-bit blocks consumed */
    uint32_t buf[4];
    int buf_pos;      /* 4 = empty */
} trm_rng;

void trm_rng_init(trm_rng *r, uint64_t seed, uint64_t stream);
/* Raw Philox4x32-10 block: out = philox(key, counter(hi,lo)). */
void trm_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]);
uint32_t trm_rng_u32(trm_rng *r);
uint64_t trm_rng_u64(trm_rng *r);
double trm_rng_uniform(trm_rng *r);               /* [0,1), 53 bits */
uint64_t trm_rng_below(trm_rng *r, uint64_t n);   /* uniform in [0,n), unbiased */
double trm_rng_normal(trm_rng *r);
void trm_rng_permutation(trm_rng *r, int64_t *out, int64_t n); /* Fisher–Yates of 0..n-1 */

#endif
