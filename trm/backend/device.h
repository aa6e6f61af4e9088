/* device.h — the one place where device policy lives: parse `device=`, pick a backend
 * (auto: cuda > mps > cpu), and reconcile requests with capabilities (compile off with a
 * warning, bf16 → float32 with a warning, distributed refused with an error). */
#ifndef TRM_DEVICE_H
#define TRM_DEVICE_H
#include "backend.h"

/* compile=auto: on where the backend has a compile stage, without a word where it has not */
#define TRM_COMPILE_AUTO (-1)

typedef struct {
    int want_compile; /* TRM_COMPILE_AUTO, 0, or 1 when the user asked for it */
    int want_bf16, want_distributed;
} trm_device_request;

typedef struct {
    const trm_backend_entry *entry;
    int index;        /* device index, -1 default */
    int compile, bf16;
    char why[256];    /* one line: what was chosen and why */
} trm_device_choice;

/* Resolves `spec` against the registry and the request; warnings go to `warn` (may be NULL)
 * one line each. Errors: unknown spec, backend not compiled in, no device, distributed
 * where unsupported. */
int trm_device_choose(const char *spec, const trm_device_request *req, trm_device_choice *out,
                      FILE *warn, trm_err *e);

/* The capability policy on its own: distributed where unsupported is an error; compile=auto
 * follows the backend silently; an explicit compile=true and bf16 where unsupported are turned
 * off with one warning line each on `warn`. */
int trm_device_policy(const char *name, const trm_caps *caps, const trm_device_request *req, int *compile,
                      int *bf16, FILE *warn, trm_err *e);
/* Creates the chosen backend (use_bf16 set from the choice); wrapped in the op profiler
 * when the environment has TRM_PROFILE=1 (or 2: the GEMMs by shape too). */
trm_backend *trm_device_open(const trm_device_choice *dc, trm_err *e);

/* Distributed runs: the GPU of local rank r is the chosen index (0 if none) + r; when the
 * launcher gave each rank one GPU (CUDA_VISIBLE_DEVICES set, one device visible), that one. */
int trm_device_pick_local(trm_device_choice *dc, int local_rank, trm_err *e);
/* Distributed cpu runs: local_world processes share this host's cores (unless the user set
 * OMP_NUM_THREADS). */
void trm_device_share_host(int local_world);

#endif
