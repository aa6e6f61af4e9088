/* pickle.h — the part of Python's pickle format that torch.save writes for a dict of tensors
 * (a state_dict, the reference's saved predictions): a reader that builds a description of
 * every tensor without executing anything (an opcode or class outside the subset is refused by
 * name) and a writer of the same subset that torch.load(weights_only=True) accepts. */
#ifndef TRM_PICKLE_H
#define TRM_PICKLE_H
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"
#include "util/util.h"

#define PK_MAX_DIMS 8

/* One tensor of the dict: a strided view of a storage (a zip member data/<storage>). */
typedef struct {
    char *name;             /* its key; keys of nested dicts are joined with '.' */
    char *storage;          /* the storage's key: [A-Za-z0-9_]+ */
    st_dtype dtype;         /* the storage's element type */
    int64_t storage_numel;  /* elements in the storage */
    int ndim;
    int64_t shape[PK_MAX_DIMS], stride[PK_MAX_DIMS];
    int64_t offset;         /* in elements; offset + the view's extent fit the storage */
} pk_tensor;

typedef struct {
    int n;
    pk_tensor *t;
} pk_tensors;

/* Reads a pickle whose result is a dict (or OrderedDict) of tensors, nested dicts allowed;
 * values that are neither (an epoch number, a string) are skipped. `what` names the input in
 * messages. */
int pk_read_tensors(const unsigned char *data, size_t n, const char *what, pk_tensors *out, trm_err *e);
void pk_tensors_free(pk_tensors *t);

/* A tensor to write: contiguous, its whole storage. */
typedef struct {
    const char *name;
    st_dtype dtype;
    int ndim;
    const int64_t *shape;
    const char *storage; /* key of its storage */
} pk_wtensor;

/* The pickle (protocol 2, as torch.save) of an OrderedDict (ordered = 1, a state_dict) or a
 * dict of these tensors, in this order. Returns malloc'd bytes. */
unsigned char *pk_write_tensors(const pk_wtensor *t, int n, int ordered, size_t *len);
/* The storage class torch pickles for a dtype ("FloatStorage"), NULL if it has none. */
const char *pk_storage_class(st_dtype dt);

#endif
