/* torch_pt.c — torch.save files on top of zip.c and pickle.c (see torch_pt.h). The layout is
 * torch's: every member under one top folder (torch names it after the file), data.pkl with
 * the pickled dict, data/<key> with each storage's raw little-endian bytes, byteorder and
 * version records. Strided views are copied out, within a budget: the storages' own bytes
 * plus PT_MAX_EXPANDED, so views cannot turn a small file into terabytes. */
#include "torch_pt.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"
#include "zip.h"

#define PT_MAX_EXPANDED ((uint64_t)64 << 20) /* bytes strided views may copy beyond the storages' */

static void own(st_file *f, void *p) {
    f->owned = xrealloc(f->owned, (size_t)(f->nowned + 1) * sizeof *f->owned);
    f->owned[f->nowned++] = p;
}

/* The legacy (before PyTorch 1.6) format starts with a pickled magic number. */
static int is_legacy_torch(const unsigned char *p, size_t n) { return n >= 3 && p[0] == 0x80 && p[1] <= 5 && p[2] == 0x8a; }

/* The folder every member lives in (torch: the file's name without extension). */
static char *archive_prefix(const zip_reader *z) {
    if (!z->n) return NULL;
    const char *slash = strchr(z->ents[0].name, '/');
    return slash ? xstrndup(z->ents[0].name, (size_t)(slash - z->ents[0].name) + 1) : NULL;
}

/* Each storage's bytes, by its member's index in the archive, once read. */
typedef struct {
    const unsigned char **data;
    uint64_t storage_bytes; /* of the storages read: the copy budget of strided views */
    uint64_t copied;        /* bytes strided views copied so far */
} storage_cache;

static int find_storage(st_file *f, const zip_reader *z, const char *prefix, const pk_tensor *t, storage_cache *cache,
                        const unsigned char **data, const char *path, trm_err *e) {
    char *name = xasprintf("%sdata/%s", prefix, t->storage);
    const zip_entry *en = zip_find(z, name);
    free(name);
    if (!en) return trm_errf(e, "%s: tensor '%s': its storage data/%s is missing from the archive", path, t->name, t->storage);
    /* checked for every tensor, not only the storage's first: each says its storage's size
     * and type again, and its view was checked against what it says */
    uint64_t es = (uint64_t)st_dtype_size(t->dtype);
    if (en->usize % es || en->usize / es != (uint64_t)t->storage_numel)
        return trm_errf(e, "%s: tensor '%s': storage data/%s has %" PRIu64 " bytes, not %" PRId64 " elements of %s", path,
                        t->name, t->storage, en->usize, t->storage_numel, st_dtype_name(t->dtype));
    if (cache->data[en - z->ents]) {
        *data = cache->data[en - z->ents];
        return 0;
    }
    void *owned;
    if (zip_member(z, en, data, &owned, e)) return -1;
    if (owned) own(f, owned);
    cache->data[en - z->ents] = *data;
    cache->storage_bytes += en->usize;
    return 0;
}

static int is_contiguous(const pk_tensor *t) {
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != want) return 0;
        want *= t->shape[d];
    }
    return 1;
}

/* A strided view copied out element by element (a slice, a transpose, an expanded tensor),
 * or NULL when the memory cannot be had. */
static void *gather(const pk_tensor *t, const unsigned char *base, size_t es, size_t numel) {
    unsigned char *out = malloc(numel * es + 1); /* the budget bounds numel * es */
    if (!out) return NULL;
    int64_t idx[PK_MAX_DIMS] = {0};
    for (size_t k = 0; k < numel; k++) {
        int64_t off = t->offset;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        memcpy(out + k * es, base + (size_t)off * es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

/* A strided view's copy, within the budget: the storages' bytes plus PT_MAX_EXPANDED. */
static int copy_view(st_file *f, storage_cache *c, const pk_tensor *t, const unsigned char *base, size_t numel,
                     st_tensor *s, const char *path, trm_err *e) {
    size_t es = (size_t)st_dtype_size(t->dtype);
    uint64_t bytes = (uint64_t)numel * es; /* numel <= 2^63 / 8 here: checked by the caller */
    if (c->copied + bytes > c->storage_bytes + PT_MAX_EXPANDED)
        return trm_errf(e, "%s: tensor '%s': strided views would copy more than the storages' %" PRIu64 " bytes plus "
                           "%" PRIu64 " MiB (the limit; views with stride 0 or shared storages?)",
                        path, t->name, c->storage_bytes, PT_MAX_EXPANDED >> 20);
    void *g = gather(t, base, es, numel);
    if (!g)
        return trm_errf(e, "%s: tensor '%s': cannot allocate %" PRIu64 " bytes for its strided view", path, t->name,
                        bytes);
    c->copied += bytes;
    own(f, g);
    s->data = g;
    return 0;
}

static int fill_tensors(st_file *f, const zip_reader *z, const char *prefix, const pk_tensors *pt, const char *path,
                        trm_err *e) {
    storage_cache cache = {.data = xcalloc((size_t)z->n + 1, sizeof *cache.data)};
    int rc = 0;
    f->tensors = xcalloc((size_t)pt->n + 1, sizeof *f->tensors);
    for (int i = 0; i < pt->n && !rc; i++) {
        const pk_tensor *t = &pt->t[i];
        const unsigned char *base;
        if (find_storage(f, z, prefix, t, &cache, &base, path, e)) {
            rc = -1;
            break;
        }
        st_tensor *s = &f->tensors[f->ntensors++];
        s->name = xstrdup(t->name);
        s->dtype = t->dtype;
        s->ndim = t->ndim;
        size_t numel = 1, es = (size_t)st_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            s->shape[d] = t->shape[d];
            numel *= (size_t)t->shape[d]; /* no overflow of int64: checked by the pickle reader */
        }
        if (numel > SIZE_MAX / 16) {
            rc = trm_errf(e, "%s: tensor '%s': %zu elements are more than this machine can address", path, t->name,
                          numel);
            break;
        }
        s->nbytes = numel * es;
        if (numel == 0) s->data = base;
        else if (is_contiguous(t)) s->data = base + (size_t)t->offset * es; /* in the storage: pickle.c checked */
        else rc = copy_view(f, &cache, t, base, numel, s, path, e);
    }
    free(cache.data);
    return rc;
}

static int open_zip(st_file *f, const char *path, trm_err *e) {
    const unsigned char *b = f->map.data;
    size_t n = f->map.size;
    if (is_legacy_torch(b, n))
        return trm_errf(e, "%s: a torch.save file in the legacy format (PyTorch before 1.6); re-save it with a current "
                           "PyTorch: torch.save(torch.load(f), f2)", path);
    if (!zip_looks_like(b, n)) return trm_errf(e, "%s: not a torch.save file (no zip archive)", path);
    zip_reader z;
    if (zip_open_mem(&z, b, n, path, e)) return -1;
    int rc = -1;
    char *prefix = archive_prefix(&z), *pkl = NULL, *bo = NULL;
    const zip_entry *en;
    if (!prefix) {
        trm_errf(e, "%s: a zip archive but not a torch.save file (its members are not in one folder)", path);
        goto out;
    }
    pkl = xasprintf("%sdata.pkl", prefix);
    if (!(en = zip_find(&z, pkl))) {
        char *consts = xasprintf("%sconstants.pkl", prefix);
        int script = zip_find(&z, consts) != NULL;
        free(consts);
        trm_errf(e, script ? "%s: a TorchScript archive (torch.jit.save), not a torch.save of a state_dict"
                           : "%s: no data.pkl in the archive: not a torch.save file", path);
        goto out;
    }
    bo = xasprintf("%sbyteorder", prefix);
    const zip_entry *boe = zip_find(&z, bo);
    const unsigned char *d;
    void *owned;
    if (boe) {
        if (zip_member(&z, boe, &d, &owned, e)) goto out;
        int little = boe->usize == 6 && !memcmp(d, "little", 6);
        free(owned);
        if (!little) {
            trm_errf(e, "%s: saved on a big-endian machine (byteorder is not 'little'); not supported", path);
            goto out;
        }
    }
    if (zip_member(&z, en, &d, &owned, e)) goto out;
    pk_tensors pt;
    char *what = xasprintf("%s (data.pkl)", path);
    int prc = pk_read_tensors(d, (size_t)en->usize, what, &pt, e);
    free(what);
    free(owned);
    if (prc) goto out;
    rc = fill_tensors(f, &z, prefix, &pt, path, e);
    if (!rc) st_index(f); /* names are distinct: the pickle reader refuses a repeated one */
    pk_tensors_free(&pt);
out:
    free(prefix);
    free(pkl);
    free(bo);
    zip_close(&z);
    return rc;
}

int pt_open(st_file *f, const char *path, trm_err *e) {
    memset(f, 0, sizeof *f);
    if (trm_mmap_open(&f->map, path, e)) return -1;
    if (open_zip(f, path, e)) {
        st_close(f);
        return trm_err_oneline(e); /* messages quote names and strings from the file */
    }
    return 0;
}

int pt_is_torch_file(const char *path) {
    trm_mmap m;
    if (trm_mmap_open(&m, path, NULL)) return 0;
    int yes = zip_looks_like(m.data, m.size) || is_legacy_torch(m.data, m.size);
    trm_mmap_close(&m);
    return yes;
}

int tensor_file_open(st_file *f, const char *path, trm_err *e) {
    return pt_is_torch_file(path) ? pt_open(f, path, e) : st_open(f, path, e);
}

/* ---- writer ----------------------------------------------------------------------------- */

/* torch names the folder after the file (without directories and extension). */
static char *folder_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    char *s = xstrndup(b, n);
    for (char *c = s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_' || *c == '-'))
            *c = '_';
    if (!*s) {
        free(s);
        s = xstrdup("archive");
    }
    return s;
}

int pt_save(const st_writer *w, const char *path, int ordered, trm_err *e) {
    pk_wtensor *wt = xcalloc((size_t)w->ntensors + 1, sizeof *wt);
    char **keys = xcalloc((size_t)w->ntensors + 1, sizeof *keys);
    int rc = 0;
    for (int i = 0; i < w->ntensors && !rc; i++) {
        const st_tensor *t = &w->tensors[i];
        if (!pk_storage_class(t->dtype)) rc = trm_errf(e, "%s: tensor '%s': dtype %s has no torch storage", path, t->name, st_dtype_name(t->dtype));
        else if (t->ndim < 0 || t->ndim > PK_MAX_DIMS) rc = trm_errf(e, "%s: tensor '%s': %d dimensions", path, t->name, t->ndim);
        keys[i] = xasprintf("%d", i);
        wt[i] = (pk_wtensor){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape, .storage = keys[i]};
    }
    if (!rc) {
        size_t plen;
        unsigned char *pkl = pk_write_tensors(wt, w->ntensors, ordered, &plen);
        char *folder = folder_name(path);
        zip_writer z;
        zip_writer_init(&z);
        char *nm = xasprintf("%s/data.pkl", folder);
        zip_writer_add(&z, nm, pkl, plen);
        free(nm);
        static const char fmt_version[] = "1", alignment[] = "64", byteorder[] = "little", version[] = "3\n";
        const char *small[3][2] = {{".format_version", fmt_version}, {".storage_alignment", alignment}, {"byteorder", byteorder}};
        for (int i = 0; i < 3; i++) {
            nm = xasprintf("%s/%s", folder, small[i][0]);
            zip_writer_add(&z, nm, small[i][1], strlen(small[i][1]));
            free(nm);
        }
        for (int i = 0; i < w->ntensors; i++) {
            const st_tensor *t = &w->tensors[i];
            size_t bytes = (size_t)st_dtype_size(t->dtype);
            for (int d = 0; d < t->ndim; d++) bytes *= (size_t)t->shape[d];
            nm = xasprintf("%s/data/%s", folder, keys[i]);
            zip_writer_add(&z, nm, t->data, bytes);
            free(nm);
        }
        nm = xasprintf("%s/version", folder);
        zip_writer_add(&z, nm, version, strlen(version));
        free(nm);
        rc = zip_writer_save(&z, path, e);
        zip_writer_free(&z);
        free(folder);
        free(pkl);
    }
    for (int i = 0; i < w->ntensors; i++) free(keys[i]);
    free(keys);
    free(wt);
    return rc;
}
