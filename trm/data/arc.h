/* arc.h — ARC grid helpers shared by the ARC dataset builder and the ARC evaluator: grids
 * from Kaggle JSON, the 30×30 token layout and its crop, the dihedral+colour augmentations
 * with their names and inverses, SHA-256 grid hashing, and a digest-keyed hash table. */
#ifndef TRM_ARC_H
#define TRM_ARC_H
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "util/util.h"

#define ARC_MAX_GRID 30
#define ARC_SEQ_LEN (ARC_MAX_GRID * ARC_MAX_GRID)
#define ARC_SEP "|||"
#define ARC_MAX_JSON_BYTES ((size_t)256 << 20) /* an ARC JSON file (ARC-AGI's are a few MB) */

typedef struct {
    int rows, cols;           /* 0..30 each */
    uint8_t c[ARC_SEQ_LEN];   /* row-major rows × cols colours 0..9 */
} arc_grid;

/* A dihedral transform and colour mapping (perm[0] == 0): grid → dihedral(perm[grid], tid). */
typedef struct {
    int tid;
    uint8_t perm[10];
} arc_aug;

/* A JSON list of rows of ints 0..9, rectangular, at most 30×30 (and at least 1×1).
 * what names the grid in errors (e.g. "FILE: puzzle X: train example 2 input"). */
int arc_grid_from_cfg(const cfg_node *n, arc_grid *g, const char *what, trm_err *e);
void arc_grid_to_json(json_buf *b, const arc_grid *g);

void arc_aug_apply(const arc_aug *a, const arc_grid *in, arc_grid *out);
/* The inverse of arc_aug_apply: inv_perm[inverse_dihedral(grid)]. */
void arc_aug_invert(const arc_aug *a, const arc_grid *in, arc_grid *out);
/* "base|||t<tid>|||<perm digits>" (free() it). */
char *arc_aug_name(const char *base, const arc_aug *a);
/* Splits an identifier into the original name (malloc'd, before the first "|||") and its
 * augmentation; a name without "|||" is its own original with *has_aug = 0. -1 when the
 * augmentation part is malformed (not t0..t7 and a permutation of 0..9). */
int arc_aug_parse(const char *name, char **orig, arc_aug *a, int *has_aug, trm_err *e);

/* Tokens (PAD 0, EOS 1, colour c → c+2) of g placed at (pad_r, pad_c), with the EOS row
 * below and the EOS column right of the grid where they fit; out holds 900 tokens. */
void arc_tokenize(const arc_grid *g, int pad_r, int pad_c, uint8_t *out);
/* The reference's _crop: the largest top-left rectangle of colour tokens (2..11), minus 2. */
void arc_crop(const int32_t *tokens, arc_grid *out);

/* SHA-256, and the reference's grid_hash: sha256(bytes([rows, cols]) + grid bytes). */
void arc_sha256(const void *data, size_t n, uint8_t out[32]);
void arc_grid_hash(const arc_grid *g, uint8_t out[32]);

/* Open-addressing table from a 32-byte digest (already uniformly distributed) to an int64. */
typedef struct {
    uint8_t (*keys)[32];
    int64_t *vals;
    uint8_t *used;
    size_t cap, n;
} arc_htab;

/* p with room for n + 1 elements of size elem (capacity *cap, doubling). */
void *arc_reserve(void *p, int64_t *cap, int64_t n, size_t elem);

void arc_htab_init(arc_htab *t);
void arc_htab_free(arc_htab *t);
void arc_htab_clear(arc_htab *t);
/* Pointer to the value of key, or NULL. */
int64_t *arc_htab_get(const arc_htab *t, const uint8_t key[32]);
/* Inserts key → val and returns 1; when key is present returns 0 and leaves it. */
int arc_htab_put(arc_htab *t, const uint8_t key[32], int64_t val);

#endif
