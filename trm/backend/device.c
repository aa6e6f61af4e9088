/* device.c — device selection and capability policy (see device.h). */
#include "device.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static void names_of_registry(char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; i < trm_backend_count(); i++) {
        size_t o = strlen(buf);
        snprintf(buf + o, n - o, "%s%s", i ? ", " : "", trm_backend_at(i)->name);
    }
}

int trm_device_choose(const char *spec, const trm_device_request *req, trm_device_choice *out,
                      FILE *warn, trm_err *e) {
    memset(out, 0, sizeof *out);
    out->index = -1;
    char have[128], desc[200];
    names_of_registry(have, sizeof have);
    if (!spec || !*spec || !strcmp(spec, "auto")) {
        static const char *order[] = {"cuda", "mps", "cpu"};
        for (size_t i = 0; i < sizeof order / sizeof order[0] && !out->entry; i++) {
            const trm_backend_entry *be = trm_backend_find(order[i]);
            desc[0] = 0;
            if (be && (be->probe_auto ? be->probe_auto : be->probe)(desc, sizeof desc) > 0) {
                out->entry = be;
                snprintf(out->why, sizeof out->why, "device=auto chose %s (%s)", be->name, desc);
            }
        }
        if (!out->entry) return trm_errf(e, "device=auto: no usable backend (compiled in: %s)", have);
    } else {
        char name[32];
        const char *colon = strchr(spec, ':');
        size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
        if (len == 0 || len >= sizeof name)
            return trm_errf(e, "device=%s: expected auto, cpu, cuda, cuda:N, mps or mps:N", spec);
        memcpy(name, spec, len);
        name[len] = 0;
        if (strcmp(name, "cpu") && strcmp(name, "cuda") && strcmp(name, "mps"))
            return trm_errf(e, "device=%s: expected auto, cpu, cuda, cuda:N, mps or mps:N", spec);
        if (colon) {
            char *end;
            long idx = strtol(colon + 1, &end, 10);
            if (*end || end == colon + 1 || idx < 0 || idx > 1000000 || !strcmp(name, "cpu"))
                return trm_errf(e, "device=%s: only cuda and mps take a device index (cuda:N, mps:N, N >= 0)", spec);
            out->index = (int)idx;
        }
        out->entry = trm_backend_find(name);
        if (!out->entry)
            return trm_errf(e, "device=%s: this trm binary has no '%s' backend (it has: %s)", spec, name, have);
        desc[0] = 0;
        int ndev = out->entry->probe(desc, sizeof desc);
        if (ndev <= 0) return trm_errf(e, "device=%s: the %s backend finds no device (%s)", spec, name, desc);
        if (out->index >= ndev)
            return trm_errf(e, "device=%s: only %d %s device(s) present", spec, ndev, name);
        snprintf(out->why, sizeof out->why, "device=%s: %s (%s)", spec, name, desc);
    }
    trm_caps caps = out->entry->caps;
    if (out->entry->caps_here) out->entry->caps_here(&caps);
    return trm_device_policy(out->entry->name, &caps, req, &out->compile, &out->bf16, warn, e);
}

int trm_device_policy(const char *name, const trm_caps *c, const trm_device_request *req, int *compile, int *bf16,
                      FILE *warn, trm_err *e) {
    if (req->want_distributed && !c->distributed)
        return !strcmp(name, "cpu")
                   ? trm_errf(e, "distributed training on cpu needs the MPI build of trm (this binary was built "
                                 "without MPI, e.g. the fully static one); rebuild with libopenmpi-dev installed "
                                 "and -DTRM_STATIC=OFF, or run one process")
                   : trm_errf(e, "distributed training is not supported on the %s backend; run one process, or "
                                 "use a backend that can all-reduce (cuda, or cpu built with MPI)", name);
    *compile = req->want_compile != 0 && c->compile;
    if (req->want_compile == 1 && !c->compile && warn)
        fprintf(warn, "trm: warning: compile=true is not supported on %s; running the plain op-by-op path\n", name);
    *bf16 = req->want_bf16 && c->bf16;
    if (req->want_bf16 && !c->bf16 && warn)
        fprintf(warn, "trm: warning: forward_dtype=bfloat16 is not supported on %s; computing in float32\n", name);
    return 0;
}

trm_backend *trm_device_open(const trm_device_choice *dc, trm_err *e) {
    trm_backend *be = dc->entry->create(dc->index, e);
    if (!be) return NULL;
    trm_backend_set_bf16(be, dc->bf16);
    const char *prof = getenv("TRM_PROFILE");
    if (prof && *prof && strcmp(prof, "0")) be = trm_profile_wrap(be);
    return be;
}

int trm_device_pick_local(trm_device_choice *dc, int local_rank, trm_err *e) {
    int base = dc->index < 0 ? 0 : dc->index, want = base + local_rank;
    char desc[200] = {0};
    int ndev = dc->entry->probe(desc, sizeof desc);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (ndev == 1 && dc->index < 0 && visible && *visible) { /* each rank is given its own GPU */
        dc->index = 0;
        size_t n = strlen(dc->why);
        snprintf(dc->why + n, sizeof dc->why - n, "; local rank %d uses its one visible %s device", local_rank,
                 dc->entry->name);
        return 0;
    }
    if (want >= ndev)
        return trm_errf(e, "local rank %d needs %s device %d, but only %d are present; start at most %d processes "
                           "per host", local_rank, dc->entry->name, want, ndev, ndev - base);
    dc->index = want;
    size_t n = strlen(dc->why);
    snprintf(dc->why + n, sizeof dc->why - n, "; local rank %d uses %s:%d", local_rank, dc->entry->name, want);
    return 0;
}

void trm_device_share_host(int local_world) {
#ifdef _OPENMP
    const char *env = getenv("OMP_NUM_THREADS");
    if ((env && *env) || local_world <= 1) return;
    int n = omp_get_num_procs() / local_world;
    omp_set_num_threads(n > 0 ? n : 1);
#else
    (void)local_world;
#endif
}
