/* zip.h — the zip container of torch.save files: a bounds-checked reader over bytes in memory
 * (stored and deflated members, zip64, CRC32 checked) and a writer of stored members whose
 * data starts on 64-byte boundaries, as torch writes them. */
#ifndef TRM_ZIP_H
#define TRM_ZIP_H
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

typedef struct {
    char *name;
    uint64_t data_off; /* where the member's bytes start in the archive */
    uint64_t csize, usize;
    uint32_t crc;
    int method;        /* 0 stored, 8 deflated */
} zip_entry;

typedef struct {
    const unsigned char *base; /* borrowed: the caller keeps the bytes alive */
    size_t size;
    const char *path;          /* for messages */
    int n;
    zip_entry *ents;
    const zip_entry **by_name; /* the members sorted by name, for zip_find */
} zip_reader;

/* Whether the bytes start like a zip archive (a local header or an empty archive's end record). */
int zip_looks_like(const void *data, size_t size);
/* Parses the central directory; every member's range, name, method and flags are checked,
 * members may not share bytes, and what they inflate to in all is bounded by deflate's best
 * ratio times the archive's size. */
int zip_open_mem(zip_reader *z, const void *data, size_t size, const char *path, trm_err *e);
void zip_close(zip_reader *z);
const zip_entry *zip_find(const zip_reader *z, const char *name);
/* A member's bytes: stored ones point into the archive (*owned = NULL), deflated ones are
 * inflated into *owned (free it). The CRC32 is verified unless the archive stores 0, which
 * torch writes when its compute_crc32 setting is off. */
int zip_member(const zip_reader *z, const zip_entry *en, const unsigned char **data, void **owned, trm_err *e);

typedef struct {
    char *name;
    const void *data; /* borrowed until zip_writer_save */
    size_t n;
} zip_wentry;

typedef struct {
    int n, cap;
    zip_wentry *ents;
    int force_zip64; /* zip64 records even for a small archive (tests the reader's zip64 path) */
} zip_writer;

void zip_writer_init(zip_writer *w);
void zip_writer_add(zip_writer *w, const char *name, const void *data, size_t n);
/* Writes the archive atomically (temp file, fsync, rename). */
int zip_writer_save(zip_writer *w, const char *path, trm_err *e);
/* The archive in memory (malloc'd), for callers that write it themselves. */
unsigned char *zip_writer_build(zip_writer *w, size_t *size);
void zip_writer_free(zip_writer *w);

#endif
