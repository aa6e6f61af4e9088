/* metrics_log.c — reading metrics.jsonl (see metrics_log.h). Each line is one flat JSON object
 * written by train.c; JSON is YAML, so libyaml (cfg_parse) reads it like every other JSON file. */
#include "metrics_log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

static trm_series *series_for(trm_run_log *r, const char *key, int eval) {
    for (int i = 0; i < r->nseries; i++)
        if (!strcmp(r->series[i].key, key)) return &r->series[i];
    r->series = xrealloc(r->series, (size_t)(r->nseries + 1) * sizeof *r->series);
    trm_series *s = &r->series[r->nseries++];
    memset(s, 0, sizeof *s);
    s->key = xstrdup(key);
    s->eval = eval;
    return s;
}

/* A step at or before the last point replaces the points from that step on: the run was
 * resumed from an earlier checkpoint and its log repeats those steps. */
static void append(trm_series *s, double step, double v) {
    while (s->n > 0 && s->step[s->n - 1] >= step) s->n--;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->step = xrealloc(s->step, (size_t)s->cap * sizeof *s->step);
        s->value = xrealloc(s->value, (size_t)s->cap * sizeof *s->value);
    }
    s->step[s->n] = step;
    s->value[s->n++] = v;
}

static int number_of(const cfg_node *n, double *v) {
    if (n->type == CFG_INT) *v = (double)n->i;
    else if (n->type == CFG_FLOAT) *v = n->f;
    else return 0;
    return isfinite(*v);
}

/* Train metrics averaged over no halted sample are written as 0 (the reference's convention:
 * accuracy and ACT steps are means over halted samples); "steps" is then 0, which a halted
 * sample never has. Those points say nothing and are left out. */
static int is_halted_mean(const char *key) {
    static const char *const k[] = {"train/accuracy", "train/exact_accuracy", "train/q_halt_accuracy", "train/steps"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(key, k[i])) return 1;
    return 0;
}

static int read_record(trm_run_log *r, const char *line, size_t len, int64_t lineno, trm_err *e) {
    trm_err pe;
    cfg_node *n = cfg_parse(line, len, r->path, &pe);
    if (!n || n->type != CFG_MAP) {
        cfg_free(n);
        return trm_errf(e, "%s:%lld: expected one JSON object per line like {\"step\":10,\"kind\":\"train\",...}%s%s",
                        r->path, (long long)lineno, n ? "" : ": ", n ? "" : pe.msg);
    }
    const cfg_node *step = cfg_get(n, "step"), *kind = cfg_get(n, "kind");
    double st = 0;
    if (!step || !number_of(step, &st) || !kind || kind->type != CFG_STR) {
        cfg_free(n);
        return trm_errf(e, "%s:%lld: a record needs a numeric \"step\" and a \"kind\" string", r->path, (long long)lineno);
    }
    int eval = !strcmp(kind->s, "eval");
    if (!eval && strcmp(kind->s, "train")) { /* a kind this reader does not know: not a curve */
        cfg_free(n);
        return 0;
    }
    const cfg_node *hs = eval ? NULL : cfg_get(n, "train/steps");
    double hsv = 1;
    int none_halted = hs && number_of(hs, &hsv) && hsv == 0;
    for (int i = 0; i < n->n; i++) {
        const cfg_node *it = n->items[i];
        double v;
        if (!strcmp(it->key, "step") || !strcmp(it->key, "kind") || !number_of(it, &v)) continue;
        if (none_halted && is_halted_mean(it->key)) continue;
        append(series_for(r, it->key, eval), st, v);
    }
    if (eval) r->last_eval_step = (int64_t)st;
    else r->last_train_step = (int64_t)st;
    r->records++;
    cfg_free(n);
    return 0;
}

static char *label_for_path(const char *dir);

/* run_name of the run's config.yaml, else the directory's own name. */
static char *label_for(const char *dir) {
    char *cpath = trm_path_join(dir, "config.yaml");
    size_t len;
    trm_err ignore;
    char *text = trm_file_exists(cpath) ? trm_read_file(cpath, &len, &ignore) : NULL;
    free(cpath);
    char *label = NULL;
    if (text) {
        cfg_node *cfg = cfg_parse(text, len, "config.yaml", &ignore);
        const cfg_node *rn = cfg ? cfg_get(cfg, "run_name") : NULL;
        if (rn && rn->type == CFG_STR && rn->s[0]) label = xstrdup(rn->s);
        cfg_free(cfg);
        free(text);
    }
    if (label) return label;
    char *real = realpath(dir, NULL); /* "." names the directory it is */
    if (real) {
        label = label_for_path(real);
        free(real);
        return label;
    }
    return label_for_path(dir);
}

static char *label_for_path(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    return n > s ? xstrndup(dir + s, n - s) : xstrdup(dir);
}

int trm_run_log_read(trm_run_log *r, const char *path, trm_err *e) {
    memset(r, 0, sizeof *r);
    r->last_train_step = r->last_eval_step = -1;
    if (trm_is_dir(path)) {
        r->dir = xstrdup(path);
        r->path = trm_path_join(path, "metrics.jsonl");
    } else {
        r->path = xstrdup(path);
        const char *slash = strrchr(path, '/');
        r->dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : xstrdup(".");
    }
    if (!trm_file_exists(r->path)) {
        trm_errf(e, "%s: no such file (expected a run directory with metrics.jsonl, or the file itself)", r->path);
        trm_run_log_free(r);
        return -1;
    }
    size_t len;
    char *text = trm_read_file(r->path, &len, e);
    if (!text) {
        trm_run_log_free(r);
        return -1;
    }
    int64_t lineno = 0;
    int rc = 0;
    for (size_t pos = 0; pos < len && rc == 0;) {
        char *nl = memchr(text + pos, '\n', len - pos);
        lineno++;
        if (!nl) { /* a live run's line still being written */
            r->partial = 1;
            break;
        }
        size_t ll = (size_t)(nl - (text + pos));
        if (strspn(text + pos, " \t\r") < ll) rc = read_record(r, text + pos, ll, lineno, e);
        pos += ll + 1;
    }
    free(text);
    if (rc) {
        trm_run_log_free(r);
        return -1;
    }
    r->label = label_for(r->dir);
    return 0;
}

void trm_run_log_free(trm_run_log *r) {
    for (int i = 0; i < r->nseries; i++) {
        free(r->series[i].key);
        free(r->series[i].step);
        free(r->series[i].value);
    }
    free(r->series);
    free(r->path);
    free(r->dir);
    free(r->label);
    memset(r, 0, sizeof *r);
}

const trm_series *trm_run_log_find(const trm_run_log *r, const char *key) {
    for (int i = 0; i < r->nseries; i++)
        if (!strcmp(r->series[i].key, key)) return &r->series[i];
    return NULL;
}
