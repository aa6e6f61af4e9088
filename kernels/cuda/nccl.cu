/* nccl.cu — the cuda backend's collectives through NCCL, loaded with dlopen when a distributed
 * run starts: a one-GPU binary then starts on machines without NCCL, and the build needs no
 * NCCL headers (the handful of types used are NCCL's stable ABI, declared below). The unique
 * id travels through the run's process group (dist.h: MPI or the TCP rendezvous). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"

extern "C" {
#include "dist/dist.h"
}

typedef struct {
    char internal[128];
} nccl_unique_id;
typedef void *nccl_comm_t;
typedef int nccl_result_t;
enum { NCCL_INT8 = 0, NCCL_FLOAT32 = 7 };
enum { NCCL_SUM = 0 };

typedef struct {
    void *lib;
    nccl_result_t (*get_unique_id)(nccl_unique_id *);
    nccl_result_t (*comm_init_rank)(nccl_comm_t *, int, nccl_unique_id, int);
    nccl_result_t (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    nccl_result_t (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cudaStream_t);
    nccl_result_t (*comm_destroy)(nccl_comm_t);
    const char *(*error_string)(nccl_result_t);
    nccl_comm_t comm;
    int world;
} nccl_ctx;

#ifndef TRM_CUDA_LIBDIR
#define TRM_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

static int load_nccl(nccl_ctx *n, trm_err *e) {
    const char *names[] = {"libnccl.so.2", "libnccl.so", TRM_CUDA_LIBDIR "/libnccl.so.2"};
    const char *why = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !n->lib; i++) {
        n->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!n->lib) why = dlerror();
    }
    if (!n->lib)
        return trm_errf(e, "distributed cuda training needs NCCL, and libnccl.so.2 could not be loaded (%s); "
                           "install NCCL (Debian/Ubuntu: libnccl2) or add its directory to LD_LIBRARY_PATH", why);
#define SYM(field, name)                                                                        \
    if (!(*(void **)&n->field = dlsym(n->lib, name)))                                           \
        return trm_errf(e, "libnccl.so.2 has no %s; NCCL 2.x is needed", name);
    SYM(get_unique_id, "ncclGetUniqueId")
    SYM(comm_init_rank, "ncclCommInitRank")
    SYM(all_reduce, "ncclAllReduce")
    SYM(all_gather, "ncclAllGather")
    SYM(comm_destroy, "ncclCommDestroy")
    SYM(error_string, "ncclGetErrorString")
#undef SYM
    return 0;
}

static void nccl_fatal(nccl_ctx *n, nccl_result_t r, const char *what) {
    fprintf(stderr, "trm: nccl: %s failed: %s (rerun with NCCL_DEBUG=WARN for NCCL's own report)\n", what,
            n->error_string ? n->error_string(r) : "?");
    exit(1);
}

void *trm_nccl_init(trm_dist *d, trm_err *e) {
    nccl_ctx *n = (nccl_ctx *)xcalloc(1, sizeof *n);
    nccl_unique_id id;
    memset(&id, 0, sizeof id);
    /* rank 0 reports a failed load through an all-zero id, so no rank waits forever */
    int ok = load_nccl(n, e) == 0;
    if (ok && d->rank == 0 && n->get_unique_id(&id) != 0) {
        ok = 0;
        trm_errf(e, "ncclGetUniqueId failed");
    }
    if (trm_dist_bcast(d, &id, sizeof id, e)) ok = 0;
    static const nccl_unique_id zero = {{0}};
    if (ok && !memcmp(&id, &zero, sizeof id)) {
        ok = 0;
        trm_errf(e, "rank 0 could not set up NCCL (see its message)");
    }
    nccl_result_t r;
    if (ok && (r = n->comm_init_rank(&n->comm, d->world, id, d->rank)) != 0) {
        ok = 0;
        trm_errf(e, "ncclCommInitRank (rank %d of %d) failed: %s", d->rank, d->world, n->error_string(r));
    }
    if (!ok) {
        if (n->lib) dlclose(n->lib);
        free(n);
        return NULL;
    }
    n->world = d->world;
    return n;
}

void trm_nccl_allreduce_sum(void *ctx, float *buf, size_t count, cudaStream_t st) {
    nccl_ctx *n = (nccl_ctx *)ctx;
    nccl_result_t r = n->all_reduce(buf, buf, count, NCCL_FLOAT32, NCCL_SUM, n->comm, st);
    if (r) nccl_fatal(n, r, "ncclAllReduce");
}

void trm_nccl_allgather(void *ctx, const void *send, void *recv, size_t bytes, cudaStream_t st) {
    nccl_ctx *n = (nccl_ctx *)ctx;
    nccl_result_t r = n->all_gather(send, recv, bytes, NCCL_INT8, n->comm, st);
    if (r) nccl_fatal(n, r, "ncclAllGather");
}

void trm_nccl_destroy(void *ctx) {
    nccl_ctx *n = (nccl_ctx *)ctx;
    if (!n) return;
    if (n->comm) n->comm_destroy(n->comm);
    /* the library stays loaded: NCCL's own threads may still be winding down */
    free(n);
}
