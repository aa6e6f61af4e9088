/* backend_registry.c — the table of backends compiled into this binary (the project's one
 * allowed global): `cpu` always, `cuda` when the build found nvcc. Lookup by name or index. */
#include <string.h>

#include "backend.h"

/* Probes live next to their backends; they are only reachable through this table. */
int trm_cpu_probe(char *desc, size_t desc_len);

#ifdef TRM_HAVE_CUDA
/* ---- CUDA entry: added by the CUDA backend (kernels/cuda/) ----
 * Declare its create/probe here and add the row below the cpu row, e.g.
 *   trm_backend *trm_cuda_backend_create(int index, trm_err *e);
 *   int trm_cuda_probe(char *desc, size_t desc_len);
 * with caps {compile 1, distributed 1 (with MPI), bf16 1, unified_memory 0}. */
#endif

static const trm_backend_entry registry[] = {
    {"cpu", {.compile = 0, .distributed = 0, .bf16 = 0, .unified_memory = 1},
     trm_cpu_backend_create, trm_cpu_probe},
#ifdef TRM_HAVE_CUDA
    /* {"cuda", {...}, trm_cuda_backend_create, trm_cuda_probe}, */
#endif
};

int trm_backend_count(void) { return (int)(sizeof registry / sizeof registry[0]); }

const trm_backend_entry *trm_backend_at(int i) {
    if (i < 0 || i >= trm_backend_count()) return NULL;
    return &registry[i];
}

const trm_backend_entry *trm_backend_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < trm_backend_count(); i++)
        if (strcmp(registry[i].name, name) == 0) return &registry[i];
    return NULL;
}
