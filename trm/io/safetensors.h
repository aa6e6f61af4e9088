/* safetensors.h — safetensors files: bounds-checked reader (mmap) and atomic writer with
 * trm's metadata (format version, trm version, step, config YAML, CRC32 per tensor). */
#ifndef TRM_SAFETENSORS_H
#define TRM_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL } st_dtype;

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[8];
    size_t offset, nbytes;  /* relative to the data section */
    const void *data;       /* reader: into the mapping; writer: caller's buffer */
} st_tensor;

typedef struct {
    char *key, *value;
} st_meta_kv;

typedef struct {
    trm_mmap map;
    int ntensors;
    st_tensor *tensors;
    int nmeta;
    st_meta_kv *meta;
    int nowned;    /* buffers tensors point into besides the mapping (a torch.save file's */
    void **owned;  /* inflated members and gathered views, torch_pt.c); freed by st_close */
    st_tensor **by_name; /* the tensors sorted by name (st_index), for st_find */
} st_file;

/* Opens and validates (header bounds and limits, JSON, dtype, shape×size = span, offsets in
 * range and non-overlapping, every crc32 entry; a file whose format says trm wrote it must
 * have one for every tensor, a file from elsewhere may have none). */
int st_open(st_file *f, const char *path, trm_err *e);
/* Sorts f's tensors by name for st_find (st_open does it; readers that fill f themselves
 * call it once the names are distinct). */
void st_index(st_file *f);
/* The crc32 entries of f's metadata (0: a file from elsewhere, its data not verified). */
int st_count_checksums(const st_file *f);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta_get(const st_file *f, const char *key);
int st_dtype_size(st_dtype t);
const char *st_dtype_name(st_dtype t);
/* Converts any float dtype to float32 (count elements); error on integer tensors. */
int st_read_f32(const st_tensor *t, float *out, trm_err *e);

/* Writer: collect tensors (data borrowed until st_writer_save) and metadata, then save
 * atomically. crc32 of every tensor is added to the metadata as "crc32.<name>". */
typedef struct {
    int ntensors, cap;
    st_tensor *tensors;
    int nmeta, mcap;
    st_meta_kv *meta;
} st_writer;

void st_writer_init(st_writer *w);
void st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim,
                   const int64_t *shape, const void *data);
void st_writer_meta(st_writer *w, const char *key, const char *value);
int st_writer_save(st_writer *w, const char *path, trm_err *e);
void st_writer_free(st_writer *w);

#endif
