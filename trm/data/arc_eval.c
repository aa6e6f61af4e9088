/* arc_eval.c — see arc_eval.h. Predictions are kept as (pred hash, sigmoid(q)) chains per
 * (original name, input hash), plus one copy of each distinct predicted grid, so memory
 * grows with distinct predictions, not with the number of augmentations voted. */
#include "arc_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arc.h"
#include "config/config.h"
#include "util/util.h"

const int arc_eval_pass_ks[ARC_EVAL_NK] = {1, 2, 5, 10, 100, 1000};

typedef struct {
    char *name;
    int ntest;
    arc_grid *in, *out;
} test_puzzle;

typedef struct {
    uint8_t pred[32];
    double q;
    int64_t next; /* next entry of the same (name, input), -1 at the end */
} entry;

typedef struct {
    int64_t first, last;
} chain;

typedef struct {
    int rows, cols;
    int64_t off; /* into pool */
} grid_ref;

struct arc_eval {
    char **ids;
    int64_t nids, blank;
    test_puzzle *tps;
    int ntps;
    arc_htab keys;  /* sha256(orig name, 0, input hash) → chain index */
    chain *chains;
    int64_t nchains, capchains;
    entry *ents;
    int64_t nents, capents;
    arc_htab grids; /* pred hash → grid_ref index */
    grid_ref *grefs;
    int64_t ngrefs, capgrefs;
    uint8_t *pool;
    size_t pool_len, pool_cap;
};

/* ---- loading -------------------------------------------------------------------------------- */

static cfg_node *load_json(const char *dir, const char *file, int optional, trm_err *e) {
    char *path = trm_path_join(dir, file);
    cfg_node *root = NULL;
    if (optional && !trm_file_exists(path)) {
        free(path);
        return NULL;
    }
    size_t len;
    char *text = trm_read_file_max(path, ARC_MAX_JSON_BYTES, &len, e);
    if (text) root = cfg_parse(text, len, path, e);
    free(text);
    free(path);
    return root;
}

static int load_ids(arc_eval *ev, const char *dir, trm_err *e) {
    cfg_node *root = load_json(dir, "identifiers.json", 0, e);
    if (!root) return -1;
    int rc = 0;
    if (root->type != CFG_LIST) rc = trm_errf(e, "%s/identifiers.json: expected a JSON list of names", dir);
    ev->ids = xcalloc((size_t)root->n + 1, sizeof *ev->ids);
    for (int i = 0; !rc && i < root->n; i++) {
        const cfg_node *n = root->items[i];
        if (n->type != CFG_STR) rc = trm_errf(e, "%s/identifiers.json: entry %d is not a string", dir, i);
        else ev->ids[ev->nids++] = xstrdup(n->s);
    }
    cfg_free(root);
    return rc;
}

static int load_blank(arc_eval *ev, const char *dir, trm_err *e) {
    trm_err e2 = {{0}};
    cfg_node *root = load_json(dir, "test/dataset.json", 1, &e2);
    if (!root) {
        if (e2.msg[0]) return trm_errf(e, "%s", e2.msg);
        return 0;
    }
    const cfg_node *b = root->type == CFG_MAP ? cfg_get(root, "blank_identifier_id") : NULL;
    int rc = 0;
    if (b && b->type == CFG_INT) ev->blank = b->i;
    else rc = trm_errf(e, "%s/test/dataset.json: expected an integer blank_identifier_id", dir);
    cfg_free(root);
    return rc;
}

static int load_test_puzzle(test_puzzle *tp, const cfg_node *n, const char *path, trm_err *e) {
    const cfg_node *test = NULL;
    if (n->type == CFG_MAP)
        for (int i = 0; i < n->n; i++)
            if (!strcmp(n->items[i]->key, "test")) test = n->items[i];
    if (!test || test->type != CFG_LIST || test->n < 1)
        return trm_errf(e, "%s: puzzle %s: expected a non-empty 'test' list", path, tp->name);
    tp->in = xmalloc((size_t)test->n * sizeof *tp->in);
    tp->out = xmalloc((size_t)test->n * sizeof *tp->out);
    for (int i = 0; i < test->n; i++) {
        const cfg_node *pair = test->items[i];
        if (pair->type != CFG_MAP) return trm_errf(e, "%s: puzzle %s: test %d is not an object", path, tp->name, i);
        char *what = xasprintf("%s: puzzle %s: test %d", path, tp->name, i);
        char *wi = xasprintf("%s input", what), *wo = xasprintf("%s output", what);
        int rc = arc_grid_from_cfg(cfg_get(pair, "input"), &tp->in[i], wi, e);
        if (!rc) rc = arc_grid_from_cfg(cfg_get(pair, "output"), &tp->out[i], wo, e);
        free(what), free(wi), free(wo);
        if (rc) return -1;
        tp->ntest++;
    }
    return 0;
}

static int load_tests(arc_eval *ev, const char *dir, trm_err *e) {
    cfg_node *root = load_json(dir, "test_puzzles.json", 0, e);
    if (!root) return -1;
    char *path = trm_path_join(dir, "test_puzzles.json");
    int rc = root->type == CFG_MAP ? 0 : trm_errf(e, "%s: expected a JSON object of puzzles", path);
    if (!rc) ev->tps = xcalloc((size_t)root->n + 1, sizeof *ev->tps);
    for (int i = 0; !rc && i < root->n; i++) {
        test_puzzle *tp = &ev->tps[ev->ntps++];
        tp->name = xstrdup(root->items[i]->key);
        rc = load_test_puzzle(tp, root->items[i], path, e);
    }
    free(path);
    cfg_free(root);
    return rc;
}

arc_eval *arc_eval_open(const char *data_dir, trm_err *e) {
    arc_eval *ev = xcalloc(1, sizeof *ev);
    arc_htab_init(&ev->keys);
    arc_htab_init(&ev->grids);
    if (load_ids(ev, data_dir, e) || load_blank(ev, data_dir, e) || load_tests(ev, data_dir, e)) {
        arc_eval_free(ev);
        return NULL;
    }
    return ev;
}

void arc_eval_reset(arc_eval *ev) {
    arc_htab_clear(&ev->keys);
    arc_htab_clear(&ev->grids);
    ev->nchains = ev->nents = ev->ngrefs = 0;
    ev->pool_len = 0;
}

void arc_eval_free(arc_eval *ev) {
    if (!ev) return;
    for (int64_t i = 0; i < ev->nids; i++) free(ev->ids[i]);
    free(ev->ids);
    for (int i = 0; i < ev->ntps; i++) free(ev->tps[i].name), free(ev->tps[i].in), free(ev->tps[i].out);
    free(ev->tps);
    arc_htab_free(&ev->keys);
    arc_htab_free(&ev->grids);
    free(ev->chains);
    free(ev->ents);
    free(ev->grefs);
    free(ev->pool);
    free(ev);
}

/* ---- predictions ------------------------------------------------------------------------------ */

static void key_of(const char *name, const uint8_t input_hash[32], uint8_t out[32]) {
    size_t n = strlen(name);
    uint8_t *buf = xmalloc(n + 33);
    memcpy(buf, name, n);
    buf[n] = 0;
    memcpy(buf + n + 1, input_hash, 32);
    arc_sha256(buf, n + 33, out);
    free(buf);
}

static void keep_grid(arc_eval *ev, const uint8_t h[32], const arc_grid *g) {
    if (!arc_htab_put(&ev->grids, h, ev->ngrefs)) return;
    size_t n = (size_t)(g->rows * g->cols);
    if (ev->pool_len + n > ev->pool_cap) {
        ev->pool_cap = (ev->pool_len + n) * 2 + 4096;
        ev->pool = xrealloc(ev->pool, ev->pool_cap);
    }
    memcpy(ev->pool + ev->pool_len, g->c, n);
    ev->grefs = arc_reserve(ev->grefs, &ev->capgrefs, ev->ngrefs, sizeof *ev->grefs);
    ev->grefs[ev->ngrefs++] = (grid_ref){g->rows, g->cols, (int64_t)ev->pool_len};
    ev->pool_len += n;
}

static void append_entry(arc_eval *ev, const uint8_t key[32], const uint8_t pred[32], double q) {
    ev->ents = arc_reserve(ev->ents, &ev->capents, ev->nents, sizeof *ev->ents);
    entry *x = &ev->ents[ev->nents];
    memcpy(x->pred, pred, 32);
    x->q = q;
    x->next = -1;
    int64_t *ci = arc_htab_get(&ev->keys, key);
    if (ci) {
        ev->ents[ev->chains[*ci].last].next = ev->nents;
        ev->chains[*ci].last = ev->nents;
    } else {
        ev->chains = arc_reserve(ev->chains, &ev->capchains, ev->nchains, sizeof *ev->chains);
        ev->chains[ev->nchains] = (chain){ev->nents, ev->nents};
        arc_htab_put(&ev->keys, key, ev->nchains++);
    }
    ev->nents++;
}

int arc_eval_add(arc_eval *ev, int32_t puzzle_id, const int32_t *input_tokens, const int32_t *pred_tokens,
                 double q_halt_logit, trm_err *e) {
    if (puzzle_id == ev->blank) return 0;
    if (puzzle_id < 0 || puzzle_id >= ev->nids)
        return trm_errf(e, "ARC evaluator: puzzle identifier %d is outside identifiers.json (0..%lld)", (int)puzzle_id,
                        (long long)ev->nids - 1);
    char *orig;
    arc_aug a;
    int has_aug;
    if (arc_aug_parse(ev->ids[puzzle_id], &orig, &a, &has_aug, e)) return -1;
    arc_grid crop, g;
    uint8_t ih[32], ph[32], key[32];
    arc_crop(input_tokens, &crop);
    arc_aug_invert(&a, &crop, &g);
    arc_grid_hash(&g, ih);
    arc_crop(pred_tokens, &crop);
    arc_aug_invert(&a, &crop, &g);
    arc_grid_hash(&g, ph);
    keep_grid(ev, ph, &g);
    key_of(orig, ih, key);
    append_entry(ev, key, ph, 1.0 / (1.0 + exp(-q_halt_logit)));
    free(orig);
    return 0;
}

/* ---- voting ------------------------------------------------------------------------------------ */

typedef struct {
    uint8_t h[32];
    int64_t count;
    double mean; /* sum until finalised */
    int64_t order;
} candidate;

/* (count, mean q) descending; ties keep first-seen order, as Python's stable sort does. */
static int cmp_cand(const void *pa, const void *pb) {
    const candidate *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    int an = isnan(a->mean), bn = isnan(b->mean);
    if (an != bn) return an ? 1 : -1;
    if (!an && a->mean != b->mean) return a->mean > b->mean ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Ranked candidates for (name, input); returns their number (0: no predictions). */
static int64_t rank(const arc_eval *ev, const char *name, const arc_grid *input, candidate **out, int64_t *cap,
                    arc_htab *seen) {
    uint8_t ih[32], key[32];
    arc_grid_hash(input, ih);
    key_of(name, ih, key);
    int64_t *ci = arc_htab_get(&ev->keys, key), n = 0;
    if (!ci) return 0;
    arc_htab_clear(seen);
    for (int64_t i = ev->chains[*ci].first; i >= 0; i = ev->ents[i].next) {
        const entry *x = &ev->ents[i];
        int64_t *at = arc_htab_get(seen, x->pred);
        if (!at) {
            *out = arc_reserve(*out, cap, n, sizeof **out);
            candidate *c = &(*out)[n];
            memcpy(c->h, x->pred, 32);
            c->count = 0, c->mean = 0, c->order = n;
            arc_htab_put(seen, x->pred, n);
            at = arc_htab_get(seen, x->pred);
            n++;
        }
        (*out)[*at].count++;
        (*out)[*at].mean += x->q;
    }
    for (int64_t i = 0; i < n; i++) (*out)[i].mean /= (double)(*out)[i].count;
    qsort(*out, (size_t)n, sizeof **out, cmp_cand);
    return n;
}

static void write_pred_grid(json_buf *b, const arc_eval *ev, const uint8_t h[32]) {
    const int64_t *gi = arc_htab_get(&ev->grids, h);
    arc_grid g = {0, 0, {0}};
    if (gi) {
        const grid_ref *r = &ev->grefs[*gi];
        g.rows = r->rows, g.cols = r->cols;
        memcpy(g.c, ev->pool + r->off, (size_t)(r->rows * r->cols));
    }
    arc_grid_to_json(b, &g);
}

int arc_eval_result(arc_eval *ev, const char *submission_path, double pass_at[ARC_EVAL_NK], trm_err *e) {
    if (ev->ntps == 0) return trm_errf(e, "ARC evaluator: test_puzzles.json holds no puzzles");
    double correct[ARC_EVAL_NK] = {0};
    candidate *cands = NULL;
    int64_t cap = 0;
    arc_htab seen;
    arc_htab_init(&seen);
    json_buf b;
    json_buf_init(&b);
    json_obj_begin(&b);
    for (int p = 0; p < ev->ntps; p++) {
        const test_puzzle *tp = &ev->tps[p];
        int num_correct[ARC_EVAL_NK] = {0};
        json_key(&b, tp->name);
        json_arr_begin(&b);
        for (int t = 0; t < tp->ntest; t++) {
            int64_t n = rank(ev, tp->name, &tp->in[t], &cands, &cap, &seen);
            if (n == 0) continue; /* the reference prints "has no predictions" and moves on */
            uint8_t lh[32];
            arc_grid_hash(&tp->out[t], lh);
            for (int k = 0; k < ARC_EVAL_NK; k++) {
                int ok = 0;
                for (int64_t i = 0; i < n && i < arc_eval_pass_ks[k]; i++) ok |= !memcmp(cands[i].h, lh, 32);
                num_correct[k] += ok;
            }
            json_obj_begin(&b);
            json_key(&b, "attempt_1");
            write_pred_grid(&b, ev, cands[0].h);
            json_key(&b, "attempt_2");
            write_pred_grid(&b, ev, cands[n > 1 ? 1 : 0].h);
            json_obj_end(&b);
        }
        json_arr_end(&b);
        for (int k = 0; k < ARC_EVAL_NK; k++) correct[k] += (double)num_correct[k] / (double)tp->ntest;
    }
    json_obj_end(&b);
    json_raw(&b, "\n");
    for (int k = 0; k < ARC_EVAL_NK; k++) pass_at[k] = correct[k] / (double)ev->ntps;
    int rc = submission_path ? trm_write_file_atomic(submission_path, b.p, b.len, e) : 0;
    json_buf_free(&b);
    arc_htab_free(&seen);
    free(cands);
    return rc;
}
