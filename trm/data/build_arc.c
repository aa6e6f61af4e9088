/* build_arc.c — `trm data arc`: Kaggle ARC JSON → TRM dataset, as the reference's
 * build_arc_dataset.py (per-subset shuffle, dihedral+colour augmentations de-duplicated by
 * puzzle hash, translation of all but one example per training puzzle, EOS row/column).
 * Augmentations are kept as (transform, colour map) pairs and applied while the token
 * arrays are streamed to disk as uint8, so memory stays small with num_aug = 1000. */
#include "build_arc.h"

#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arc.h"
#include "config/config.h"
#include "dataset_writer.h"
#include "npy.h"

#define AUG_RETRIES_FACTOR 5

typedef struct {
    arc_grid in, out;
    int is_test;
    int has_out;
} arc_example;

typedef struct {
    char *name;
    const char *file;       /* challenges file, for messages */
    arc_example *ex;
    int nex;
    int test_first;         /* "test" came before "train" in the JSON object */
    int to_test;            /* its test examples go to the test split */
    arc_aug *members;       /* members[0] is the identity (the puzzle itself) */
    int nmembers;
} arc_puzzle;

typedef struct {
    const trm_arc_opts *o;
    arc_puzzle *pz;         /* in processing order (subsets in order, each shuffled) */
    int npz;
    int64_t cappz;
    char **files;           /* challenges paths, owned */
    int nfiles;
    trm_rng rng;
    arc_htab ids;           /* sha256(name) → id */
    char **id_names;        /* id - start → name */
    int64_t nids, capids;
} arc_ctx;

/* ---- loading -------------------------------------------------------------------------------- */

static cfg_node *load_json(const char *path, trm_err *e) {
    size_t len;
    char *text = trm_read_file_max(path, ARC_MAX_JSON_BYTES, &len, e);
    if (!text) return NULL;
    cfg_node *root = cfg_parse(text, len, path, e);
    free(text);
    if (root && root->type != CFG_MAP) {
        trm_errf(e, "%s: expected a JSON object of puzzles", path);
        cfg_free(root);
        return NULL;
    }
    return root;
}

static int load_examples(arc_puzzle *p, const cfg_node *list, int is_test, const char *path, trm_err *e) {
    if (list->type != CFG_LIST)
        return trm_errf(e, "%s: puzzle %s: '%s' is not a list", path, p->name, is_test ? "test" : "train");
    p->ex = xrealloc(p->ex, (size_t)(p->nex + list->n) * sizeof *p->ex);
    for (int i = 0; i < list->n; i++) {
        const cfg_node *item = list->items[i];
        arc_example *x = &p->ex[p->nex];
        memset(x, 0, sizeof *x);
        x->is_test = is_test;
        if (item->type != CFG_MAP)
            return trm_errf(e, "%s: puzzle %s: %s example %d is not an object", path, p->name,
                            is_test ? "test" : "train", i);
        char *what = xasprintf("%s: puzzle %s: %s example %d input", path, p->name, is_test ? "test" : "train", i);
        int rc = arc_grid_from_cfg(cfg_get(item, "input"), &x->in, what, e);
        free(what);
        if (rc) return -1;
        const cfg_node *out = cfg_get(item, "output");
        if (out) {
            what = xasprintf("%s: puzzle %s: %s example %d output", path, p->name, is_test ? "test" : "train", i);
            rc = arc_grid_from_cfg(out, &x->out, what, e);
            free(what);
            if (rc) return -1;
            x->has_out = 1;
        } else if (!is_test) {
            return trm_errf(e, "%s: puzzle %s: train example %d has no output", path, p->name, i);
        }
        p->nex++;
    }
    return 0;
}

static int load_puzzle(arc_puzzle *p, const cfg_node *n, const char *path, trm_err *e) {
    if (n->type != CFG_MAP) return trm_errf(e, "%s: puzzle %s is not an object", path, p->name);
    int seen_train = 0, seen_test = 0;
    for (int i = 0; i < n->n; i++) {
        const char *k = n->items[i]->key;
        int is_test = !strcmp(k, "test");
        if (!is_test && strcmp(k, "train"))
            return trm_errf(e, "%s: puzzle %s: unexpected key '%s' (expected train, test)", path, p->name, k);
        if (is_test && !seen_train) p->test_first = 1;
        seen_train |= !is_test, seen_test |= is_test;
        if (load_examples(p, n->items[i], is_test, path, e)) return -1;
    }
    if (!seen_train || !seen_test) return trm_errf(e, "%s: puzzle %s needs both 'train' and 'test'", path, p->name);
    return 0;
}

static int cmp_node_key(const void *a, const void *b) {
    return strcmp((*(const cfg_node *const *)a)->key, (*(const cfg_node *const *)b)->key);
}

/* The solutions' entries sorted by puzzle name (keys are distinct: the parser refuses a
 * repeated one), so that finding each puzzle's costs log n, not n. */
static const cfg_node **sorted_solutions(const cfg_node *sols) {
    if (!sols) return NULL;
    const cfg_node **s = xmalloc(((size_t)sols->n + 1) * sizeof *s);
    for (int i = 0; i < sols->n; i++) s[i] = sols->items[i];
    qsort(s, (size_t)sols->n, sizeof *s, cmp_node_key);
    return s;
}

/* Fills test outputs from the solutions file (a list of grids per puzzle, one per test
 * input) or, without one, with [[0]] as the reference does. */
static int apply_solutions(arc_puzzle *p, const cfg_node *sols, const cfg_node **sorted, const char *spath,
                           trm_err *e) {
    if (!sols) {
        for (int i = 0; i < p->nex; i++)
            if (!p->ex[i].has_out) {
                p->ex[i].out.rows = p->ex[i].out.cols = 1;
                p->ex[i].out.c[0] = 0;
                p->ex[i].has_out = 1;
            }
        return 0;
    }
    /* By exact key (cfg_get would split dotted names). */
    const cfg_node key = {.key = p->name}, *kp = &key;
    const cfg_node **hit = bsearch(&kp, sorted, (size_t)sols->n, sizeof *sorted, cmp_node_key);
    const cfg_node *list = hit ? *hit : NULL;
    if (!list) return trm_errf(e, "%s: no solutions for puzzle %s", spath, p->name);
    if (list->type != CFG_LIST) return trm_errf(e, "%s: solutions of puzzle %s are not a list", spath, p->name);
    int t = 0;
    for (int i = 0; i < p->nex; i++) {
        if (!p->ex[i].is_test) continue;
        if (t < list->n) {
            char *what = xasprintf("%s: puzzle %s: solution %d", spath, p->name, t);
            int rc = arc_grid_from_cfg(list->items[t], &p->ex[i].out, what, e);
            free(what);
            if (rc) return -1;
            p->ex[i].has_out = 1;
        }
        t++;
    }
    if (list->n > t)
        return trm_errf(e, "%s: puzzle %s has %d solutions for %d test inputs", spath, p->name, list->n, t);
    for (int i = 0; i < p->nex; i++)
        if (!p->ex[i].has_out) return trm_errf(e, "%s: puzzle %s: test input has no solution", spath, p->name);
    return 0;
}

static int is_test_subset(const trm_arc_opts *o, const char *subset) {
    const char *base = strrchr(o->input_file_prefix, '/');
    base = base ? base + 1 : o->input_file_prefix;
    char *full = xasprintf("%s_%s", base, subset);
    int hit = 0;
    const char *names[2] = {o->test_set_name, o->test_set_name2};
    for (int i = 0; i < 2; i++)
        if (names[i] && (!strcmp(names[i], subset) || !strcmp(names[i], full))) hit = 1;
    free(full);
    return hit;
}

static int load_subset(arc_ctx *c, const char *subset, trm_err *e) {
    const trm_arc_opts *o = c->o;
    char *cpath = xasprintf("%s_%s_challenges.json", o->input_file_prefix, subset);
    char *spath = xasprintf("%s_%s_solutions.json", o->input_file_prefix, subset);
    c->files = xrealloc(c->files, (size_t)(c->nfiles + 1) * sizeof *c->files);
    c->files[c->nfiles++] = cpath;
    cfg_node *ch = load_json(cpath, e), *sols = NULL;
    int rc = ch ? 0 : -1;
    if (!rc && trm_file_exists(spath)) rc = (sols = load_json(spath, e)) ? 0 : -1;
    else if (!rc && !o->quiet) fprintf(stderr, "%s solutions not found, filling with dummy\n", subset);
    int first = c->npz, to_test = is_test_subset(o, subset);
    const cfg_node **sorted = sorted_solutions(sols);
    for (int i = 0; !rc && i < ch->n; i++) {
        c->pz = arc_reserve(c->pz, &c->cappz, c->npz, sizeof *c->pz);
        arc_puzzle *p = &c->pz[c->npz++];
        memset(p, 0, sizeof *p);
        p->name = xstrdup(ch->items[i]->key);
        p->file = cpath;
        p->to_test = to_test;
        rc = load_puzzle(p, ch->items[i], cpath, e);
        if (!rc) rc = apply_solutions(p, sols, sorted, spath, e);
    }
    free(sorted);
    /* The reference shuffles each subset's puzzles before assigning and augmenting them. */
    int n = c->npz - first;
    if (!rc && n > 1) {
        int64_t *perm = xmalloc((size_t)n * sizeof *perm);
        arc_puzzle *tmp = xmalloc((size_t)n * sizeof *tmp);
        trm_rng_permutation(&c->rng, perm, n);
        for (int i = 0; i < n; i++) tmp[i] = c->pz[first + perm[i]];
        memcpy(c->pz + first, tmp, (size_t)n * sizeof *tmp);
        free(perm);
        free(tmp);
    }
    cfg_free(ch);
    cfg_free(sols);
    free(spath);
    return rc;
}

/* ---- augmentation --------------------------------------------------------------------------- */

static int cmp64(const void *a, const void *b) { return memcmp(a, b, 64); }

/* The reference's puzzle_hash: a hash of the sorted (input hash, output hash) pairs of all
 * examples of all parts — equal exactly when the example multisets are equal. */
static void puzzle_hash(const arc_puzzle *p, const arc_aug *a, uint8_t *scratch, uint8_t out[32]) {
    arc_grid g;
    for (int i = 0; i < p->nex; i++) {
        arc_aug_apply(a, &p->ex[i].in, &g);
        arc_grid_hash(&g, scratch + 64 * i);
        arc_aug_apply(a, &p->ex[i].out, &g);
        arc_grid_hash(&g, scratch + 64 * i + 32);
    }
    qsort(scratch, (size_t)p->nex, 64, cmp64);
    arc_sha256(scratch, (size_t)p->nex * 64, out);
}

static void augment(arc_ctx *c, arc_puzzle *p, arc_htab *seen) {
    int64_t num_aug = c->o->num_aug;
    p->members = xmalloc((size_t)(num_aug + 1) * sizeof *p->members);
    p->nmembers = 1;
    p->members[0].tid = 0;
    for (int i = 0; i < 10; i++) p->members[0].perm[i] = (uint8_t)i;
    if (num_aug <= 0) return;
    uint8_t *scratch = xmalloc((size_t)p->nex * 64 + 1), h[32];
    arc_htab_clear(seen);
    puzzle_hash(p, &p->members[0], scratch, h);
    arc_htab_put(seen, h, 0);
    for (int64_t trial = 0; trial < AUG_RETRIES_FACTOR * num_aug; trial++) {
        arc_aug a;
        int64_t pm[9];
        a.tid = (int)trm_rng_below(&c->rng, 8);
        trm_rng_permutation(&c->rng, pm, 9);
        a.perm[0] = 0;
        for (int i = 0; i < 9; i++) a.perm[i + 1] = (uint8_t)(pm[i] + 1);
        puzzle_hash(p, &a, scratch, h);
        if (arc_htab_put(seen, h, p->nmembers)) p->members[p->nmembers++] = a;
        if (p->nmembers >= num_aug + 1) break;
    }
    if (p->nmembers < num_aug + 1 && !c->o->quiet)
        fprintf(stderr, "[Puzzle %s] augmentation not full, only %d\n", p->name, p->nmembers);
    free(scratch);
}

/* ---- identifiers ------------------------------------------------------------------------------ */

static int64_t id_of(arc_ctx *c, char *name /* taken */) {
    uint8_t h[32];
    arc_sha256(name, strlen(name), h);
    int64_t *v = arc_htab_get(&c->ids, h);
    if (v) {
        free(name);
        return *v;
    }
    int64_t id = c->o->puzzle_identifiers_start + c->nids;
    arc_htab_put(&c->ids, h, id);
    c->id_names = arc_reserve(c->id_names, &c->capids, c->nids, sizeof *c->id_names);
    c->id_names[c->nids++] = name;
    return id;
}

static char *member_name(const arc_puzzle *p, int m) {
    return m == 0 ? xstrdup(p->name) : arc_aug_name(p->name, &p->members[m]);
}

/* ---- writing ----------------------------------------------------------------------------------- */

/* Whether example i of p belongs to the part of p that goes to split (train/test). */
static int in_part(const arc_puzzle *p, int i, int test_split) {
    if (test_split) return p->to_test && p->ex[i].is_test;
    return !p->to_test || !p->ex[i].is_test;
}

static int part_size(const arc_puzzle *p, int test_split) {
    int n = 0;
    for (int i = 0; i < p->nex; i++) n += in_part(p, i, test_split);
    return n;
}

/* The examples of the part, in JSON key order (train/test as in the file); returns the count. */
static int part_order(const arc_puzzle *p, int test_split, int *order) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int want_test = p->test_first ? pass == 0 : pass == 1;
        for (int i = 0; i < p->nex; i++)
            if (p->ex[i].is_test == want_test && in_part(p, i, test_split)) order[n++] = i;
    }
    return n;
}

static FILE *open_npy_u8(const char *path, int64_t rows, trm_err *e) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        trm_errf(e, "%s: cannot create: %s", path, strerror(errno));
        return NULL;
    }
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (%lld, %d), }",
                     (long long)rows, ARC_SEQ_LEN);
    int total = (10 + n + 1 + 63) / 64 * 64, len = total - 10;
    char hdr[256];
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(len & 0xff);
    hdr[9] = (char)(len >> 8);
    memcpy(hdr + 10, dict, (size_t)n);
    memset(hdr + 10 + n, ' ', (size_t)(len - n - 1));
    hdr[total - 1] = '\n';
    if (fwrite(hdr, 1, (size_t)total, f) != (size_t)total) {
        fclose(f);
        trm_errf(e, "%s: write failed", path);
        return NULL;
    }
    return f;
}

static int close_file(FILE *f, const char *path, int rc, trm_err *e) {
    if (!f) return rc;
    if (ferror(f) && !rc) rc = trm_errf(e, "%s: write failed", path);
    if (fclose(f) && !rc) rc = trm_errf(e, "%s: write failed: %s", path, strerror(errno));
    return rc;
}

static int write_meta(const char *sdir, int64_t nids_total, int64_t groups, int64_t puzzles, int64_t examples,
                      trm_err *e) {
    trm_dataset_meta m = {.pad_id = 0, .has_ignore_label = 1, .ignore_label_id = 0, .blank_identifier_id = 0,
                          .vocab_size = 12, .seq_len = ARC_SEQ_LEN, .num_puzzle_identifiers = nids_total,
                          .total_groups = groups, .total_puzzles = puzzles,
                          .mean_puzzle_examples = puzzles ? (double)examples / (double)puzzles : 0.0};
    static const char *const sets[1] = {"all"};
    return trm_dw_write_metadata(sdir, &m, sets, 1, e);
}

static int write_index(const char *sdir, const char *field, const int32_t *v, int64_t n, trm_err *e) {
    char *name = xasprintf("all__%s.npy", field), *path = trm_path_join(sdir, name);
    int rc = npy_write(path, NPY_I32, 1, &n, v, e);
    free(name);
    free(path);
    return rc;
}

static int write_split(arc_ctx *c, const char *dir, int test_split, trm_err *e) {
    const char *split = test_split ? "test" : "train";
    int64_t nex = 0, npz = 0, ngroups = 0;
    for (int i = 0; i < c->npz; i++) {
        const arc_puzzle *p = &c->pz[i];
        if (test_split && !p->to_test) continue;
        nex += (int64_t)p->nmembers * part_size(p, test_split);
        npz += p->nmembers;
        ngroups++;
    }
    if (ngroups == 0) return 0; /* the reference creates a split only when something goes there */
    char *sdir = trm_path_join(dir, split), *pin = trm_path_join(sdir, "all__inputs.npy"),
         *plab = trm_path_join(sdir, "all__labels.npy");
    int rc = trm_mkdirs(sdir, e);
    FILE *fin = rc ? NULL : open_npy_u8(pin, nex, e), *flab = fin ? open_npy_u8(plab, nex, e) : NULL;
    if (!flab) rc = -1;
    int32_t *pid = xmalloc((size_t)npz * sizeof *pid), *pidx = xmalloc((size_t)(npz + 1) * sizeof *pidx),
            *gidx = xmalloc((size_t)(ngroups + 1) * sizeof *gidx);
    int64_t ex_id = 0, pz_id = 0, g_id = 0;
    pidx[0] = gidx[0] = 0;
    int *order = NULL;
    trm_progress pg;
    trm_progress_start(&pg, test_split ? "[arc] test" : "[arc] train", ngroups, !rc && !c->o->quiet);
    for (int i = 0; !rc && i < c->npz; i++) {
        const arc_puzzle *p = &c->pz[i];
        if (test_split && !p->to_test) continue;
        order = xrealloc(order, (size_t)(p->nex + 1) * sizeof *order);
        int n = part_order(p, test_split, order);
        for (int m = 0; m < p->nmembers; m++) {
            int no_aug = (int)trm_rng_below(&c->rng, (uint64_t)n);
            for (int k = 0; k < n; k++) {
                const arc_example *x = &p->ex[order[k]];
                arc_grid gi, go;
                arc_aug_apply(&p->members[m], &x->in, &gi);
                arc_aug_apply(&p->members[m], &x->out, &go);
                int pr = 0, pc = 0;
                if (!test_split && k != no_aug) {
                    int mr = gi.rows > go.rows ? gi.rows : go.rows, mc = gi.cols > go.cols ? gi.cols : go.cols;
                    pr = (int)trm_rng_below(&c->rng, (uint64_t)(ARC_MAX_GRID - mr + 1));
                    pc = (int)trm_rng_below(&c->rng, (uint64_t)(ARC_MAX_GRID - mc + 1));
                }
                uint8_t ti[ARC_SEQ_LEN], tl[ARC_SEQ_LEN];
                arc_tokenize(&gi, pr, pc, ti);
                arc_tokenize(&go, pr, pc, tl);
                fwrite(ti, 1, ARC_SEQ_LEN, fin);
                fwrite(tl, 1, ARC_SEQ_LEN, flab);
                ex_id++;
            }
            pid[pz_id] = (int32_t)id_of(c, member_name(p, m));
            pidx[++pz_id] = (int32_t)ex_id;
        }
        gidx[++g_id] = (int32_t)pz_id;
        trm_progress_update(&pg, g_id);
    }
    trm_progress_finish(&pg);
    free(order);
    rc = close_file(fin, pin, rc, e);
    rc = close_file(flab, plab, rc, e);
    if (!rc) rc = write_index(sdir, "puzzle_identifiers", pid, npz, e);
    if (!rc) rc = write_index(sdir, "puzzle_indices", pidx, npz + 1, e);
    if (!rc) rc = write_index(sdir, "group_indices", gidx, ngroups + 1, e);
    /* Identifiers are all assigned while writing the train split (it holds every puzzle
     * name), so the count is final here. */
    if (!rc) rc = write_meta(sdir, c->o->puzzle_identifiers_start + c->nids, ngroups, npz, nex, e);
    free(pid);
    free(pidx);
    free(gidx);
    free(pin);
    free(plab);
    free(sdir);
    return rc;
}

static void write_examples_json(json_buf *b, const arc_puzzle *p, int want_test) {
    json_arr_begin(b);
    for (int i = 0; i < p->nex; i++) {
        if (p->ex[i].is_test != want_test) continue;
        json_obj_begin(b);
        json_key(b, "input");
        arc_grid_to_json(b, &p->ex[i].in);
        json_key(b, "output");
        arc_grid_to_json(b, &p->ex[i].out);
        json_obj_end(b);
    }
    json_arr_end(b);
}

/* Test-set puzzles as loaded (solutions filled in), keyed by name; a repeated name keeps
 * its first position and its last content, like a Python dict. */
static int write_test_puzzles(const arc_ctx *c, const char *dir, trm_err *e) {
    json_buf b;
    json_buf_init(&b);
    json_obj_begin(&b);
    for (int i = 0; i < c->npz; i++) {
        const arc_puzzle *p = &c->pz[i];
        int dup_before = 0;
        for (int j = 0; j < i && !dup_before; j++) dup_before = c->pz[j].to_test && !strcmp(c->pz[j].name, p->name);
        if (!p->to_test || dup_before) continue;
        for (int j = c->npz - 1; j > i; j--)
            if (c->pz[j].to_test && !strcmp(c->pz[j].name, p->name)) {
                p = &c->pz[j];
                break;
            }
        json_key(&b, p->name);
        json_obj_begin(&b);
        for (int pass = 0; pass < 2; pass++) {
            int want_test = p->test_first ? pass == 0 : pass == 1;
            json_key(&b, want_test ? "test" : "train");
            write_examples_json(&b, p, want_test);
        }
        json_obj_end(&b);
    }
    json_obj_end(&b);
    return trm_dw_write_json(dir, "test_puzzles.json", &b, e);
}

static int write_identifiers(const arc_ctx *c, const char *dir, trm_err *e) {
    int64_t n = c->o->puzzle_identifiers_start + c->nids;
    if (n > INT32_MAX) return trm_errf(e, "too many puzzle identifiers (%lld)", (long long)n);
    const char **names = xmalloc((size_t)n * sizeof *names);
    for (int64_t i = 0; i < n; i++)
        names[i] = i < c->o->puzzle_identifiers_start ? "<blank>" : c->id_names[i - c->o->puzzle_identifiers_start];
    int rc = trm_dw_write_identifiers(dir, names, (int)n, e);
    free(names);
    return rc;
}

static void ctx_free(arc_ctx *c) {
    for (int i = 0; i < c->npz; i++) free(c->pz[i].name), free(c->pz[i].ex), free(c->pz[i].members);
    free(c->pz);
    for (int i = 0; i < c->nfiles; i++) free(c->files[i]);
    free(c->files);
    for (int64_t i = 0; i < c->nids; i++) free(c->id_names[i]);
    free(c->id_names);
    arc_htab_free(&c->ids);
}

static int check_opts(const trm_arc_opts *o, trm_err *e) {
    if (!o->input_file_prefix) return trm_errf(e, "--input-file-prefix is required");
    if (!o->out) return trm_errf(e, "--out DIR is required");
    if (o->nsubsets < 1) return trm_errf(e, "--subsets needs at least one subset name");
    if (!o->test_set_name) return trm_errf(e, "--test-set-name is required");
    if (o->num_aug < 0 || o->num_aug > 100000) return trm_errf(e, "--num-aug must be in 0..100000");
    if (o->puzzle_identifiers_start < 1 || o->puzzle_identifiers_start > INT32_MAX / 2)
        return trm_errf(e, "--puzzle-identifiers-start must be at least 1 (0 is the blank identifier)");
    return 0;
}

/* Every puzzle part written must hold an example (the reference draws randint(0, n)). */
static int check_parts(const arc_ctx *c, trm_err *e) {
    for (int i = 0; i < c->npz; i++) {
        const arc_puzzle *p = &c->pz[i];
        if (part_size(p, 0) == 0) return trm_errf(e, "%s: puzzle %s has no training examples", p->file, p->name);
        if (p->to_test && part_size(p, 1) == 0)
            return trm_errf(e, "%s: puzzle %s has no test examples", p->file, p->name);
    }
    return 0;
}

int trm_arc_read(const trm_arc_opts *o, trm_err *e) {
    if (!o->input_file_prefix || o->nsubsets < 1) return trm_errf(e, "--input-file-prefix and --subsets are required");
    arc_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    trm_rng_init(&c.rng, o->seed, 0);
    int rc = 0;
    for (int i = 0; !rc && i < o->nsubsets; i++) rc = load_subset(&c, o->subsets[i], e);
    if (!rc) rc = check_parts(&c, e);
    ctx_free(&c);
    if (rc) trm_err_oneline(e); /* messages quote the files' keys */
    return rc;
}

int trm_build_arc(const trm_arc_opts *o, trm_err *e) {
    if (check_opts(o, e)) return -1;
    arc_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    trm_rng_init(&c.rng, o->seed, 0);
    arc_htab_init(&c.ids);
    char *tmp = NULL;
    int rc = trm_dw_begin(o->out, o->force, &tmp, e);
    for (int i = 0; !rc && i < o->nsubsets; i++) rc = load_subset(&c, o->subsets[i], e);
    if (!rc) rc = check_parts(&c, e);
    if (rc) trm_err_oneline(e); /* messages quote the files' keys */
    if (!rc && !o->quiet) fprintf(stderr, "Total puzzles: %d\n", c.npz);
    arc_htab seen;
    arc_htab_init(&seen);
    double t0 = trm_now_seconds();
    trm_progress pg;
    trm_progress_start(&pg, "[arc] augment", c.npz, !rc && !o->quiet);
    for (int i = 0; !rc && i < c.npz; i++) {
        augment(&c, &c.pz[i], &seen);
        trm_progress_update(&pg, i + 1);
    }
    trm_progress_finish(&pg);
    arc_htab_free(&seen);
    if (!rc) rc = write_split(&c, tmp, 0, e);
    if (!rc) rc = write_split(&c, tmp, 1, e);
    if (!rc) rc = write_identifiers(&c, tmp, e);
    if (!rc) rc = write_test_puzzles(&c, tmp, e);
    if (!rc) rc = trm_dw_commit(tmp, o->out, o->force, e);
    if (rc && tmp) trm_remove_tree(tmp, NULL);
    if (!rc && !o->quiet)
        fprintf(stderr, "Total puzzle IDs (including <blank>): %lld; %.1fs, peak memory %.0f MiB\n",
                (long long)(o->puzzle_identifiers_start + c.nids), trm_now_seconds() - t0,
                (double)trm_peak_rss_bytes() / 1048576.0);
    free(tmp);
    ctx_free(&c);
    return rc;
}

/* ---- command line ----------------------------------------------------------------------------- */

int trm_data_arc(int argc, char **argv, trm_err *e) {
    trm_arc_opts o = {.test_set_name2 = "evaluation2", .num_aug = 1000, .seed = 42, .puzzle_identifiers_start = 1};
    const char **subsets = xmalloc((size_t)(argc + 1) * sizeof *subsets);
    const trm_opt opts[] = {
        TRM_OPT("--subsets", TRM_OPT_LIST, subsets, .n = &o.nsubsets),
        TRM_OPT("--force", TRM_OPT_FLAG, &o.force),
        TRM_OPT("--input-file-prefix", TRM_OPT_STR, &o.input_file_prefix),
        TRM_OPT("--test-set-name", TRM_OPT_STR, &o.test_set_name),
        TRM_OPT("--test-set-name2", TRM_OPT_STR, &o.test_set_name2),
        TRM_OPT("--out", TRM_OPT_STR, &o.out),
        TRM_OPT("--num-aug", TRM_OPT_I64, &o.num_aug),
        TRM_OPT("--seed", TRM_OPT_U64, &o.seed),
        TRM_OPT("--puzzle-identifiers-start", TRM_OPT_I64, &o.puzzle_identifiers_start),
        TRM_OPT_END,
    };
    int rc = trm_parse_opts(argc, argv, opts, e);
    o.subsets = subsets;
    if (!rc) rc = trm_build_arc(&o, e);
    if (!rc) printf("wrote %s\n", o.out);
    free(subsets);
    return rc;
}
