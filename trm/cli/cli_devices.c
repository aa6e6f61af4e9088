/* cli_devices.c — `trm devices`: the backends compiled into this binary, the devices each
 * one finds, their capabilities, what device=auto would pick, and how this process would run
 * distributed (its launch environment, the engine of each backend). */
#include <stdarg.h>
#include <string.h>

#include "commands.h"
#include "backend/backend.h"
#include "dist/dist.h"
#include "view/view.h"

/* One line of the listing, wrapped to 80 columns with continuations under its text. */
static void line(int cont, const char *fmt, ...) TRM_PRINTF(2, 3);
static void line(int cont, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    trm_print_wrapped_indent(stdout, TRM_LINE_WIDTH, cont, buf);
}

static const char *yn(int v) { return v ? "yes" : "no"; }

int cmd_devices(int argc, char **argv, const trm_globals *g) {
    (void)g;
    if (argc > 0) {
        fprintf(stderr, "usage: trm devices\n");
        return 2;
    }
    printf("backends compiled in:\n");
    for (int i = 0; i < trm_backend_count(); i++) {
        const trm_backend_entry *be = trm_backend_at(i);
        char desc[256] = "";
        int n = be->probe(desc, sizeof desc);
        line(8, "  %-5s %d device%s%s%s", be->name, n, n == 1 ? "" : "s", *desc ? ": " : "", desc);
        if (!strcmp(be->name, "cpu")) {
            uint64_t mem = trm_host_memory_bytes();
            if (mem) printf("        memory: %.1f GiB\n", (double)mem / (1024.0 * 1024.0 * 1024.0));
        }
        trm_caps caps = be->caps;
        if (be->caps_here) be->caps_here(&caps);
        const char *engine = !caps.distributed ? (strcmp(be->name, "cpu") ? "" : " (needs the MPI build)")
                             : !strcmp(be->name, "cuda") ? " (NCCL, loaded at run time)"
                                                         : " (MPI)";
        line(10, "        capabilities: compile %s, distributed %s%s, bf16 %s, unified memory %s", yn(caps.compile),
             yn(caps.distributed), engine, yn(caps.bf16), yn(caps.unified_memory));
    }
    /* which build has a backend this one lacks */
    static const char *const known[][2] = {
        {"cpu", ""},
        {"cuda", "built when cmake finds nvcc (TRM_CUDA=AUTO)"},
        {"mps", "Vulkan compute, in the dynamic build: cmake -DTRM_STATIC=OFF with glslc and "
                "libvulkan-dev (any CUDA build is dynamic too)"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (trm_backend_find(known[i][0])) continue;
        const trm_caps *c = trm_known_caps(known[i][0]);
        line(8, "not in this binary: %-5s (capabilities: compile %s, distributed %s, bf16 %s, unified memory %s)",
             known[i][0], yn(c->compile), yn(c->distributed), yn(c->bf16), yn(c->unified_memory));
        if (known[i][1][0]) line(8, "        %s", known[i][1]);
    }
    trm_device_request req = {0};
    trm_device_choice dc;
    trm_err e;
    if (trm_device_choose("auto", &req, &dc, NULL, &e) == 0)
        line(2, "%s", dc.why);
    else
        line(2, "device=auto: %s", e.msg);
    trm_dist d;
    if (trm_dist_detect(&d, &e))
        line(2, "launch environment: %s", e.msg);
    else if (d.world > 1)
        line(2, "this process: rank %d of %d (local rank %d of %d), launched by %s", d.rank, d.world, d.local_rank,
             d.local_world, trm_launch_name(d.launch));
    else
        line(2, "this process: one process (distributed: trm pretrain --nproc-per-node N, mpirun -np N, or "
                "torchrun)");
    return 0;
}
