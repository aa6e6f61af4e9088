/* base.c — error messages, checked allocation, atomic file writes, mmap and clock wrappers.
 * The only place with POSIX file-system calls, so porting means touching one file. */
#define _POSIX_C_SOURCE 200809L
#include "base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int trm_errf(trm_err *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int trm_err_prefix(trm_err *e, const char *fmt, ...) {
    if (e) {
        char pre[1024], old[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(pre, sizeof pre, fmt, ap);
        va_end(ap);
        memcpy(old, e->msg, sizeof old);
        /* truncation is acceptable for an error message; bounded copies keep gcc quiet */
        size_t np = strnlen(pre, sizeof pre), room = sizeof e->msg - 1;
        if (np > room) np = room;
        memcpy(e->msg, pre, np);
        size_t o = np;
        const char *sep = ": ";
        for (int i = 0; i < 2 && o < room; i++) e->msg[o++] = sep[i];
        size_t no = strnlen(old, sizeof old);
        if (no > room - o) no = room - o;
        memcpy(e->msg + o, old, no);
        e->msg[o + no] = 0;
    }
    return -1;
}

int trm_err_oneline(trm_err *e) {
    if (!e) return -1;
    char out[sizeof e->msg];
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)e->msg; *p && o + 5 < sizeof out; p++) {
        if (*p < 0x20 || *p == 0x7f) o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", *p);
        else out[o++] = (char)*p;
    }
    out[o] = 0;
    memcpy(e->msg, out, o + 1);
    return -1;
}

/* Host allocations are small next to the model's buffers (which report through the backend
 * with advice); when even one fails there is nothing to recover, but say how much was asked
 * for, what is free and what to lower. The last checkpoint on disk is untouched. */
static void oom(size_t n) {
    fprintf(stderr, "trm: out of host memory allocating %.1f MiB (%.1f GiB available); lower global_batch_size, "
                    "use forward_dtype=bfloat16 or fewer H/L cycles\n",
            (double)n / 1048576.0, (double)trm_host_memory_available() / 1073741824.0);
    abort();
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) oom(n * sz);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xstrndup(const char *s, size_t n) {
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Reads f to its end into a buffer of *cap bytes grown as needed, up to max bytes: NULL when
 * memory cannot be had (how much a file needs is the file's business, so that is reported,
 * not aborted on) or *n passed max. */
static char *read_all(FILE *f, size_t max, size_t *cap, size_t *n) {
    char *buf = *cap - 1 <= max ? malloc(*cap) : NULL;
    while (buf) {
        *n += fread(buf + *n, 1, *cap - *n - 1, f);
        if (*n > max) break;
        if (*n + 1 < *cap) return buf; /* a short read: the end (or an error, for ferror) */
        int c = fgetc(f); /* full: at the end, or a file longer than it said */
        if (c == EOF) return buf;
        char *b = *cap <= SIZE_MAX / 2 ? realloc(buf, *cap *= 2) : NULL;
        if (!b) break;
        buf = b;
        buf[(*n)++] = (char)c;
    }
    free(buf);
    return NULL;
}

char *trm_read_file_max(const char *path, size_t max, size_t *len, trm_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        trm_errf(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    size_t cap = 4096, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= cap)
        cap = (uint64_t)st.st_size < SIZE_MAX - 1 ? (size_t)st.st_size + 1 : SIZE_MAX;
    char *buf = read_all(f, max, &cap, &n);
    int bad = ferror(f);
    fclose(f);
    if (buf && bad) {
        free(buf);
        buf = NULL;
    }
    if (!buf) {
        if (bad) trm_errf(e, "%s: read error", path);
        else if (n > max || cap - 1 > max) trm_errf(e, "%s: more than %zu bytes, the limit for this file", path, max);
        else trm_errf(e, "%s: cannot allocate %zu bytes to read it", path, cap);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *trm_read_file(const char *path, size_t *len, trm_err *e) { return trm_read_file_max(path, SIZE_MAX - 1, len, e); }

static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int trm_write_file_atomic(const char *path, const void *data, size_t len, trm_err *e) {
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        trm_errf(e, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        trm_errf(e, "%s: write failed: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        trm_errf(e, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

int trm_mkdirs(const char *path, trm_err *e) {
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            trm_errf(e, "%s: cannot create directory: %s", p, strerror(errno));
            free(p);
            return -1;
        }
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        trm_errf(e, "%s: cannot create directory: %s", p, strerror(errno));
        free(p);
        return -1;
    }
    free(p);
    if (!trm_is_dir(path)) return trm_errf(e, "%s: exists and is not a directory", path);
    return 0;
}

int trm_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int trm_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *trm_path_join(const char *a, const char *b) {
    size_t la = strlen(a);
    if (la == 0) return xstrdup(b);
    return xasprintf("%s%s%s", a, a[la - 1] == '/' ? "" : "/", b);
}

int trm_mmap_open(trm_mmap *m, const char *path, trm_err *e) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return trm_errf(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return trm_errf(e, "%s: not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return trm_errf(e, "%s: cannot map: %s", path, strerror(errno));
    m->data = p;
    return 0;
}

void trm_mmap_close(trm_mmap *m) {
    if (m->data) munmap(m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

double trm_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int trm_remove_tree(const char *path, trm_err *e) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : trm_errf(e, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return trm_errf(e, "%s: cannot open directory: %s", path, strerror(errno));
        struct dirent *de;
        int rc = 0;
        while (rc == 0 && (de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char *child = trm_path_join(path, de->d_name);
            rc = trm_remove_tree(child, e);
            free(child);
        }
        closedir(d);
        if (rc) return rc;
        if (rmdir(path) != 0) return trm_errf(e, "%s: cannot remove: %s", path, strerror(errno));
        return 0;
    }
    if (unlink(path) != 0) return trm_errf(e, "%s: cannot remove: %s", path, strerror(errno));
    return 0;
}

int trm_rename(const char *from, const char *to, trm_err *e) {
    if (rename(from, to) != 0) return trm_errf(e, "cannot rename %s to %s: %s", from, to, strerror(errno));
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **trm_list_dir(const char *dir, int *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 16;
    char **names = xmalloc((size_t)cap * sizeof *names);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (*n == cap) names = xrealloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[(*n)++] = xstrdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, cmp_names);
    return names;
}

void trm_free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int trm_lock_file(const char *path, int *fd, long *holder, trm_err *e) {
    *fd = -1, *holder = 0;
    /* close-on-exec: a child must not inherit the lock and keep it after this process ends */
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) return trm_errf(e, "%s: cannot create: %s", path, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == EWOULDBLOCK) {
            char buf[32] = {0};
            ssize_t r = pread(f, buf, sizeof buf - 1, 0);
            *holder = r > 0 ? strtol(buf, NULL, 10) : 0;
            close(f);
            return 1;
        }
        close(f);
        return trm_errf(e, "%s: cannot lock: %s", path, strerror(err));
    }
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, buf, (size_t)len, 0) != len) {
        int err = errno;
        close(f);
        return trm_errf(e, "%s: cannot write: %s", path, strerror(err));
    }
    *fd = f;
    return 0;
}

void trm_unlock_file(int fd) {
    if (fd >= 0) close(fd); /* closing the last descriptor drops the flock */
}

int trm_parse_i64(const char *opt, const char *value, int64_t *out, trm_err *e) {
    if (!value) return trm_errf(e, "%s needs a value", opt);
    char *end;
    errno = 0;
    long long x = strtoll(value, &end, 10);
    if (*end || end == value || errno) return trm_errf(e, "%s: expected an integer, got '%s'", opt, value);
    *out = (int64_t)x;
    return 0;
}

uint64_t trm_host_memory_bytes(void) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) return (uint64_t)pages * (uint64_t)size;
#endif
    return 0;
}

uint64_t trm_host_memory_available(void) {
#if defined(__linux__)
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    if (f) fclose(f);
    if (kib) return (uint64_t)kib * 1024u;
#endif
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) return (uint64_t)pages * (uint64_t)size;
#endif
    return 0;
}

uint64_t trm_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
#if defined(__APPLE__)
    return (uint64_t)ru.ru_maxrss; /* bytes on macOS */
#else
    return (uint64_t)ru.ru_maxrss * 1024u; /* KiB on Linux */
#endif
}

int trm_mkdirs_for(const char *path, trm_err *e) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return 0;
    char *dir = xstrndup(path, (size_t)(slash - path));
    int rc = trm_mkdirs(dir, e);
    free(dir);
    return rc;
}

size_t trm_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), w = lb + 1;
    size_t *d = xmalloc((la + 1) * w * sizeof *d); /* d[i*w+j]: a[0,i) against b[0,j) */
    for (size_t i = 0; i <= la; i++) d[i * w] = i;
    for (size_t j = 0; j <= lb; j++) d[j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[(i - 1) * w + j - 1] + (a[i - 1] != b[j - 1]);
            if (d[(i - 1) * w + j] + 1 < best) best = d[(i - 1) * w + j] + 1;
            if (d[i * w + j - 1] + 1 < best) best = d[i * w + j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[(i - 2) * w + j - 2] + 1 < best)
                best = d[(i - 2) * w + j - 2] + 1; /* two neighbours swapped: one typo */
            d[i * w + j] = best;
        }
    size_t r = d[la * w + lb];
    free(d);
    return r;
}

const char *trm_nearest(const char *word, const char *const *cands, size_t n) {
    size_t la = strlen(word), nprefix = 0;
    const char *prefixed = NULL;
    for (size_t i = 0; i < n; i++)
        if (la >= 2 && !strncmp(word, cands[i], la)) nprefix++, prefixed = cands[i];
    if (nprefix == 1) return prefixed; /* "pre" for "pretrain" */
    const char *best = NULL;
    size_t bestd = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = trm_edit_distance(word, cands[i]);
        if (d < bestd) bestd = d, best = cands[i];
    }
    if (!best) return NULL;
    size_t lb = strlen(best), longer = la > lb ? la : lb;
    return bestd * 3 <= longer ? best : NULL;
}

uint16_t trm_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float trm_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
