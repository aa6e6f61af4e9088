/* rendezvous.h — TCP rendezvous of the processes of one torchrun-style run (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT): a star of sockets around rank 0 that carries small blobs (an NCCL
 * unique id, an MPI port name) and barriers. Not a data plane: every collective goes through
 * rank 0. All ranks must make the same calls, in the same order, with the same sizes; a
 * disagreement is reported as an error rather than a hang. */
#ifndef TRM_RENDEZVOUS_H
#define TRM_RENDEZVOUS_H
#include <stddef.h>

#include "util/util.h"

typedef struct {
    int rank, world;
    int listen_fd;    /* rank 0 only, else -1 */
    int *fds;         /* rank 0: world entries, fds[r] = socket to rank r (fds[0] = -1); others: one entry, the socket to rank 0 */
    double timeout_s; /* every blocking wait (connect, accept, each transfer) gives up after this */
} trm_rdzv;

/* Rank 0 listens on port `port` of all interfaces (SO_REUSEADDR) and accepts world-1 peers; the
 * others connect to addr:port (host name or IP, resolved with getaddrinfo), retrying every 100 ms
 * until timeout_s, so they may start before rank 0. A handshake (magic, version, rank, world)
 * rejects a peer with another world size, a duplicate or out-of-range rank, or something that is
 * not trm. world == 1: no sockets at all. */
int trm_rdzv_open(trm_rdzv *r, const char *addr, int port, int rank, int world, double timeout_s, trm_err *e);
/* 1 when rank 0 could listen on `port` now, as trm_rdzv_open would (a probe: nothing is kept) */
int trm_rdzv_port_free(int port);
/* buf (n bytes) of rank 0 is copied to every rank. */
int trm_rdzv_bcast(trm_rdzv *r, void *buf, size_t n, trm_err *e);
/* all (world*n bytes) gets every rank's `mine` in rank order, on every rank. */
int trm_rdzv_allgather(trm_rdzv *r, const void *mine, void *all, size_t n, trm_err *e);
int trm_rdzv_barrier(trm_rdzv *r, trm_err *e);
void trm_rdzv_close(trm_rdzv *r); /* safe on a zeroed / failed struct */

#endif
