/* fuzz_targets.h — trm's file readers as fuzz targets, each with the valid inputs it starts
 * from (made by trm's own writers, so the suite stands alone) and the tokens its
 * structure-aware mutations insert. Shared by tests/test_fuzz.c (the deterministic mutation
 * loop every CI build runs) and tests/fuzz/libfuzzer.c (clang's libFuzzer, for long local
 * runs). */
#ifndef TRM_FUZZ_TARGETS_H
#define TRM_FUZZ_TARGETS_H
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

#define FZ_MAX_INPUT ((size_t)1 << 20) /* mutations never make an input longer */

typedef struct {
    uint8_t *p;
    size_t n;
} fz_input;

typedef struct {
    fz_input *v;
    int n, cap;
} fz_corpus;

/* splitmix64: the mutation loop is a function of (seed, input index) alone. */
typedef struct {
    uint64_t s;
} fz_rng;

static inline uint64_t fz_next(fz_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline size_t fz_below(fz_rng *r, size_t n) { return n ? (size_t)(fz_next(r) % n) : 0; }

/* A token for the structure-aware mutations: bytes with their length (they may hold NULs). */
typedef struct {
    const char *s;
    size_t n;
} fz_token;
#define FZ_T(lit) {lit, sizeof(lit) - 1}

typedef struct fz_target fz_target;

/* Where one target works: its scratch directory and the file an input is written to. */
typedef struct {
    const fz_target *t;
    char *dir;
    char *file;
} fz_ctx;

struct fz_target {
    const char *name;
    const char *reader; /* what it reads, for the table */
    /* side files the reader needs besides the input (a dataset's arrays), or NULL */
    int (*setup)(fz_ctx *c, trm_err *e);
    /* valid inputs, made by trm's writers (and the repository's fixtures) */
    int (*seeds)(fz_ctx *c, fz_corpus *out, trm_err *e);
    /* reads one input the way trm reads such a file: 0 accepted, -1 refused with e set */
    int (*run)(fz_ctx *c, const uint8_t *d, size_t n, trm_err *e);
    const fz_token *dict; /* tokens of the format, ended by {NULL, 0} */
    /* the part that structure-aware mutations edit (a header) and how to make the input
     * consistent after it changed length; NULL: the whole input */
    int (*region)(const uint8_t *d, size_t n, size_t *off, size_t *len);
    void (*fix)(fz_input *in, size_t off, size_t len);
    /* a mutation of the format's own (zip fields, interpolation chains), or NULL */
    void (*special)(fz_rng *r, fz_input *in);
};

const fz_target *fz_targets(int *n);
const fz_target *fz_find(const char *name);
/* Makes the target's scratch directory under root and runs its setup. */
int fz_ctx_init(fz_ctx *c, const fz_target *t, const char *root, trm_err *e);
void fz_ctx_free(fz_ctx *c);

void fz_corpus_add(fz_corpus *c, const void *p, size_t n);
void fz_corpus_free(fz_corpus *c);
void fz_input_set(fz_input *in, const void *p, size_t n);

/* Whether a reader's answer is one: 0 or -1, and -1 only with a one-line message. Returns
 * NULL when it is, else why not. */
const char *fz_bad_answer(int rc, const trm_err *e);

#endif
