/* dist.c — the process group (see dist.h). mpirun-launched ranks use MPI for everything;
 * environment-launched ranks (torchrun, `--nproc-per-node`) meet on a TCP rendezvous and,
 * when their data plane is MPI (cpu), join one MPI world through connect/accept, which OpenMPI
 * only allows between separately started processes via its name server, `ompi-server`. */
#include "dist.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef TRM_HAVE_MPI
#include <mpi.h>
#endif
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#define URI_LEN 1024
#define MPI_CHUNK ((size_t)1 << 30) /* MPI counts are int: larger transfers go in pieces */

int trm_dist_have_mpi(void) {
#ifdef TRM_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

const char *trm_launch_name(trm_launch_kind k) {
    return k == TRM_LAUNCH_MPI ? "mpirun" : k == TRM_LAUNCH_ENV ? "a torchrun-style environment" : "a single process";
}

/* ---- environment -------------------------------------------------------------------- */

/* Integer variable `name`; missing → *out = dflt (or an error when dflt < -1 means required). */
static int env_int(const char *name, int dflt, int *out, trm_err *e) {
    const char *s = getenv(name);
    if (!s || !*s) {
        if (dflt < -1) return trm_errf(e, "environment variable %s is not set (the torchrun-style launch needs it)", name);
        *out = dflt;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v > 1000000)
        return trm_errf(e, "environment variable %s=%s: expected a non-negative integer", name, s);
    *out = (int)v;
    return 0;
}

static const char *first_env(const char *const *names) {
    for (; *names; names++)
        if (getenv(*names) && *getenv(*names)) return *names;
    return NULL;
}

static int detect_mpi(trm_dist *d, trm_err *e) {
    static const char *const markers[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", NULL};
    const char *m = first_env(markers);
    if (!m) return 0;
    if (!trm_dist_have_mpi())
        return trm_errf(e, "this process was started by mpirun (%s is set), but this trm binary was built "
                           "without MPI; rebuild with libopenmpi-dev installed and -DTRM_STATIC=OFF, or launch "
                           "with `trm pretrain --nproc-per-node N ...` or torchrun", m);
    d->launch = TRM_LAUNCH_MPI;
    /* provisional values; trm_dist_connect takes the real ones from MPI */
    if (env_int("OMPI_COMM_WORLD_SIZE", 1, &d->world, e) || env_int("OMPI_COMM_WORLD_RANK", 0, &d->rank, e) ||
        env_int("OMPI_COMM_WORLD_LOCAL_RANK", d->rank, &d->local_rank, e) ||
        env_int("OMPI_COMM_WORLD_LOCAL_SIZE", d->world, &d->local_world, e))
        return -1;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && (env_int("PMI_SIZE", 1, &d->world, e) || env_int("PMI_RANK", 0, &d->rank, e)))
        return -1;
    return 1;
}

static int detect_env(trm_dist *d, trm_err *e) {
    if (!getenv("WORLD_SIZE")) return 0;
    if (env_int("WORLD_SIZE", -2, &d->world, e) || env_int("RANK", -2, &d->rank, e)) return -1;
    if (d->world < 1) return trm_errf(e, "WORLD_SIZE=%d: expected at least 1", d->world);
    if (d->rank >= d->world) return trm_errf(e, "RANK=%d is not below WORLD_SIZE=%d", d->rank, d->world);
    if (env_int("LOCAL_RANK", d->rank, &d->local_rank, e) ||
        env_int("LOCAL_WORLD_SIZE", d->world, &d->local_world, e))
        return -1;
    if (d->local_rank >= d->local_world)
        return trm_errf(e, "LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", d->local_rank, d->local_world);
    const char *addr = getenv("MASTER_ADDR");
    snprintf(d->master_addr, sizeof d->master_addr, "%s", addr && *addr ? addr : "127.0.0.1");
    if (d->world > 1) {
        if (env_int("MASTER_PORT", -2, &d->master_port, e)) return -1;
        if (d->master_port < 1 || d->master_port > 65535)
            return trm_errf(e, "MASTER_PORT=%d: expected a TCP port in 1..65535", d->master_port);
        /* torchrun's agent already serves its own store on MASTER_PORT; meet on the next port */
        const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
        if (agent && !strcmp(agent, "True")) d->master_port = d->master_port % 65535 + 1;
    }
    d->launch = d->world > 1 ? TRM_LAUNCH_ENV : TRM_LAUNCH_SINGLE;
    return 1;
}

int trm_dist_detect(trm_dist *d, trm_err *e) {
    memset(d, 0, sizeof *d);
    d->world = d->local_world = 1;
    d->rdzv.listen_fd = -1;
    int r = detect_mpi(d, e);
    if (r == 0) r = detect_env(d, e);
    if (r < 0) return -1;
    if (d->world == 1) d->launch = TRM_LAUNCH_SINGLE;
    return 0;
}

/* ---- MPI ------------------------------------------------------------------------------ */

#ifdef TRM_HAVE_MPI
typedef struct {
    MPI_Comm comm;
    char port[MPI_MAX_PORT_NAME];
    pid_t server; /* ompi-server started by rank 0, or 0 */
} mpi_impl;

static MPI_Comm comm_of(trm_dist *d) { return ((mpi_impl *)d->impl)->comm; }

static int mpi_init(trm_err *e) {
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return trm_errf(e, "MPI_Init failed");
    return 0;
}

static int connect_mpirun(trm_dist *d, trm_err *e) {
    if (mpi_init(e)) return -1;
    mpi_impl *mi = d->impl = xcalloc(1, sizeof *mi);
    MPI_Comm_dup(MPI_COMM_WORLD, &mi->comm);
    MPI_Comm_rank(mi->comm, &d->rank);
    MPI_Comm_size(mi->comm, &d->world);
    MPI_Comm local;
    MPI_Comm_split_type(mi->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &d->local_rank);
    MPI_Comm_size(local, &d->local_world);
    MPI_Comm_free(&local);
    d->mpi = 1;
    return 0;
}

/* In the name server's child: go when rank 0 goes, however it ends (Linux; elsewhere rank 0's
 * exit paths stop it). */
static void die_with_parent(void) {
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
}

static void stop_name_server(mpi_impl *mi) {
    if (mi->server <= 0) return;
    kill(mi->server, SIGTERM);
    waitpid(mi->server, NULL, 0);
    mi->server = 0;
}

/* Rank 0 starts `ompi-server` and reads its contact URI from the file it writes. */
static int start_name_server(mpi_impl *mi, char *uri, trm_err *e) {
    char tmpl[] = "/tmp/trm-ompi-server-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) return trm_errf(e, "cannot create a temporary file for ompi-server's URI: %s", strerror(errno));
    close(fd);
    pid_t pid = fork();
    if (pid < 0) {
        unlink(tmpl);
        return trm_errf(e, "fork for ompi-server failed: %s", strerror(errno));
    }
    if (pid == 0) {
        die_with_parent();
        execlp("ompi-server", "ompi-server", "--no-daemonize", "-r", tmpl, (char *)NULL);
        _exit(127);
    }
    mi->server = pid;
    for (int i = 0; i < 300; i++) { /* up to 30 s */
        FILE *f = fopen(tmpl, "r");
        uri[0] = 0;
        if (f) {
            if (!fgets(uri, URI_LEN, f)) uri[0] = 0;
            fclose(f);
        }
        size_t n = strlen(uri);
        if (n && uri[n - 1] == '\n') {
            uri[n - 1] = 0;
            unlink(tmpl);
            return 0;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            mi->server = 0;
            unlink(tmpl);
            return trm_errf(e, "ompi-server exited (status %d) before it was ready; distributed cpu runs started "
                               "without mpirun need OpenMPI's ompi-server on PATH (package openmpi-bin), or "
                               "launch with `mpirun -np N trm pretrain ...`",
                            WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        }
        usleep(100000);
    }
    unlink(tmpl);
    return trm_errf(e, "ompi-server did not report its URI within 30 s");
}

/* Environment-launched ranks build one communicator in rank order: ranks 0..k-1 accept rank k. */
static int connect_env_mpi(trm_dist *d, trm_err *e) {
    mpi_impl *mi = d->impl = xcalloc(1, sizeof *mi);
    char uri[URI_LEN] = {0};
    trm_err se = {{0}};
    if (d->rank == 0 && start_name_server(mi, uri, &se)) uri[0] = 0;
    if (trm_rdzv_bcast(&d->rdzv, uri, sizeof uri, e)) return -1;
    if (!uri[0]) return d->rank == 0 ? trm_errf(e, "%s", se.msg) : trm_errf(e, "rank 0 could not start ompi-server (see its message)");
    setenv("OMPI_MCA_pmix_server_uri", uri, 1);
    if (mpi_init(e)) return -1;
    if (d->rank == 0) MPI_Open_port(MPI_INFO_NULL, mi->port);
    if (trm_rdzv_bcast(&d->rdzv, mi->port, sizeof mi->port, e)) return -1;
    MPI_Comm comm = MPI_COMM_SELF, inter, merged;
    /* One joiner at a time: every rank connects to the same port, so with ranks k and k+1
     * connecting together, the accept meant for k could take k+1 and the ranks would come out of
     * order. The barrier before step k lets rank k connect only once ranks 0..k-1 are merged. */
    for (int k = 1; k < d->world; k++) {
        if (trm_rdzv_barrier(&d->rdzv, e)) return trm_err_prefix(e, "joining the MPI world");
        if (d->rank == k) {
            MPI_Comm_connect(mi->port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
            MPI_Intercomm_merge(inter, 1, &comm);
            MPI_Comm_free(&inter);
        } else if (d->rank < k) {
            MPI_Comm_accept(mi->port, MPI_INFO_NULL, 0, comm, &inter);
            MPI_Intercomm_merge(inter, 0, &merged);
            MPI_Comm_free(&inter);
            if (comm != MPI_COMM_SELF) MPI_Comm_free(&comm);
            comm = merged;
        }
    }
    int r = -1, w = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &w);
    if (r != d->rank || w != d->world)
        return trm_errf(e, "joining the MPI world gave rank %d of %d, expected %d of %d", r, w, d->rank, d->world);
    mi->comm = comm;
    d->mpi = 1;
    return 0;
}

static void mpi_finalize(trm_dist *d) {
    mpi_impl *mi = d->impl;
    if (!mi) return;
    if (d->mpi) {
        MPI_Barrier(mi->comm);
        /* MPI_Comm_disconnect would wait on a fence across the joined jobs that OpenMPI 4
         * never completes; freeing the communicator and finalizing is enough */
        MPI_Comm_free(&mi->comm);
        if (mi->port[0] && d->rank == 0) MPI_Close_port(mi->port);
        MPI_Finalize();
    }
    stop_name_server(mi);
    free(mi);
    d->impl = NULL;
    d->mpi = 0;
}
#endif

/* ---- connect / finalize ------------------------------------------------------------------ */

int trm_dist_connect(trm_dist *d, int need_mpi, trm_err *e) {
    if (d->world == 1 || d->connected) return 0;
#ifdef TRM_HAVE_MPI
    if (d->launch == TRM_LAUNCH_MPI) {
        if (connect_mpirun(d, e)) return -1;
        d->connected = 1;
        return 0;
    }
#endif
    if (trm_rdzv_open(&d->rdzv, d->master_addr, d->master_port, d->rank, d->world, 300.0, e))
        return trm_err_prefix(e, "rank %d: rendezvous on %s:%d", d->rank, d->master_addr, d->master_port);
    d->connected = 1;
    if (!need_mpi) return 0;
#ifdef TRM_HAVE_MPI
    return connect_env_mpi(d, e);
#else
    return trm_errf(e, "distributed cpu training needs the MPI build of trm (libopenmpi-dev at build time)");
#endif
}

void trm_dist_finalize(trm_dist *d) {
#ifdef TRM_HAVE_MPI
    mpi_finalize(d);
#endif
    if (d->launch == TRM_LAUNCH_ENV) trm_rdzv_close(&d->rdzv);
    d->connected = 0;
}

void trm_dist_abort(trm_dist *d, int code) {
#ifdef TRM_HAVE_MPI
    if (d->impl) stop_name_server(d->impl);
    if (d->mpi) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(((mpi_impl *)d->impl)->comm, code);
    }
#endif
    (void)d;
    (void)code;
}

/* ---- host collectives --------------------------------------------------------------------- */

#ifdef TRM_HAVE_MPI
static int use_mpi_host(const trm_dist *d) { return d->mpi && d->launch == TRM_LAUNCH_MPI; }
#endif

int trm_dist_bcast(trm_dist *d, void *buf, size_t bytes, trm_err *e) {
    if (d->world == 1) return 0;
#ifdef TRM_HAVE_MPI
    if (use_mpi_host(d)) {
        for (size_t o = 0; o < bytes; o += MPI_CHUNK) {
            size_t c = bytes - o < MPI_CHUNK ? bytes - o : MPI_CHUNK;
            if (MPI_Bcast((char *)buf + o, (int)c, MPI_BYTE, 0, comm_of(d)) != MPI_SUCCESS)
                return trm_errf(e, "MPI_Bcast of %zu bytes failed", bytes);
        }
        return 0;
    }
#endif
    return trm_rdzv_bcast(&d->rdzv, buf, bytes, e);
}

/* Every rank's n doubles, in rank order, on every rank. */
static int allgather_f64(trm_dist *d, const double *buf, double *all, size_t n, trm_err *e) {
#ifdef TRM_HAVE_MPI
    if (use_mpi_host(d)) {
        if (n > MPI_CHUNK / sizeof *buf) return trm_errf(e, "allgather of %zu doubles per rank is too large", n);
        return MPI_Allgather(buf, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, comm_of(d)) == MPI_SUCCESS
                   ? 0 : trm_errf(e, "MPI_Allgather failed");
    }
#endif
    return trm_rdzv_allgather(&d->rdzv, buf, all, n * sizeof *buf, e);
}

int trm_dist_allreduce_f64(trm_dist *d, double *buf, size_t n, trm_err *e) {
    if (d->world == 1) return 0;
    /* gathered and summed in rank order rather than MPI_Allreduce'd: MPI's order depends on its
     * algorithm, so with 3+ ranks mpirun's logged metrics would differ in the last bit from the
     * same run launched by trm or torchrun */
    double *all = xmalloc(n * (size_t)d->world * sizeof *all);
    int rc = allgather_f64(d, buf, all, n, e);
    if (!rc)
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < d->world; r++) s += all[(size_t)r * n + i];
            buf[i] = s;
        }
    free(all);
    return rc;
}

int trm_dist_barrier(trm_dist *d, trm_err *e) {
    if (d->world == 1) return 0;
#ifdef TRM_HAVE_MPI
    if (use_mpi_host(d)) return MPI_Barrier(comm_of(d)) == MPI_SUCCESS ? 0 : trm_errf(e, "MPI_Barrier failed");
#endif
    return trm_rdzv_barrier(&d->rdzv, e);
}

/* ---- the MPI data plane ------------------------------------------------------------------- */

int trm_dist_mpi_allreduce_f32(trm_dist *d, float *buf, size_t n, trm_err *e) {
#ifdef TRM_HAVE_MPI
    if (d->mpi) {
        for (size_t o = 0; o < n; o += MPI_CHUNK) {
            size_t c = n - o < MPI_CHUNK ? n - o : MPI_CHUNK;
            if (MPI_Allreduce(MPI_IN_PLACE, buf + o, (int)c, MPI_FLOAT, MPI_SUM, comm_of(d)) != MPI_SUCCESS)
                return trm_errf(e, "MPI_Allreduce of %zu floats failed", n);
        }
        return 0;
    }
#endif
    (void)buf;
    (void)n;
    return d->world == 1 ? 0 : trm_errf(e, "the MPI data plane is not connected");
}

int trm_dist_mpi_allgather(trm_dist *d, const void *send, void *recv, size_t bytes, trm_err *e) {
    if (d->world == 1) {
        memmove(recv, send, bytes);
        return 0;
    }
#ifdef TRM_HAVE_MPI
    if (d->mpi) {
        if (bytes > MPI_CHUNK) return trm_errf(e, "allgather of %zu bytes per rank is too large", bytes);
        return MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, comm_of(d)) == MPI_SUCCESS
                   ? 0 : trm_errf(e, "MPI_Allgather failed");
    }
#endif
    return trm_errf(e, "the MPI data plane is not connected");
}
