/* backend_registry.c — the table of backends compiled into this binary (the project's one
 * allowed global): `cpu` always, `cuda` when the build found nvcc, `mps` when it found glslc and
 * the Vulkan headers (dynamic builds only). Lookup by name or index. */
#include <string.h>

#include "backend.h"

/* Probes live next to their backends; they are only reachable through this table. */
int trm_cpu_probe(char *desc, size_t desc_len);

#ifdef TRM_HAVE_CUDA
/* kernels/cuda/backend_cuda.cu */
trm_backend *trm_cuda_backend_create(int index, trm_err *e);
int trm_cuda_probe(char *desc, size_t desc_len);
#endif
#ifdef TRM_HAVE_VULKAN
/* kernels/vulkan/backend_vulkan.c */
trm_backend *trm_mps_backend_create(int index, trm_err *e);
int trm_mps_probe(char *desc, size_t desc_len);
int trm_mps_probe_auto(char *desc, size_t desc_len);
#endif

static const trm_backend_entry registry[] = {
    {"cpu", TRM_CAPS_CPU, trm_cpu_backend_create, trm_cpu_probe, NULL, trm_cpu_caps_here},
#ifdef TRM_HAVE_CUDA
    {"cuda", TRM_CAPS_CUDA, trm_cuda_backend_create, trm_cuda_probe, NULL, NULL},
#endif
#ifdef TRM_HAVE_VULKAN
    {"mps", TRM_CAPS_MPS, trm_mps_backend_create, trm_mps_probe, trm_mps_probe_auto, NULL},
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

static const struct {
    const char *name;
    trm_caps caps;
} known[] = {{"cpu", TRM_CAPS_CPU}, {"cuda", TRM_CAPS_CUDA}, {"mps", TRM_CAPS_MPS}};

const trm_caps *trm_known_caps(const char *name) {
    for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(known[i].name, name)) return &known[i].caps;
    return NULL;
}

void trm_backend_set_bf16(trm_backend *b, int on) {
    b->use_bf16 = on && b->caps.bf16;
    b->act_dt = b->use_bf16 && b->caps.bf16_acts ? TRM_BF16 : TRM_F32;
}
