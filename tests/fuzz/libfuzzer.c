/* libfuzzer.c — one reader of fuzz_targets.c as a libFuzzer target (FZ_TARGET, set at build
 * time, names it), for long coverage-guided runs with clang: configure with -DTRM_LIBFUZZER=ON
 * (README, "Fuzzing"). An input answered neither by acceptance nor by a one-line refusal
 * aborts, so libFuzzer keeps it as a crash like any signal. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_targets.h"

#ifndef FZ_TARGET
#error "FZ_TARGET names the reader this target fuzzes"
#endif

/* libFuzzer calls LLVMFuzzerTestOneInput with no context of ours: the target's scratch
 * directory is made once and kept here, the one piece of state this program has. */
static fz_ctx *context(void) {
    static fz_ctx c;
    static int ready;
    if (!ready) {
        trm_err e;
        const fz_target *t = fz_find(FZ_TARGET);
        char *root = xasprintf("%s/%ld", TRM_FUZZ_TMP, (long)getpid());
        if (!t || fz_ctx_init(&c, t, root, &e)) {
            fprintf(stderr, "fuzz_%s: cannot set up: %s\n", FZ_TARGET, t ? e.msg : "no such target");
            abort();
        }
        free(root);
        ready = 1;
    }
    return &c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_ctx *c = context();
    trm_err e;
    e.msg[0] = 0;
    int rc = c->t->run(c, data, size, &e);
    const char *bad = fz_bad_answer(rc, &e);
    if (bad) {
        fprintf(stderr, "fuzz_%s: %s: %s\n", FZ_TARGET, bad, e.msg);
        abort();
    }
    return 0;
}
