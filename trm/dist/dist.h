/* dist.h — the process group of a distributed run, device-free: how this process learns its
 * rank (mpirun, a torchrun-style environment, or nothing: one process), the host-side
 * collectives on small data (a unique id, metrics, a stop flag), and the MPI data plane the
 * cpu backend uses for gradients. Device collectives on large buffers are backend ops
 * (backend.h: comm_init, allreduce_sum, allgather) — NCCL on cuda, these MPI calls on cpu. */
#ifndef TRM_DIST_H
#define TRM_DIST_H
#include <stddef.h>
#include <stdint.h>

#include "rendezvous.h"
#include "util/util.h"

typedef enum {
    TRM_LAUNCH_SINGLE = 0, /* one process: no environment says otherwise */
    TRM_LAUNCH_MPI,        /* started by mpirun (OpenMPI/PMIx/PMI environment) */
    TRM_LAUNCH_ENV         /* RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (torchrun, --nproc-per-node) */
} trm_launch_kind;

typedef struct trm_dist {
    trm_launch_kind launch;
    int rank, world, local_rank, local_world;
    char master_addr[256];
    int master_port;
    int connected; /* host collectives usable */
    int mpi;       /* the MPI world is up (mpirun, or joined through an MPI name server) */
    trm_rdzv rdzv; /* TRM_LAUNCH_ENV: sockets to rank 0 */
    void *impl;    /* MPI communicator and the name server child, when built with MPI */
} trm_dist;

/* Whether this binary can run distributed CPU training (built with MPI). */
int trm_dist_have_mpi(void);
const char *trm_launch_name(trm_launch_kind k);

/* Reads the environment only (no communication): launch style, rank, world size, local rank.
 * Errors: inconsistent or malformed variables, mpirun without the MPI build. */
int trm_dist_detect(trm_dist *d, trm_err *e);
/* Connects the processes: rendezvous on MASTER_ADDR:MASTER_PORT and/or MPI_Init. need_mpi: the
 * data plane is MPI (cpu backend), so environment-launched ranks join one MPI world through an
 * `ompi-server` name server started by rank 0. Nothing happens for one process. */
int trm_dist_connect(trm_dist *d, int need_mpi, trm_err *e);
void trm_dist_finalize(trm_dist *d);
/* After a failure on this rank: stops every rank of an MPI world (MPI_Abort); environment-
 * launched runs are stopped by their launcher when this process exits non-zero. */
void trm_dist_abort(trm_dist *d, int code);

/* Host collectives (every rank must call them in the same order). */
int trm_dist_bcast(trm_dist *d, void *buf, size_t bytes, trm_err *e);                  /* from rank 0 */
int trm_dist_allreduce_f64(trm_dist *d, double *buf, size_t n, trm_err *e);            /* sum, in place */
int trm_dist_barrier(trm_dist *d, trm_err *e);

/* The MPI data plane (only when d->mpi): in-place float sum and an allgather of `bytes` per rank
 * into recv (world*bytes, rank order). */
int trm_dist_mpi_allreduce_f32(trm_dist *d, float *buf, size_t n, trm_err *e);
int trm_dist_mpi_allgather(trm_dist *d, const void *send, void *recv, size_t bytes, trm_err *e);

/* The rest of the face of dist/: the launcher of `trm pretrain --nproc-per-node`. */
#include "launch.h"

#endif
