/* base.h — error reporting, checked allocation and small file helpers shared by every module.
 * Errors travel as a trm_err filled by the failing function (return value -1); only the
 * command layer prints them, so library code never exits the process. */
#ifndef TRM_UTIL_BASE_H
#define TRM_UTIL_BASE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TRM_VERSION "0.1.0"

typedef struct {
    char msg[2048];
} trm_err;

#if defined(__GNUC__)
#define TRM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TRM_PRINTF(a, b)
#endif

/* Sets e->msg (if e != NULL) and returns -1, so callers can `return trm_errf(...)`. */
int trm_errf(trm_err *e, const char *fmt, ...) TRM_PRINTF(2, 3);
/* Prefixes an existing message: "ctx: old message". Returns -1. */
int trm_err_prefix(trm_err *e, const char *fmt, ...) TRM_PRINTF(2, 3);
/* Writes control characters of the message (a file's bytes quoted in it) as \xNN, so that a
 * reader's refusal stays one line whatever the file holds. Returns -1. */
int trm_err_oneline(trm_err *e);

/* Allocation that aborts with a message on exhaustion (host OOM is not recoverable here). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) TRM_PRINTF(1, 2);

/* Whole-file read; returns NULL and fills e on failure. *len excludes the added NUL. Memory
 * that cannot be had for the file is a failure with a message, not an abort. */
char *trm_read_file(const char *path, size_t *len, trm_err *e);
/* The same for a file that may hold at most max bytes (a larger one is refused, naming it). */
char *trm_read_file_max(const char *path, size_t max, size_t *len, trm_err *e);
/* Atomic write: temp file in the same directory, fsync, rename; never leaves a half file. */
int trm_write_file_atomic(const char *path, const void *data, size_t len, trm_err *e);
/* Creates the directory that will hold `path` (nothing when path has no directory part). */
int trm_mkdirs_for(const char *path, trm_err *e);
int trm_mkdirs(const char *path, trm_err *e);
int trm_file_exists(const char *path);
int trm_is_dir(const char *path);
char *trm_path_join(const char *a, const char *b);

/* Read-only memory map of a whole file (Linux/macOS: mmap; kept behind this wrapper). */
typedef struct {
    void *data;
    size_t size;
} trm_mmap;
int trm_mmap_open(trm_mmap *m, const char *path, trm_err *e);
void trm_mmap_close(trm_mmap *m);

double trm_now_seconds(void);
/* Physical memory of this machine in bytes (0 if unknown); peak resident set of this
 * process in bytes. */
uint64_t trm_host_memory_bytes(void);
/* Memory a new allocation could get now (Linux: MemAvailable), 0 if unknown. */
uint64_t trm_host_memory_available(void);
uint64_t trm_peak_rss_bytes(void);
/* Removes a file or a directory tree (no symlink following). */
int trm_remove_tree(const char *path, trm_err *e);
/* rename(2) with an error message. */
int trm_rename(const char *from, const char *to, trm_err *e);
/* The names in a directory, "." and ".." left out, sorted (NULL when it cannot be read);
 * free with trm_free_names. */
char **trm_list_dir(const char *dir, int *n);
void trm_free_names(char **names, int n);
/* An exclusive advisory lock (flock) on `path`, created if missing, holding this process's
 * pid: 0 with *fd open while it is held (the kernel drops it when the process dies, so a
 * dead holder's lock is simply taken over); 1 when another process holds it (*holder: its
 * pid, 0 if unknown); -1 with e set when the file cannot be opened or locked. */
int trm_lock_file(const char *path, int *fd, long *holder, trm_err *e);
void trm_unlock_file(int fd);

/* Parses the decimal integer value of command-line option `opt` (value NULL: the option
 * was last on the line). The whole value must be a number that fits in int64_t. */
int trm_parse_i64(const char *opt, const char *value, int64_t *out, trm_err *e);

/* Edit distance between byte strings: insertions, deletions, substitutions and swaps of two
 * neighbours each count one. */
size_t trm_edit_distance(const char *a, const char *b);
/* The candidate closest to `word` for a "did you mean" hint: NULL when none is near enough
 * (more than a third of the longer word would have to change). */
const char *trm_nearest(const char *word, const char *const *cands, size_t n);

/* float32 -> bfloat16 bits, rounding to nearest even as torch does (NaN stays NaN), and back. */
uint16_t trm_f32_to_bf16(float f);
float trm_bf16_to_f32(uint16_t h);

#endif
