/* test_fuzz.c — every file reader fuzzed (tests/fuzz/fuzz_targets.c lists them): a
 * deterministic mutation loop (fixed seed, 3000 inputs per reader; random edits beside
 * structure-aware ones: a format's tokens inserted and repeated, nesting opened and closed, a
 * header edited with its length kept right, zip fields set to edge values, interpolation and
 * alias chains) run in child processes under a per-input time limit and an address-space
 * limit, each input answered either by acceptance or by a refusal with a one-line message; a
 * crash, a hang, a silent refusal or (under ASan) a leak fails the test and keeps the input
 * under the test's tmp dir. Under ASan the address-space limit is left out (its shadow memory
 * reserves terabytes) and the peak resident memory of each input is held to the limit
 * instead. The inputs committed under tests/data/fuzz/ run first, then the seeds (valid files
 * trm's writers make, which must be accepted); the four hostile inputs of issue 31 are
 * answered in under 0.1 s each. Prints a table: target, inputs, accepted, refused, crashes,
 * hangs, bad answers, worst time, worst memory.
 *   TRM_FUZZ_INPUTS=N (per target), TRM_FUZZ_SEED=S, TRM_FUZZ_TARGETS=a,b: longer or other
 *   runs (bench/fuzz.sh); TRM_FUZZ_KEEP=I,J: those inputs kept to look at; `test_fuzz
 *   --write-corpus DIR`: each target's seeds and regression inputs as files, and its tokens as
 *   a libFuzzer dictionary, a start for the libFuzzer targets. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strsignal */
#endif
#include <check.h>

#include "check_main.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "fuzz/fuzz_targets.h"
#include "io/io.h"

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif
#ifndef FZ_ASAN
#define FZ_ASAN 0
#endif
#if FZ_ASAN
int __lsan_do_recoverable_leak_check(void);
#endif

#define TMP_DIR TRM_TEST_TMP "/fuzz"
#define REGRESSION_DIR TRM_SOURCE_DIR "/tests/data/fuzz"
#define DEFAULT_INPUTS 3000
#define BATCH 250                          /* inputs per child process */
#define MEM_LIMIT_MIB 1024.0               /* address space (or, under ASan, peak RSS) an input may add */
#define TIME_LIMIT (FZ_ASAN ? 3.0 : 1.0)   /* seconds per input; ASan's instrumentation is ~3x slower */
#define ISSUE_LIMIT (FZ_ASAN ? 0.5 : 0.1)  /* seconds for each of the issue's four inputs */

/* ---- generating inputs ------------------------------------------------------------------------ */

typedef struct {
    const fz_target *t;
    fz_corpus seeds, regress; /* run verbatim first, then mutated seeds */
    uint64_t seed;
} fz_plan;

static const uint64_t edges[] = {0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0xffff, 0x7fffffffu,
                                 0x80000000u, 0xffffffffu, 1ull << 32, 0x7fffffffffffffffull,
                                 0x8000000000000000ull, ~0ull};

static void replace(fz_input *in, size_t at, size_t del, const void *ins, size_t nins, size_t times) {
    if (at > in->n) at = in->n;
    if (del > in->n - at) del = in->n - at;
    size_t room = FZ_MAX_INPUT - (in->n - del);
    if (nins && times > room / nins) times = room / nins;
    size_t add = nins * times, n = in->n - del + add;
    uint8_t *p = xmalloc(n + 1);
    memcpy(p, in->p, at);
    for (size_t k = 0; k < times; k++) memcpy(p + at + k * nins, ins, nins);
    memcpy(p + at + add, in->p + at + del, in->n - at - del);
    free(in->p);
    in->p = p;
    in->n = n;
}

/* How many times a token is repeated: mostly a few, sometimes enough to nest past any limit. */
static size_t repeats(fz_rng *r) {
    switch (fz_below(r, 4)) {
    case 0: return 2 + fz_below(r, 8);
    case 1: return 16 + fz_below(r, 200);
    case 2: return 100 + fz_below(r, 2000);
    default: return 1000 + fz_below(r, 100000);
    }
}

static const fz_token *any_token(fz_rng *r, const fz_token *dict) {
    size_t n = 0;
    while (dict[n].s) n++;
    return &dict[fz_below(r, n)];
}

/* Opens k levels at one place and closes them at a later one. */
static void nest(fz_rng *r, fz_input *in) {
    static const fz_token pairs[][2] = {{FZ_T("["), FZ_T("]")},   {FZ_T("{\"a\":"), FZ_T("}")},
                                        {FZ_T("{a: "), FZ_T("}")}, {FZ_T("("), FZ_T(")")},
                                        {FZ_T("]"), FZ_T("a")},   {FZ_T("("), FZ_T("t")},
                                        {FZ_T("- "), FZ_T("")},   {FZ_T("\n  a:"), FZ_T("")}};
    const fz_token *pr = pairs[fz_below(r, sizeof pairs / sizeof pairs[0])];
    size_t k = repeats(r), a = fz_below(r, in->n + 1), b = a + fz_below(r, in->n - a + 1);
    replace(in, b, 0, pr[1].s, pr[1].n, k);
    replace(in, a, 0, pr[0].s, pr[0].n, k);
}

/* A decimal number in the text replaced by one on an edge. */
static void renumber(fz_rng *r, fz_input *in) {
    static const char *const nums[] = {"0", "-1", "1", "255", "65536", "2147483648", "4294967296",
                                       "9223372036854775807", "9223372036854775808", "18446744073709551616",
                                       "99999999999999999999999999", "1e308", "-0"};
    size_t start = fz_below(r, in->n + 1);
    while (start < in->n && (in->p[start] < '0' || in->p[start] > '9')) start++;
    if (start >= in->n) return;
    size_t end = start;
    while (end < in->n && in->p[end] >= '0' && in->p[end] <= '9') end++;
    const char *v = nums[fz_below(r, sizeof nums / sizeof nums[0])];
    replace(in, start, end - start, v, strlen(v), 1);
}

static void overwrite_int(fz_rng *r, fz_input *in) {
    static const int widths[] = {1, 2, 4, 8};
    int w = widths[fz_below(r, 4)];
    if (in->n < (size_t)w) return;
    size_t at = fz_below(r, in->n - (size_t)w + 1);
    uint64_t v = fz_below(r, 4) ? edges[fz_below(r, sizeof edges / sizeof edges[0])] : fz_next(r);
    for (int i = 0; i < w; i++) in->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

/* One random edit of the whole input (or of its region, by the caller). */
static void generic(fz_rng *r, const fz_target *t, const fz_corpus *seeds, fz_input *in) {
    size_t n = in->n, at = fz_below(r, n + 1);
    const fz_token *tok = any_token(r, t->dict);
    uint8_t b[8];
    switch (fz_below(r, 13)) {
    case 0:
        if (n) in->p[fz_below(r, n)] ^= (uint8_t)(1u << fz_below(r, 8));
        break;
    case 1:
        if (n) in->p[fz_below(r, n)] = (uint8_t)edges[fz_below(r, 9)];
        break;
    case 2:
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)fz_next(r);
        replace(in, at, 0, b, 1 + fz_below(r, 8), 1);
        break;
    case 3: replace(in, at, 1 + fz_below(r, fz_below(r, 2) ? 16 : n + 1), NULL, 0, 0); break;
    case 4: { /* a stretch repeated */
        size_t len = 1 + fz_below(r, n - at < 64 ? n - at + 1 : 64);
        if (at + len > n) break;
        uint8_t *copy = xmalloc(len);
        memcpy(copy, in->p + at, len);
        replace(in, at, 0, copy, len, repeats(r));
        free(copy);
        break;
    }
    case 5: overwrite_int(r, in); break;
    case 6: replace(in, at, 0, tok->s, tok->n, 1); break;
    case 7: replace(in, at, 0, tok->s, tok->n, repeats(r)); break;
    case 8: replace(in, at, tok->n, tok->s, tok->n, 1); break;
    case 9: renumber(r, in); break;
    case 10: { /* a piece of another seed */
        const fz_input *o = &seeds->v[fz_below(r, (size_t)seeds->n)];
        size_t from = fz_below(r, o->n + 1), len = fz_below(r, o->n - from + 1);
        replace(in, at, fz_below(r, 2) ? len : 0, o->p + from, len, 1);
        break;
    }
    case 11: in->n = fz_below(r, n + 1); break;
    default: nest(r, in); break;
    }
}

/* One edit: the format's own, or in its region (the length kept right), or anywhere. */
static void mutate(fz_rng *r, const fz_target *t, const fz_corpus *seeds, fz_input *in) {
    size_t off, len;
    if (t->special && fz_below(r, 8) == 0) {
        t->special(r, in);
    } else if (t->region && fz_below(r, 10) < 7 && t->region(in->p, in->n, &off, &len) == 0) {
        fz_input sub = {NULL, 0}, tail = {NULL, 0};
        fz_input_set(&sub, in->p + off, len);
        fz_input_set(&tail, in->p + off + len, in->n - off - len);
        generic(r, t, seeds, &sub);
        in->n = off;
        replace(in, off, 0, sub.p, sub.n, 1);
        replace(in, in->n, 0, tail.p, tail.n, 1);
        if (fz_below(r, 10)) t->fix(in, off, sub.n); /* now and then the length is left wrong */
        free(sub.p);
        free(tail.p);
    } else {
        generic(r, t, seeds, in);
    }
}

/* Input i of a plan: the regression inputs, the seeds, then mutated seeds; a function of
 * (seed, i) only, so a child and its parent make the same one. */
static void make_input(const fz_plan *pl, int64_t i, fz_input *in) {
    if (i < pl->regress.n) {
        fz_input_set(in, pl->regress.v[i].p, pl->regress.v[i].n);
        return;
    }
    i -= pl->regress.n;
    if (i < pl->seeds.n) {
        fz_input_set(in, pl->seeds.v[i].p, pl->seeds.v[i].n);
        return;
    }
    fz_rng r = {pl->seed * 0x9E3779B97F4A7C15ull ^ (uint64_t)i * 0xD1B54A32D192ED03ull};
    for (const char *c = pl->t->name; *c; c++) r.s = r.s * 31 + (uint64_t)*c;
    const fz_input *base = &pl->seeds.v[fz_below(&r, (size_t)pl->seeds.n)];
    fz_input_set(in, base->p, base->n);
    for (size_t k = 1 + fz_below(&r, 4); k > 0; k--) mutate(&r, pl->t, &pl->seeds, in);
}

/* ---- running inputs in child processes ---------------------------------------------------------- */

typedef struct {
    int64_t idx;
    int started; /* 1: the input began; 0: its answer follows */
    int rc;
    double secs, mib;
    char bad[256]; /* why the answer is not one, or "" */
} fz_record;

typedef struct {
    int64_t inputs, accepted, refused, crashes, hangs, bad;
    double worst_secs, worst_mib;
    int64_t worst_secs_idx, worst_mib_idx;
} fz_stats;

/* Resident memory (VmRSS or VmHWM) of this process in MiB, from /proc; -1 where there is none. */
static double proc_mib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':') kb = strtod(line + fl + 1, NULL);
    if (f) fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

/* Resets the peak (VmHWM) to the current resident memory (Linux 4.0+). */
static void reset_peak(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
        ssize_t w = write(fd, "5", 1);
        (void)w;
        close(fd);
    }
}

static void put_record(int fd, const fz_record *rec) {
    ssize_t w = write(fd, rec, sizeof *rec);
    (void)w; /* a pipe write of this size is atomic; a dead parent ends the child anyway */
}

static void child_limits(void) {
    if (!FZ_ASAN) { /* ASan reserves terabytes of shadow: no address-space limit under it */
        double vm = proc_mib("VmSize");
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)((vm > 0 ? vm : 512.0) + MEM_LIMIT_MIB) * 1048576u;
        setrlimit(RLIMIT_AS, &rl);
    }
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
}

/* The child: inputs [from, to) one after another, each under the hang timer. Exit 0 when
 * all were run, 3 when ASan's leak check found a leak. */
static void child_run(const fz_plan *pl, fz_ctx *c, int64_t from, int64_t to, int fd) {
    child_limits();
    fz_input in = {NULL, 0};
    for (int64_t i = from; i < to; i++) {
        fz_record rec = {.idx = i, .started = 1};
        put_record(fd, &rec);
        make_input(pl, i, &in);
        struct itimerval it = {{0, 0}, {(time_t)(3 * TIME_LIMIT), 0}};
        setitimer(ITIMER_REAL, &it, NULL); /* SIGALRM's default action ends a hung child */
        double rss0 = proc_mib("VmRSS");
        reset_peak();
        trm_err e;
        e.msg[0] = 0;
        double t0 = trm_now_seconds();
        int rc = c->t->run(c, in.p, in.n, &e);
        rec.secs = trm_now_seconds() - t0;
        double hwm = proc_mib("VmHWM");
        rec.mib = hwm > 0 && rss0 > 0 ? hwm - rss0 : 0;
        rec.started = 0;
        rec.rc = rc;
        const char *why = fz_bad_answer(rc, &e);
        if (!why && FZ_ASAN && rec.mib > MEM_LIMIT_MIB) why = "peak memory over the limit";
        if (!why && rc && i >= pl->regress.n && i < pl->regress.n + pl->seeds.n) why = "a seed refused: ";
        int seed_refused = why && !strcmp(why, "a seed refused: ");
        snprintf(rec.bad, sizeof rec.bad, "%.60s%.150s", why ? why : "", seed_refused ? e.msg : "");
        put_record(fd, &rec);
    }
    free(in.p);
#if FZ_ASAN
    if (__lsan_do_recoverable_leak_check()) _exit(3);
#endif
    _exit(0);
}

static void save_failure(const fz_plan *pl, int64_t idx, const char *what) {
    fz_input in = {NULL, 0};
    make_input(pl, idx, &in);
    trm_err e;
    char *dir = xasprintf("%s/failures", TMP_DIR);
    char *path = xasprintf("%s/%s-%lld.bin", dir, pl->t->name, (long long)idx);
    FILE *f = trm_mkdirs(dir, &e) == 0 ? fopen(path, "wb") : NULL;
    if (f) {
        if (in.n) fwrite(in.p, 1, in.n, f);
        fclose(f);
    }
    printf("fuzz %s: input %lld: %s (%zu bytes, kept as %s)\n", pl->t->name, (long long)idx, what, in.n, path);
    fflush(stdout);
    free(dir), free(path), free(in.p);
}

static void account(const fz_plan *pl, const fz_record *rec, fz_stats *st) {
    st->inputs++;
    if (rec->bad[0]) {
        st->bad++;
        save_failure(pl, rec->idx, rec->bad);
    } else if (rec->rc == 0) {
        st->accepted++;
    } else {
        st->refused++;
    }
    if (rec->secs > st->worst_secs) st->worst_secs = rec->secs, st->worst_secs_idx = rec->idx;
    if (rec->mib > st->worst_mib) st->worst_mib = rec->mib, st->worst_mib_idx = rec->idx;
    if (rec->secs > TIME_LIMIT && !rec->bad[0]) {
        st->hangs++;
        char why[64];
        snprintf(why, sizeof why, "answered in %.2f s, over the %.1f s limit", rec->secs, TIME_LIMIT);
        save_failure(pl, rec->idx, why);
    }
}

/* Runs inputs [from, to) in one child; returns where the next child must start (after an
 * input that ended the child) and whether ASan found a leak (*leak). */
static int64_t run_batch(const fz_plan *pl, fz_ctx *c, int64_t from, int64_t to, fz_stats *st, int *leak) {
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        child_run(pl, c, from, to, fd[1]);
    }
    close(fd[1]);
    fz_record rec;
    int64_t open_idx = -1, next = to;
    while (read(fd[0], &rec, sizeof rec) == (ssize_t)sizeof rec) {
        if (rec.started) open_idx = rec.idx;
        else open_idx = -1, account(pl, &rec, st);
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    *leak = WIFEXITED(status) && WEXITSTATUS(status) == 3;
    if (open_idx >= 0) { /* the child ended inside this input */
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        char why[96];
        st->inputs++;
        if (sig == SIGALRM) st->hangs++, snprintf(why, sizeof why, "hang (killed after %.0f s)", 3 * TIME_LIMIT);
        else if (sig) st->crashes++, snprintf(why, sizeof why, "crash: %s", strsignal(sig));
        else st->crashes++, snprintf(why, sizeof why, "the child exited (status %d)", WEXITSTATUS(status));
        save_failure(pl, open_idx, why);
        next = open_idx + 1;
    }
    return next;
}

/* Every input of a plan; a batch whose child reports a leak runs again one input per child to
 * find the input that leaks. */
static void run_plan(const fz_plan *pl, fz_ctx *c, int64_t total, fz_stats *st) {
    for (int64_t from = 0; from < total;) {
        int64_t to = from + BATCH < total ? from + BATCH : total;
        fz_stats scratch = *st;
        int leak = 0;
        int64_t next = run_batch(pl, c, from, to, st, &leak);
        if (leak) {
            *st = scratch;
            for (int64_t i = from; i < next; i++)
                if (run_batch(pl, c, i, i + 1, st, &leak) == i + 1 && leak) {
                    st->bad++;
                    save_failure(pl, i, "leak (ASan's leak check)");
                }
        }
        from = next;
    }
}

/* ---- plans, seeds and the table ----------------------------------------------------------------- */

static int64_t env_i64(const char *name, int64_t dflt) {
    const char *v = getenv(name);
    return v && *v ? strtoll(v, NULL, 10) : dflt;
}

static int wanted(const char *name) {
    const char *list = getenv("TRM_FUZZ_TARGETS");
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

/* The committed inputs of tests/data/fuzz/<target>/, in name order. */
static void load_regressions(const char *target, fz_corpus *out) {
    char *dir = xasprintf("%s/%s", REGRESSION_DIR, target);
    int n = 0;
    char **names = trm_list_dir(dir, &n); /* sorted by name; NULL when there is no such folder */
    for (int i = 0; i < n; i++) {
        char *path = trm_path_join(dir, names[i]);
        size_t len;
        char *d = trm_read_file(path, &len, NULL);
        if (d) fz_corpus_add(out, d, len);
        free(d), free(path);
    }
    if (names) trm_free_names(names, n);
    free(dir);
}

static void plan_init(fz_plan *pl, fz_ctx *c, const fz_target *t) {
    memset(pl, 0, sizeof *pl);
    pl->t = t;
    pl->seed = (uint64_t)env_i64("TRM_FUZZ_SEED", 1);
    trm_err e;
    ck_assert_msg(fz_ctx_init(c, t, TMP_DIR, &e) == 0, "%s: %s", t->name, e.msg);
    ck_assert_msg(t->seeds(c, &pl->seeds, &e) == 0 && pl->seeds.n > 0, "%s seeds: %s", t->name, e.msg);
    load_regressions(t->name, &pl->regress);
}

static void print_row(const fz_target *t, const fz_stats *st) {
    printf("%-13s %8lld %8lld %8lld %7lld %5lld %4lld %8.3f s %7.1f MiB\n", t->name, (long long)st->inputs,
           (long long)st->accepted, (long long)st->refused, (long long)st->crashes, (long long)st->hangs,
           (long long)st->bad, st->worst_secs, st->worst_mib);
    fflush(stdout);
}

/* TRM_FUZZ_KEEP=I,J,...: those inputs written to the tmp dir's kept/ folder, to look at. */
static void keep_inputs(const fz_plan *pl) {
    const char *v = getenv("TRM_FUZZ_KEEP");
    trm_err e;
    char *dir = xasprintf("%s/kept", TMP_DIR);
    for (char *end; v && *v && trm_mkdirs(dir, &e) == 0; v = *end ? end + 1 : end) {
        int64_t idx = strtoll(v, &end, 10);
        if (end == v) break;
        fz_input in = {NULL, 0};
        make_input(pl, idx, &in);
        char *path = xasprintf("%s/%s-%lld.bin", dir, pl->t->name, (long long)idx);
        FILE *f = fopen(path, "wb");
        if (f) fwrite(in.p, 1, in.n, f), fclose(f);
        free(path), free(in.p);
    }
    free(dir);
}

/* One target: its regression inputs, seeds (which must be accepted) and mutations. */
static void fuzz_target(const char *name) {
    const fz_target *t = fz_find(name);
    ck_assert_ptr_nonnull(t);
    if (!wanted(name)) return;
    fz_plan pl;
    fz_ctx c;
    plan_init(&pl, &c, t);
    int64_t total = pl.regress.n + pl.seeds.n + env_i64("TRM_FUZZ_INPUTS", DEFAULT_INPUTS);
    fz_stats st;
    memset(&st, 0, sizeof st);
    double t0 = trm_now_seconds();
    run_plan(&pl, &c, total, &st);
    print_row(t, &st);
    keep_inputs(&pl);
    if (getenv("TRM_FUZZ_VERBOSE"))
        printf("  %s: %.1f s; slowest input %lld, largest %lld\n", name, trm_now_seconds() - t0,
               (long long)st.worst_secs_idx, (long long)st.worst_mib_idx);
    ck_assert_msg(st.crashes == 0 && st.hangs == 0 && st.bad == 0,
                  "%s: %lld crashes, %lld hangs, %lld bad answers (inputs kept under %s/failures)", name,
                  (long long)st.crashes, (long long)st.hangs, (long long)st.bad, TMP_DIR);
    fz_corpus_free(&pl.seeds);
    fz_corpus_free(&pl.regress);
    fz_ctx_free(&c);
}

/* One Check test per target of fuzz_targets.c's table (a loop test over its index). */
START_TEST(fuzz_each) {
    int n;
    const fz_target *t = fz_targets(&n);
    fuzz_target(t[_i].name);
}
END_TEST

/* ---- the four hostile inputs of issue 31 -------------------------------------------------------- */

static char *tmp_path(const char *name) {
    trm_err e;
    ck_assert_msg(trm_mkdirs(TMP_DIR, &e) == 0, "%s", e.msg);
    return xasprintf("%s/%s", TMP_DIR, name);
}

static void write_file(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(d, 1, n, f), n);
    fclose(f);
}

/* A safetensors file of this header and no data. */
static void write_st(const char *path, const char *hdr) {
    size_t hl = strlen(hdr);
    uint8_t *b = xmalloc(8 + hl);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    write_file(path, b, 8 + hl);
    free(b);
}

static void expect_quick_refusal(int rc, double secs, const trm_err *e, const char *path, const char *fragment) {
    ck_assert_msg(rc != 0, "%s: accepted", path);
    ck_assert_msg(strstr(e->msg, path) != NULL, "'%s' does not name %s", e->msg, path);
    ck_assert_msg(strstr(e->msg, fragment) != NULL, "'%s' lacks '%s'", e->msg, fragment);
    ck_assert_msg(!strchr(e->msg, '\n'), "'%s' is not one line", e->msg);
    ck_assert_msg(secs < ISSUE_LIMIT, "%s: refused in %.3f s (limit %.1f s)", path, secs, ISSUE_LIMIT);
}

START_TEST(issue_deep_safetensors_metadata) {
    enum { DEPTH = 100000 };
    char *hdr = xmalloc(2 * DEPTH + 32), *path = tmp_path("deep_metadata.safetensors");
    size_t k = (size_t)sprintf(hdr, "{\"__metadata__\":");
    memset(hdr + k, '[', DEPTH), memset(hdr + k + DEPTH, ']', DEPTH);
    strcpy(hdr + k + 2 * DEPTH, "}");
    write_st(path, hdr);
    st_file f;
    trm_err e;
    double t0 = trm_now_seconds();
    int rc = st_open(&f, path, &e);
    expect_quick_refusal(rc, trm_now_seconds() - t0, &e, path, "nest deeper than 128 levels (the limit)");
    free(hdr), free(path);
}
END_TEST

START_TEST(issue_doubling_interpolation) {
    char *path = tmp_path("doubling.yaml");
    trm_sbuf b = {0};
    sb_puts(&b, "i0: xxxxxxxx\n");
    for (int i = 1; i < 40; i++) sb_printf(&b, "i%d: ${i%d}${i%d}\n", i, i - 1, i - 1);
    write_file(path, b.p, b.len);
    static const cfg_search search = {NULL, 0, 1, NULL};
    trm_err e;
    double t0 = trm_now_seconds();
    cfg_node *root = cfg_compose(&search, path, 0, NULL, &e); /* as `trm config show cfg=FILE` */
    expect_quick_refusal(root ? 0 : -1, trm_now_seconds() - t0, &e, path, "longer than 1 MiB (the limit)");
    free(b.p), free(path);
}
END_TEST

START_TEST(issue_deep_pickle) {
    enum { DEPTH = 1000000 };
    size_t n = 2 + 2 * DEPTH;
    uint8_t *p = xmalloc(n);
    p[0] = 0x80, p[1] = 2;
    memset(p + 2, ']', DEPTH);           /* a million empty lists ... */
    memset(p + 2 + DEPTH, 'a', DEPTH - 1); /* ... each appended to the one below */
    p[n - 1] = '.';
    char *path = tmp_path("deep.pt");
    zip_writer z;
    zip_writer_init(&z);
    zip_writer_add(&z, "deep/data.pkl", p, n);
    trm_err e;
    ck_assert_msg(zip_writer_save(&z, path, &e) == 0, "%s", e.msg);
    zip_writer_free(&z);
    st_file f;
    double t0 = trm_now_seconds();
    int rc = tensor_file_open(&f, path, &e);
    expect_quick_refusal(rc, trm_now_seconds() - t0, &e, path, "(the limit)");
    free(p), free(path);
}
END_TEST

START_TEST(issue_checkpoint_without_one_crc) {
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    int64_t s2[1] = {2}, s3[1] = {3};
    st_writer w;
    st_writer_init(&w);
    st_writer_add(&w, "a", ST_F32, 1, s2, a);
    st_writer_add(&w, "b", ST_F32, 1, s3, b);
    st_writer_meta(&w, "format", "trm-checkpoint-1");
    char *path = tmp_path("no_crc_for_b.safetensors");
    trm_err e;
    ck_assert_msg(st_writer_save(&w, path, &e) == 0, "%s", e.msg);
    st_writer_free(&w);
    /* the header again without "crc32.b", its length kept by spaces at its end */
    size_t n;
    char *d = trm_read_file(path, &n, &e);
    ck_assert_ptr_nonnull(d);
    size_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (uint8_t)d[i];
    char *entry = strstr(d + 8, ",\"crc32.b\":\""), *end = d + 8 + hl;
    ck_assert_ptr_nonnull(entry);
    size_t len = strlen(",\"crc32.b\":\"") + 9;
    memmove(entry, entry + len, (size_t)(end - entry) - len);
    memset(end - len, ' ', len);
    write_file(path, d, n);
    st_file f;
    double t0 = trm_now_seconds();
    int rc = st_open(&f, path, &e);
    expect_quick_refusal(rc, trm_now_seconds() - t0, &e, path, "tensor 'b' has no crc32 entry");
    /* a file from elsewhere without any checksum is still read */
    char *foreign = tmp_path("foreign.safetensors");
    write_st(foreign, "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}");
    ck_assert_msg(st_open(&f, foreign, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st_count_checksums(&f), 0);
    st_close(&f);
    free(d), free(path), free(foreign);
}
END_TEST

/* ---- the starting corpus for libFuzzer ----------------------------------------------------------- */

/* The target's tokens as a libFuzzer dictionary (-dict=FILE): one "quoted" token a line. */
static void write_dict(const fz_target *t, const char *path) {
    FILE *f = fopen(path, "w");
    for (const fz_token *k = t->dict; f && k->s; k++) {
        fputc('"', f);
        for (size_t i = 0; i < k->n; i++) {
            unsigned char ch = (unsigned char)k->s[i];
            if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') fprintf(f, "\\x%02x", ch);
            else fputc(ch, f);
        }
        fputs("\"\n", f);
    }
    if (f) fclose(f);
}

static int write_corpus(const char *root) {
    int nt;
    const fz_target *t = fz_targets(&nt);
    for (int k = 0; k < nt; k++) {
        fz_plan pl;
        fz_ctx c;
        trm_err e;
        memset(&pl, 0, sizeof pl);
        char *dir = trm_path_join(root, t[k].name);
        if (fz_ctx_init(&c, &t[k], TMP_DIR, &e) || t[k].seeds(&c, &pl.seeds, &e) || trm_mkdirs(dir, &e)) {
            fprintf(stderr, "%s: %s\n", t[k].name, e.msg);
            return 1;
        }
        load_regressions(t[k].name, &pl.regress);
        for (int i = 0; i < pl.seeds.n + pl.regress.n; i++) {
            const fz_input *in = i < pl.seeds.n ? &pl.seeds.v[i] : &pl.regress.v[i - pl.seeds.n];
            char *path = xasprintf("%s/%s-%d", dir, i < pl.seeds.n ? "seed" : "regression", i);
            FILE *f = fopen(path, "wb");
            if (f) fwrite(in->p, 1, in->n, f), fclose(f);
            free(path);
        }
        char *dict = xasprintf("%s.dict", dir);
        write_dict(&t[k], dict);
        printf("%s: %d seeds, %d regression inputs in %s, tokens in %s\n", t[k].name, pl.seeds.n, pl.regress.n, dir,
               dict);
        free(dict);
        fz_corpus_free(&pl.seeds), fz_corpus_free(&pl.regress), fz_ctx_free(&c), free(dir);
    }
    return 0;
}

static Suite *suite(void) {
    Suite *s = suite_create("fuzz");
    TCase *ti = tcase_create("issue31");
    tcase_add_test(ti, issue_deep_safetensors_metadata);
    tcase_add_test(ti, issue_doubling_interpolation);
    tcase_add_test(ti, issue_deep_pickle);
    tcase_add_test(ti, issue_checkpoint_without_one_crc);
    suite_add_tcase(s, ti);
    TCase *tf = tcase_create("fuzz");
    tcase_set_timeout(tf, 600);
    int ntargets;
    fz_targets(&ntargets);
    tcase_add_loop_test(tf, fuzz_each, 0, ntargets);
    suite_add_tcase(s, tf);
    return s;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-corpus")) return write_corpus(argv[2]);
    printf("fuzz (seed %lld, %lld inputs per target, %.0f s and %.0f MiB per input%s)\n",
           (long long)env_i64("TRM_FUZZ_SEED", 1), (long long)env_i64("TRM_FUZZ_INPUTS", DEFAULT_INPUTS), TIME_LIMIT,
           MEM_LIMIT_MIB, FZ_ASAN ? "; ASan: resident, not address-space limit" : "");
    printf("%-13s %8s %8s %8s %7s %5s %4s %10s %11s\n", "target", "inputs", "accepted", "refused", "crashes", "hangs",
           "bad", "worst time", "worst mem");
    fflush(stdout);
    return trm_run_suite(suite());
}
