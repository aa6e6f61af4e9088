/* npy.h — NumPy .npy arrays: memory-mapped reader (format 1–3, little-endian ints/bools,
 * C order) and an atomic writer. */
#ifndef TRM_NPY_H
#define TRM_NPY_H
#include <stdint.h>

#include "util/util.h"

typedef enum { NPY_BOOL, NPY_I8, NPY_U8, NPY_I16, NPY_U16, NPY_I32, NPY_U32, NPY_I64, NPY_F32, NPY_F64 } npy_dtype;

typedef struct {
    char *path;
    npy_dtype dtype;
    int itemsize;
    int ndim;
    int64_t shape[8];
    int64_t count;      /* product of shape */
    const void *data;   /* points into the mapping */
    trm_mmap map;
} npy_array;

/* Opens and validates; integer/bool dtypes only unless allow_float. Errors name the file. */
int npy_open(npy_array *a, const char *path, int allow_float, trm_err *e);
void npy_close(npy_array *a);
/* Element i (flat index) of an integer/bool array, widened. */
int64_t npy_get_i64(const npy_array *a, int64_t i);
/* Element i as a double (any dtype). Out-of-range i gives 0. */
double npy_get_f64(const npy_array *a, int64_t i);
/* Copies flat elements [start, start+n) converted to int32 (truncating wider values);
 * does nothing when the range is outside the array. */
void npy_copy_i32(const npy_array *a, int64_t start, int64_t n, int32_t *out);
/* First flat index whose value is outside [lo, hi) and (if has_allowed) != allowed, or -1. */
int64_t npy_find_outside(const npy_array *a, int64_t lo, int64_t hi, int has_allowed,
                         int64_t allowed);
/* Writes an array atomically (dtype and shape as given). */
int npy_write(const char *path, npy_dtype dtype, int ndim, const int64_t *shape,
              const void *data, trm_err *e);
const char *npy_dtype_name(npy_dtype t);

#endif
