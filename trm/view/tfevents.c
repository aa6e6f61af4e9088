/* tfevents.c — TensorBoard event files (see tfevents.h). The messages and field numbers are
 * those of TensorFlow's event.proto and summary.proto that TensorBoard reads:
 *   Event         wall_time 1 (double), step 2 (int64), file_version 3, summary 5,
 *                 session_log 7
 *   SessionLog    status 1 (START = 1)
 *   Summary       value 1 (repeated)
 *   Summary.Value tag 1, simple_value 2 (float), tensor 8, metadata 9
 *   SummaryMetadata  plugin_data 1 { plugin_name 1, content 2 }, data_class 4 (TENSOR = 2)
 *   TensorProto   dtype 1 (DT_STRING = 7), tensor_shape 2 (empty: a scalar), string_val 8 */
#define _POSIX_C_SOURCE 200809L
#include "tfevents.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- CRC-32C and TFRecord framing ---------------------------------------------------------- */

static void crc32c_table(uint32_t t[256]) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
}

static uint32_t crc32c_with(const uint32_t t[256], const void *p, size_t n) {
    const unsigned char *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = t[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t trm_crc32c(const void *p, size_t n) {
    uint32_t t[256];
    crc32c_table(t);
    return crc32c_with(t, p, n);
}

uint32_t trm_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

static void put_le(unsigned char *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* One TFRecord: uint64 length, masked CRC of those 8 bytes, the data, masked CRC of the data. */
static int write_record(FILE *f, const uint32_t t[256], const trm_sbuf *data) {
    unsigned char head[12], tail[4];
    size_t n = data->len;
    put_le(head, n, 8);
    put_le(head + 8, trm_crc32c_mask(crc32c_with(t, head, 8)), 4);
    put_le(tail, trm_crc32c_mask(crc32c_with(t, data->p, n)), 4);
    return fwrite(head, 1, 12, f) == 12 && fwrite(data->p, 1, n, f) == n && fwrite(tail, 1, 4, f) == 4 ? 0 : -1;
}

/* ---- protocol buffer encoding ---------------------------------------------------------------- */

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

static void pb_varint(trm_sbuf *b, uint64_t v) {
    char c[10];
    int n = 0;
    do {
        c[n++] = (char)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    sb_putn(b, c, (size_t)n);
}

static void pb_key(trm_sbuf *b, int field, int wire) { pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_int(trm_sbuf *b, int field, int64_t v) {
    pb_key(b, field, WIRE_VARINT);
    pb_varint(b, (uint64_t)v); /* int64: two's complement, ten bytes when negative */
}

static void pb_bytes(trm_sbuf *b, int field, const void *p, size_t n) {
    pb_key(b, field, WIRE_LEN);
    pb_varint(b, n);
    if (n) sb_putn(b, p, n);
}

static void pb_str(trm_sbuf *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* A nested message (its bytes built in m), and m emptied for reuse. */
static void pb_msg(trm_sbuf *b, int field, trm_sbuf *m) {
    pb_bytes(b, field, m->p, m->len);
    m->len = 0;
}

/* A fixed-width field: the value's `n` bytes (8: double, 4: float), little-endian. */
static void pb_fixed(trm_sbuf *b, int field, int wire, uint64_t bits, int n) {
    unsigned char c[8];
    put_le(c, bits, n);
    pb_key(b, field, wire);
    sb_putn(b, (const char *)c, (size_t)n);
}

static void pb_double(trm_sbuf *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    pb_fixed(b, field, WIRE_I64, u, 8);
}

static void pb_float(trm_sbuf *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    pb_fixed(b, field, WIRE_I32, u, 4);
}

/* ---- the writer -------------------------------------------------------------------------------- */

enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5, EV_SESSION_LOG = 7 };

struct trm_tfevents {
    char *dir, *config;
    int64_t first_step, step;
    FILE *f;
    trm_sbuf values; /* the Summary.Value messages of the record being built */
    uint32_t crc[256];
};

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int write_event(trm_tfevents *w, int64_t step, int what, trm_sbuf *body, trm_err *e) {
    trm_sbuf ev = {0};
    pb_double(&ev, EV_WALL_TIME, wall_time());
    if (step) pb_int(&ev, EV_STEP, step);
    pb_bytes(&ev, what, body->p, body->len);
    int rc = write_record(w->f, w->crc, &ev);
    sb_free(&ev);
    return rc ? trm_errf(e, "%s/%s*: cannot write: %s", w->dir, TRM_TFEVENTS_PREFIX, strerror(errno)) : 0;
}

/* The config as a text summary (the text plugin renders Markdown: indented, a code block). */
static void text_value(trm_sbuf *values, const char *tag, const char *text) {
    trm_sbuf md = {0}, m = {0}, v = {0};
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        sb_puts(&md, "    ");
        sb_putn(&md, l, n);
        sb_putc(&md, '\n');
        l += n + (nl != NULL);
    }
    /* fields in number order, as protobuf libraries write them */
    pb_str(&v, 1, tag);
    pb_int(&m, 1, 7);                /* TensorProto.dtype: DT_STRING */
    pb_bytes(&m, 2, "", 0);          /* tensor_shape: a scalar */
    pb_bytes(&m, 8, md.p ? md.p : "", md.len);
    pb_msg(&v, 8, &m);               /* Value.tensor */
    trm_sbuf meta = {0};
    pb_str(&m, 1, "text");           /* PluginData.plugin_name */
    pb_msg(&meta, 1, &m);            /* SummaryMetadata.plugin_data */
    pb_int(&meta, 4, 2);             /* data_class: DATA_CLASS_TENSOR */
    pb_msg(&v, 9, &meta);            /* Value.metadata */
    pb_msg(values, 1, &v);
    sb_free(&md), sb_free(&m), sb_free(&v), sb_free(&meta);
}

/* The largest <seconds> among the events files already in dir (0 when none). */
static long long newest_stamp(const char *dir) {
    int n;
    char **names = trm_list_dir(dir, &n);
    long long newest = 0;
    size_t pl = strlen(TRM_TFEVENTS_PREFIX);
    for (int i = 0; i < n; i++)
        if (!strncmp(names[i], TRM_TFEVENTS_PREFIX, pl)) {
            long long s = strtoll(names[i] + pl, NULL, 10);
            if (s > newest) newest = s;
        }
    trm_free_names(names, n);
    return newest;
}

/* A name that sorts after the files of earlier sessions even when this host's clock is behind
 * the one that wrote them (a run resumed on another machine). */
static char *new_file_name(const char *dir) {
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "localhost");
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    long long now = (long long)time(NULL), prev = newest_stamp(dir);
    long long stamp = now > prev ? now : prev + 1;
    char *name = xasprintf("%s%010lld.%s.%ld.trm", TRM_TFEVENTS_PREFIX, stamp, host, (long)getpid());
    char *path = trm_path_join(dir, name);
    free(name);
    return path;
}

static int open_file(trm_tfevents *w, trm_err *e) {
    char *path = new_file_name(w->dir);
    w->f = fopen(path, "ab");
    if (!w->f) {
        trm_errf(e, "%s: cannot create: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    free(path);
    trm_sbuf body = {0};
    sb_puts(&body, "brain.Event:2");
    int rc = write_event(w, 0, EV_FILE_VERSION, &body, e);
    body.len = 0;
    pb_int(&body, 1, 1); /* SessionLog.status: START */
    if (!rc) rc = write_event(w, w->first_step, EV_SESSION_LOG, &body, e);
    body.len = 0;
    if (!rc && w->config) {
        text_value(&body, "config", w->config);
        rc = write_event(w, w->first_step, EV_SUMMARY, &body, e);
    }
    sb_free(&body);
    return rc;
}

trm_tfevents *trm_tfevents_new(const char *dir, int64_t first_step, const char *config) {
    trm_tfevents *w = xcalloc(1, sizeof *w);
    w->dir = xstrdup(dir);
    w->config = config ? xstrdup(config) : NULL;
    w->first_step = first_step;
    crc32c_table(w->crc);
    return w;
}

void trm_tfevents_begin(trm_tfevents *w, int64_t step) {
    if (!w) return;
    w->step = step;
    w->values.len = 0;
}

void trm_tfevents_scalar(trm_tfevents *w, const char *tag, double value) {
    if (!w) return;
    trm_sbuf v = {0};
    pb_str(&v, 1, tag);
    pb_float(&v, 2, (float)value);
    pb_msg(&w->values, 1, &v);
    sb_free(&v);
}

int trm_tfevents_end(trm_tfevents *w, trm_err *e) {
    if (!w || !w->values.len) return 0;
    if (!w->f && open_file(w, e)) return -1;
    int rc = write_event(w, w->step, EV_SUMMARY, &w->values, e);
    w->values.len = 0;
    if (!rc && fflush(w->f) != 0)
        rc = trm_errf(e, "%s/%s*: cannot write: %s", w->dir, TRM_TFEVENTS_PREFIX, strerror(errno));
    return rc;
}

void trm_tfevents_free(trm_tfevents *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    sb_free(&w->values);
    free(w->dir);
    free(w->config);
    free(w);
}

/* ---- cutting back on resume ---------------------------------------------------------------- */

/* A varint at *p (< end); -1 when it runs past end or past ten bytes. */
static int get_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        unsigned char c = *(*p)++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return 0;
    }
    return -1;
}

/* Event.step of an encoded Event (0 when absent, as protobuf reads it; also 0 for what cannot
 * be parsed, which is then kept). */
static int64_t event_step(const unsigned char *p, size_t n) {
    const unsigned char *end = p + n;
    int64_t step = 0;
    while (p < end) {
        uint64_t key, v;
        if (get_varint(&p, end, &key)) return 0;
        int wire = (int)(key & 7);
        if (wire == WIRE_VARINT) {
            if (get_varint(&p, end, &v)) return 0;
            if (key >> 3 == EV_STEP) step = (int64_t)v;
        } else if (wire == WIRE_I64 || wire == WIRE_I32) {
            size_t k = wire == WIRE_I64 ? 8 : 4;
            if ((size_t)(end - p) < k) return 0;
            p += k;
        } else if (wire == WIRE_LEN) {
            if (get_varint(&p, end, &v) || v > (uint64_t)(end - p)) return 0;
            p += v;
        } else {
            return 0;
        }
    }
    return step;
}

/* Keeps the whole records of one file whose step is at most `step`; rewrites the file
 * (atomically) only when something goes. */
static int cut_file(const char *path, int64_t step, const uint32_t t[256], trm_err *e) {
    size_t len;
    unsigned char *buf = (unsigned char *)trm_read_file(path, &len, e);
    if (!buf) return -1;
    trm_sbuf kept = {0};
    size_t off = 0;
    int dropped = 0;
    while (len - off >= 16) {
        const unsigned char *r = buf + off;
        uint64_t n = get_le(r, 8);
        if (get_le(r + 8, 4) != trm_crc32c_mask(crc32c_with(t, r, 8)) || n > len - off - 16) break;
        if (get_le(r + 12 + n, 4) != trm_crc32c_mask(crc32c_with(t, r + 12, n))) break;
        if (event_step(r + 12, n) <= step) sb_putn(&kept, (const char *)r, 16 + n);
        else dropped = 1;
        off += 16 + n;
    }
    int rc = 0;
    if (dropped || off < len) rc = trm_write_file_atomic(path, kept.p ? kept.p : "", kept.len, e);
    sb_free(&kept);
    free(buf);
    return rc;
}

int trm_tfevents_cut(const char *dir, int64_t step, trm_err *e) {
    int n, rc = 0;
    char **names = trm_list_dir(dir, &n);
    uint32_t t[256];
    crc32c_table(t);
    for (int i = 0; i < n && rc == 0; i++) {
        if (strncmp(names[i], TRM_TFEVENTS_PREFIX, strlen(TRM_TFEVENTS_PREFIX)) || strstr(names[i], ".tmp."))
            continue;
        char *p = trm_path_join(dir, names[i]);
        rc = cut_file(p, step, t, e);
        free(p);
    }
    trm_free_names(names, n);
    return rc;
}
