/* zip.c — zip archives for torch.save files (see zip.h). The reader trusts nothing: every
 * offset and size from the central directory and the local headers is checked against the
 * archive before use, members may not overlap (overlapping members make a small archive
 * inflate without bound), inflated sizes are bounded by deflate's maximum ratio, and memory
 * for an inflated member that cannot be had is a refused file, not an abort. */
#include "zip.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define LOCAL_LEN 30u
#define CENTRAL_LEN 46u
#define EOCD_LEN 22u
#define EOCD64_LEN 56u
#define LOC64_LEN 20u
#define ALIGN 64u          /* torch aligns every member's data to 64 bytes */
#define EXTRA_PAD 0x4246u  /* "FB": torch's padding extra field */
#define EXTRA_ZIP64 0x0001u
#define MAX_RATIO 1032u    /* deflate cannot compress better than about 1032:1 */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

int zip_looks_like(const void *data, size_t size) {
    const unsigned char *p = data;
    return size >= 4 && (rd32(p) == SIG_LOCAL || rd32(p) == SIG_EOCD);
}

/* ---- reader ----------------------------------------------------------------------------- */

typedef struct {
    uint64_t entries, cd_size, cd_off;
    size_t eocd_pos; /* where the directory must end (the first end record) */
} zip_end;

static int find_eocd(const zip_reader *z, zip_end *end, trm_err *e) {
    if (z->size < EOCD_LEN) return trm_errf(e, "%s: %zu bytes is too short for a zip archive (truncated file?)", z->path, z->size);
    size_t lo = z->size > EOCD_LEN + 65535u ? z->size - EOCD_LEN - 65535u : 0;
    for (size_t pos = z->size - EOCD_LEN + 1; pos-- > lo;) {
        const unsigned char *p = z->base + pos;
        if (rd32(p) != SIG_EOCD || pos + EOCD_LEN + rd16(p + 20) != z->size) continue;
        if (rd16(p + 4) != 0 || rd16(p + 6) != 0 || rd16(p + 8) != rd16(p + 10))
            return trm_errf(e, "%s: a zip archive split over several disks is not supported", z->path);
        end->entries = rd16(p + 10);
        end->cd_size = rd32(p + 12);
        end->cd_off = rd32(p + 16);
        end->eocd_pos = pos;
        if (pos >= LOC64_LEN && rd32(p - LOC64_LEN) == SIG_LOC64) {
            const unsigned char *l = p - LOC64_LEN;
            uint64_t off = rd64(l + 8);
            if (rd32(l + 4) != 0 || rd32(l + 16) > 1)
                return trm_errf(e, "%s: a zip archive split over several disks is not supported", z->path);
            if (off > pos - LOC64_LEN || pos - LOC64_LEN - off < EOCD64_LEN || rd32(z->base + off) != SIG_EOCD64)
                return trm_errf(e, "%s: the zip64 end record is missing or out of range (truncated file?)", z->path);
            const unsigned char *r = z->base + off;
            if (rd32(r + 16) != 0 || rd32(r + 20) != 0 || rd64(r + 24) != rd64(r + 32))
                return trm_errf(e, "%s: a zip archive split over several disks is not supported", z->path);
            end->entries = rd64(r + 32);
            end->cd_size = rd64(r + 40);
            end->cd_off = rd64(r + 48);
            end->eocd_pos = (size_t)off;
        }
        return 0;
    }
    return trm_errf(e, "%s: no zip end-of-central-directory record (truncated file, or not a zip archive)", z->path);
}

/* Applies the zip64 extra field: fields at their 32-bit maximum are given there, in order. */
static int apply_zip64(const zip_reader *z, const unsigned char *extra, size_t len, uint64_t *usize, uint64_t *csize,
                       uint64_t *off, const char *name, trm_err *e) {
    size_t i = 0;
    while (i + 4 <= len) {
        uint16_t id = rd16(extra + i), sz = rd16(extra + i + 2);
        if (i + 4 + sz > len) break;
        if (id == EXTRA_ZIP64) {
            const unsigned char *d = extra + i + 4;
            size_t k = 0;
            uint64_t *fields[3] = {usize, csize, off};
            for (int f = 0; f < 3; f++) {
                if (*fields[f] != 0xFFFFFFFFu) continue;
                if (k + 8 > sz) return trm_errf(e, "%s: member '%s': zip64 extra field too short", z->path, name);
                *fields[f] = rd64(d + k);
                k += 8;
            }
            return 0;
        }
        i += 4u + sz;
    }
    if (*usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *off == 0xFFFFFFFFu)
        return trm_errf(e, "%s: member '%s': sizes need a zip64 extra field that is missing", z->path, name);
    return 0;
}

static int name_ok(const unsigned char *p, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] == 0) return 0;
    return 1;
}

static int read_entry(zip_reader *z, const zip_end *end, size_t *pos, zip_entry *en, trm_err *e) {
    const unsigned char *b = z->base;
    uint64_t cd_end = end->cd_off + end->cd_size;
    if (*pos + CENTRAL_LEN > cd_end || rd32(b + *pos) != SIG_CENTRAL)
        return trm_errf(e, "%s: central directory entry %d is damaged", z->path, z->n);
    const unsigned char *c = b + *pos;
    uint16_t flags = rd16(c + 8), method = rd16(c + 10), nlen = rd16(c + 28), xlen = rd16(c + 30), clen = rd16(c + 32);
    if (*pos + CENTRAL_LEN + nlen + xlen + clen > cd_end)
        return trm_errf(e, "%s: central directory entry %d runs past the directory", z->path, z->n);
    if (!name_ok(c + CENTRAL_LEN, nlen)) return trm_errf(e, "%s: central directory entry %d has a bad name", z->path, z->n);
    en->name = xstrndup((const char *)c + CENTRAL_LEN, nlen);
    if (flags & 1u) return trm_errf(e, "%s: member '%s' is encrypted", z->path, en->name);
    if (method != 0 && method != 8)
        return trm_errf(e, "%s: member '%s' uses compression method %u (only stored and deflated are supported)",
                        z->path, en->name, method);
    if (rd16(c + 34) != 0 && rd16(c + 34) != 0xFFFF)
        return trm_errf(e, "%s: a zip archive split over several disks is not supported", z->path);
    uint64_t usize = rd32(c + 24), csize = rd32(c + 20), off = rd32(c + 42);
    if (apply_zip64(z, c + CENTRAL_LEN + nlen, xlen, &usize, &csize, &off, en->name, e)) return -1;
    en->method = method;
    en->crc = rd32(c + 16);
    en->usize = usize;
    en->csize = csize;
    *pos += CENTRAL_LEN + nlen + xlen + clen;
    /* the local header: its own name and extra lengths place the data */
    if (off > end->cd_off || end->cd_off - off < LOCAL_LEN || rd32(b + off) != SIG_LOCAL)
        return trm_errf(e, "%s: member '%s': local header out of range or damaged (truncated file?)", z->path, en->name);
    const unsigned char *l = b + off;
    uint64_t data = off + LOCAL_LEN + rd16(l + 26) + rd16(l + 28);
    if (data > end->cd_off || csize > end->cd_off - data)
        return trm_errf(e, "%s: member '%s': %" PRIu64 " bytes at offset %" PRIu64 " run past the archive's data (truncated file?)",
                        z->path, en->name, csize, data);
    if (rd16(l + 26) != nlen || memcmp(l + LOCAL_LEN, en->name, nlen) != 0)
        return trm_errf(e, "%s: member '%s': the local header names another file", z->path, en->name);
    if (method == 0 && csize != usize)
        return trm_errf(e, "%s: member '%s': stored with %" PRIu64 " bytes but %" PRIu64 " uncompressed", z->path, en->name,
                        csize, usize);
    if (method == 8 && usize / MAX_RATIO > csize + 1)
        return trm_errf(e, "%s: member '%s': %" PRIu64 " bytes cannot inflate to %" PRIu64, z->path, en->name, csize, usize);
    en->data_off = data;
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp((*(const zip_entry *const *)a)->name, (*(const zip_entry *const *)b)->name);
}

/* Sorts the members by name (kept for zip_find) and refuses a name that appears twice. */
static int index_names(zip_reader *z, trm_err *e) {
    const zip_entry **s = xmalloc(((size_t)z->n + 1) * sizeof *s);
    for (int i = 0; i < z->n; i++) s[i] = &z->ents[i];
    qsort(s, (size_t)z->n, sizeof *s, cmp_names);
    z->by_name = s;
    for (int i = 1; i < z->n; i++)
        if (!strcmp(s[i - 1]->name, s[i]->name))
            return trm_errf(e, "%s: member '%s' appears twice", z->path, s[i]->name);
    return 0;
}

static int cmp_data_off(const void *a, const void *b) {
    const zip_entry *x = *(const zip_entry *const *)a, *y = *(const zip_entry *const *)b;
    return x->data_off < y->data_off ? -1 : x->data_off > y->data_off;
}

/* Members may not share bytes, and all of them may inflate to at most MAX_RATIO times the
 * archive: each member's own bound, summed over disjoint members. */
static int check_layout(const zip_reader *z, trm_err *e) {
    const zip_entry **s = xmalloc(((size_t)z->n + 1) * sizeof *s);
    int n = 0, rc = 0;
    uint64_t total = 0;
    for (int i = 0; i < z->n; i++) {
        total += z->ents[i].usize; /* each at most ~2^54: no overflow for any count that fits */
        if (z->ents[i].csize) s[n++] = &z->ents[i];
    }
    qsort(s, (size_t)n, sizeof *s, cmp_data_off);
    for (int i = 1; i < n && !rc; i++)
        if (s[i - 1]->data_off + s[i - 1]->csize > s[i]->data_off)
            rc = trm_errf(e, "%s: members '%s' and '%s' share bytes (an overlapping archive; refused)", z->path,
                          s[i - 1]->name, s[i]->name);
    if (!rc && total / MAX_RATIO > (uint64_t)z->size)
        rc = trm_errf(e, "%s: the members inflate to %" PRIu64 " bytes in all, more than %u times the archive's %zu "
                         "bytes (the limit)", z->path, total, MAX_RATIO, z->size);
    free(s);
    return rc;
}

int zip_open_mem(zip_reader *z, const void *data, size_t size, const char *path, trm_err *e) {
    memset(z, 0, sizeof *z);
    z->base = data;
    z->size = size;
    z->path = path;
    zip_end end = {0, 0, 0, 0};
    if (find_eocd(z, &end, e)) return -1;
    if (end.cd_off > end.eocd_pos || end.cd_size > end.eocd_pos - end.cd_off)
        return trm_errf(e, "%s: the central directory (%" PRIu64 " bytes at %" PRIu64 ") is out of range (truncated file?)",
                        path, end.cd_size, end.cd_off);
    if (end.entries > end.cd_size / CENTRAL_LEN)
        return trm_errf(e, "%s: %" PRIu64 " members cannot fit a %" PRIu64 "-byte central directory", path, end.entries,
                        end.cd_size);
    z->ents = xcalloc((size_t)end.entries + 1, sizeof *z->ents);
    size_t pos = (size_t)end.cd_off;
    for (uint64_t i = 0; i < end.entries; i++) {
        int rc = read_entry(z, &end, &pos, &z->ents[z->n], e);
        z->n++; /* the name (if any) is freed by zip_close */
        if (rc) {
            zip_close(z);
            return -1;
        }
    }
    if (index_names(z, e) || check_layout(z, e)) {
        zip_close(z);
        return -1;
    }
    return 0;
}

void zip_close(zip_reader *z) {
    for (int i = 0; i < z->n; i++) free(z->ents[i].name);
    free(z->ents);
    free(z->by_name);
    z->ents = NULL;
    z->by_name = NULL;
    z->n = 0;
}

const zip_entry *zip_find(const zip_reader *z, const char *name) {
    if (!z->by_name) return NULL;
    const zip_entry key = {.name = (char *)name}, *kp = &key;
    const zip_entry **hit = bsearch(&kp, z->by_name, (size_t)z->n, sizeof *z->by_name, cmp_names);
    return hit ? *hit : NULL;
}

/* zlib counts in uInt; feed it in slices so members past 4 GiB work. */
static uint32_t crc_big(const unsigned char *p, uint64_t n) {
    uLong crc = crc32(0L, Z_NULL, 0);
    const uint64_t slice = 1u << 30;
    for (uint64_t o = 0; o < n; o += slice) crc = crc32(crc, p + o, (uInt)(n - o < slice ? n - o : slice));
    return (uint32_t)crc;
}

static int inflate_member(const zip_reader *z, const zip_entry *en, unsigned char *out, trm_err *e) {
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK) return trm_errf(e, "%s: cannot initialise zlib", z->path);
    const unsigned char *in = z->base + en->data_off;
    uint64_t in_left = en->csize, out_left = en->usize;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (s.avail_in == 0 && in_left) {
            s.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
            s.next_in = (Bytef *)(uintptr_t)in;
            in += s.avail_in;
            in_left -= s.avail_in;
        }
        if (s.avail_out == 0) {
            s.avail_out = (uInt)(out_left < (1u << 30) ? out_left : (1u << 30));
            s.next_out = out;
            out += s.avail_out;
            out_left -= s.avail_out;
        }
        uInt before_in = s.avail_in, before_out = s.avail_out;
        rc = inflate(&s, Z_NO_FLUSH);
        if (rc == Z_OK && s.avail_in == before_in && s.avail_out == before_out) rc = Z_BUF_ERROR; /* no progress */
    }
    int ok = rc == Z_STREAM_END && s.avail_out == 0 && out_left == 0;
    inflateEnd(&s);
    if (!ok)
        return trm_errf(e, "%s: member '%s': the deflated data is damaged or does not inflate to %" PRIu64 " bytes",
                        z->path, en->name, en->usize);
    return 0;
}

int zip_member(const zip_reader *z, const zip_entry *en, const unsigned char **data, void **owned, trm_err *e) {
    *owned = NULL;
    if (en->method == 0) {
        *data = z->base + en->data_off;
    } else {
        /* malloc, not xmalloc: a size the file asks for that this machine cannot give is the
         * file's problem, reported as such */
        unsigned char *buf = en->usize < SIZE_MAX ? malloc((size_t)en->usize + 1) : NULL;
        if (!buf)
            return trm_errf(e, "%s: member '%s' inflates to %" PRIu64 " bytes, more memory than this machine gives",
                            z->path, en->name, en->usize);
        if (inflate_member(z, en, buf, e)) {
            free(buf);
            return -1;
        }
        *owned = buf;
        *data = buf;
    }
    if (en->crc != 0 || en->usize == 0) {
        uint32_t got = crc_big(*data, en->usize);
        if (got != en->crc) {
            free(*owned);
            *owned = NULL;
            return trm_errf(e, "%s: member '%s': CRC32 mismatch (stored %08" PRIx32 ", data has %08" PRIx32 "; damaged file)",
                            z->path, en->name, en->crc, got);
        }
    }
    return 0;
}

/* ---- writer ----------------------------------------------------------------------------- */

void zip_writer_init(zip_writer *w) { memset(w, 0, sizeof *w); }

void zip_writer_add(zip_writer *w, const char *name, const void *data, size_t n) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->ents = xrealloc(w->ents, (size_t)w->cap * sizeof *w->ents);
    }
    w->ents[w->n].name = xstrdup(name);
    w->ents[w->n].data = data;
    w->ents[w->n].n = n;
    w->n++;
}

void zip_writer_free(zip_writer *w) {
    for (int i = 0; i < w->n; i++) free(w->ents[i].name);
    free(w->ents);
    memset(w, 0, sizeof *w);
}

typedef trm_sbuf bytes; /* the archive, in util's growable buffer */

static void put(bytes *b, const void *s, size_t n) { sb_putn(b, s, n); }

static void put16(bytes *b, uint32_t v) {
    unsigned char t[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    put(b, t, 2);
}

static void put32(bytes *b, uint32_t v) {
    put16(b, v & 0xFFFFu);
    put16(b, v >> 16);
}

static void put64(bytes *b, uint64_t v) {
    put32(b, (uint32_t)v);
    put32(b, (uint32_t)(v >> 32));
}

static void put_zeros(bytes *b, size_t n) {
    static const unsigned char z[ALIGN] = {0};
    while (n) {
        size_t k = n < ALIGN ? n : ALIGN;
        put(b, z, k);
        n -= k;
    }
}

#define DOS_DATE_1980 0x0021u /* 1980-01-01: the earliest date zip can express; builds are reproducible */

typedef struct {
    uint64_t off;
    uint32_t crc;
    int z64;
} wmeta;

/* What the local and the central header both say after their versions: no flags, stored,
 * time 0 on 1980-01-01, the crc, both sizes (0xFFFFFFFF: in the zip64 extra), the name's
 * length. */
static void common_fields(bytes *b, const zip_wentry *en, const wmeta *m, size_t nlen) {
    put16(b, 0);
    put16(b, 0);
    put16(b, 0);
    put16(b, DOS_DATE_1980);
    put32(b, m->crc);
    put32(b, m->z64 ? 0xFFFFFFFFu : (uint32_t)en->n);
    put32(b, m->z64 ? 0xFFFFFFFFu : (uint32_t)en->n);
    put16(b, (uint32_t)nlen);
}

static void local_header(bytes *b, const zip_wentry *en, wmeta *m) {
    size_t nlen = strlen(en->name);
    size_t fixed = b->len + LOCAL_LEN + nlen + (m->z64 ? 20u : 0u) + 4u;
    size_t pad = (ALIGN - fixed % ALIGN) % ALIGN;
    put32(b, SIG_LOCAL);
    put16(b, m->z64 ? 45 : 20);
    common_fields(b, en, m, nlen);
    put16(b, (uint32_t)((m->z64 ? 20u : 0u) + 4u + pad));
    put(b, en->name, nlen);
    if (m->z64) {
        put16(b, EXTRA_ZIP64);
        put16(b, 16);
        put64(b, en->n);
        put64(b, en->n);
    }
    put16(b, EXTRA_PAD);
    put16(b, (uint32_t)pad);
    put_zeros(b, pad);
}

static void central_header(bytes *b, const zip_wentry *en, const wmeta *m) {
    size_t nlen = strlen(en->name);
    int big_off = m->off >= 0xFFFFFFFFu || m->z64;
    put32(b, SIG_CENTRAL);
    put16(b, m->z64 ? 45 : 20);
    put16(b, m->z64 ? 45 : 20);
    common_fields(b, en, m, nlen);
    put16(b, m->z64 ? 28u : (big_off ? 12u : 0u));
    put16(b, 0);
    put16(b, 0);
    put16(b, 0);
    put32(b, 0);
    put32(b, big_off ? 0xFFFFFFFFu : (uint32_t)m->off);
    put(b, en->name, nlen);
    if (m->z64 || big_off) {
        put16(b, EXTRA_ZIP64);
        put16(b, m->z64 ? 24u : 8u);
        if (m->z64) {
            put64(b, en->n);
            put64(b, en->n);
        }
        put64(b, m->off);
    }
}

unsigned char *zip_writer_build(zip_writer *w, size_t *size) {
    bytes b = {0};
    wmeta *meta = xcalloc((size_t)w->n + 1, sizeof *meta);
    for (int i = 0; i < w->n; i++) {
        const zip_wentry *en = &w->ents[i];
        meta[i].off = b.len;
        meta[i].crc = crc_big(en->data, en->n);
        meta[i].z64 = w->force_zip64 || (uint64_t)en->n >= 0xFFFFFFFFu;
        local_header(&b, en, &meta[i]);
        put(&b, en->data, en->n);
    }
    uint64_t cd_off = b.len;
    for (int i = 0; i < w->n; i++) central_header(&b, &w->ents[i], &meta[i]);
    uint64_t cd_size = b.len - cd_off;
    int z64 = w->force_zip64 || w->n >= 0xFFFF || cd_off >= 0xFFFFFFFFu || cd_size >= 0xFFFFFFFFu;
    if (z64) {
        uint64_t rec = b.len;
        put32(&b, SIG_EOCD64);
        put64(&b, EOCD64_LEN - 12);
        put16(&b, 45);
        put16(&b, 45);
        put32(&b, 0);
        put32(&b, 0);
        put64(&b, (uint64_t)w->n);
        put64(&b, (uint64_t)w->n);
        put64(&b, cd_size);
        put64(&b, cd_off);
        put32(&b, SIG_LOC64);
        put32(&b, 0);
        put64(&b, rec);
        put32(&b, 1);
    }
    put32(&b, SIG_EOCD);
    put16(&b, 0);
    put16(&b, 0);
    put16(&b, z64 ? 0xFFFFu : (uint32_t)w->n);
    put16(&b, z64 ? 0xFFFFu : (uint32_t)w->n);
    put32(&b, z64 ? 0xFFFFFFFFu : (uint32_t)cd_size);
    put32(&b, z64 ? 0xFFFFFFFFu : (uint32_t)cd_off);
    put16(&b, 0);
    free(meta);
    *size = b.len;
    return (unsigned char *)b.p;
}

int zip_writer_save(zip_writer *w, const char *path, trm_err *e) {
    size_t n;
    unsigned char *buf = zip_writer_build(w, &n);
    int rc = trm_write_file_atomic(path, buf, n, e);
    free(buf);
    return rc;
}
