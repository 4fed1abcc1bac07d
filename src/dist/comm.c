/* The process group and its collectives on tensors, on MPI (Open MPI). Each collective first
   exchanges a header (which collective, the rank's count of collectives, op, root, dtype,
   shape) with every peer by point-to-point messages, so every rank sees what every other one
   called: a mismatch fails on every rank naming the rank that differs, and a peer that does not
   arrive before the deadline is named in the timeout's error. The payload then runs as a
   non-blocking MPI call polled against the same deadline (MPI's error handler returns errors;
   nothing aborts or hangs). The header costs 2(N-1) small messages per rank and call; DDP's
   buckets skip it (ddp.c checks its layout once). Without MPI (NABLA_WITH_MPI=OFF), or when
   the process was not started by a launcher, the group is one process and every collective is
   local. */
#include "dist_impl.h"
#include "../data/data_impl.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef NABLA_HAVE_MPI
#include <mpi.h>
#endif

enum { KIND_ALL_REDUCE = 1, KIND_BROADCAST, KIND_ALL_GATHER, KIND_REDUCE_SCATTER, KIND_BARRIER };
static const char *const kind_fn[] = { "", "nb_dist_all_reduce", "nb_dist_broadcast", "nb_dist_all_gather",
                                       "nb_dist_reduce_scatter", "nb_dist_barrier" };
#ifdef NABLA_HAVE_MPI /* the MPI build's only */
static const char *const op_name[] = { "NB_REDUCE_SUM", "NB_REDUCE_AVG", "NB_REDUCE_MAX", "NB_REDUCE_MIN" };
#endif

#define DEFAULT_TIMEOUT 60.0

/* The group: set by nb_dist_init on the thread that runs the collectives (MPI_THREAD_SERIALIZED:
   one thread at a time). */
static struct {
    bool initialized;
    bool mpi;           /* the collectives run on MPI (started by a launcher, MPI built) */
    bool own_mpi;       /* nb_dist_init called MPI_Init, so nb_dist_finalize finalizes */
    int rank, size;
    uint64_t seq;       /* collectives with a header so far */
    double timeout;     /* seconds; 0: the default */
    double env_timeout; /* $NABLA_DIST_TIMEOUT, read by nb_dist_init (0: unset) */
    char failed[600];   /* non-empty: the group is unusable, and why */
    void **adopted;     /* memory abandoned collectives may still write */
    int nadopted, adopted_cap;
#ifdef NABLA_HAVE_MPI
    MPI_Comm comm;      /* a duplicate of MPI_COMM_WORLD: nabla's messages never meet the program's */
    MPI_Comm side;      /* a second duplicate: collectives started while others run (FSDP's gradient
                           reduce-scatters beside its parameter all-gathers) keep their own order */
#endif
} G = { .rank = 0, .size = 1 };

/* ---- the MPI lock and the progress thread ----
   MPI moves a non-blocking collective on only inside MPI calls. Where nabla initialised MPI
   itself, a thread of its own tests the collectives handed to nb__dist_progress every 50 us
   while the caller computes (backward), so a bucket's allreduce runs beside the backward of
   the layers below it. MPI is initialised MPI_THREAD_SERIALIZED, so every MPI call nabla makes
   after initialisation holds mpi_lock. A program that initialised MPI itself gets no progress
   thread (its own MPI calls would not hold the lock); NABLA_DIST_PROGRESS=0 turns it off. */
#ifdef NABLA_HAVE_MPI
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
#define MPI_LOCK() pthread_mutex_lock(&mpi_lock)
#define MPI_UNLOCK() pthread_mutex_unlock(&mpi_lock)

enum { PROGRESS_MAX = 256 };
static struct {
    pthread_mutex_t lock; /* the set and the flags; taken before mpi_lock, never after */
    pthread_cond_t wake;
    pthread_t thread;
    bool enabled, running, stop;
    nb_dist_op *ops[PROGRESS_MAX];
    int n;
} P = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };
static void progress_stop(void);
#endif

double nb__dist_now(void) { return nb__now(); }

static double timeout_seconds(void) {
    if (G.timeout > 0) return G.timeout;
    if (G.env_timeout > 0) return G.env_timeout;
    return DEFAULT_TIMEOUT;
}

double nb_dist_set_timeout(double seconds) {
    double prev = timeout_seconds();
    G.timeout = seconds > 0 && isfinite(seconds) ? seconds : 0;
    return prev;
}

/* The launcher's world size from its environment: > 0 when started by mpirun/mpiexec/srun
   (1 when the launcher's variable names no size), 0 when not; *var names the variable. */
static int launched_size(const char **var, const char **value) {
    static const char *const sized[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE" };
    for (size_t i = 0; i < sizeof sized / sizeof *sized; i++) {
        const char *v = getenv(sized[i]);
        if (v && *v) {
            *var = sized[i];
            *value = v;
            long n = strtol(v, NULL, 10);
            return n > 0 && n < INT_MAX ? (int)n : 1;
        }
    }
    const char *v = getenv("PMIX_RANK");
    if (v && *v) { *var = "PMIX_RANK"; *value = v; return 1; }
    return 0;
}

const char *nb_dist_backend(void) {
#ifdef NABLA_HAVE_MPI
    static char text[MPI_MAX_LIBRARY_VERSION_STRING + 8];
    if (!text[0]) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int n = 0;
        MPI_Get_library_version(v, &n); /* callable before MPI_Init */
        v[n < (int)sizeof v ? n : (int)sizeof v - 1] = 0;
        char *nl = strchr(v, '\n');
        if (nl) *nl = 0;
        char *comma = strstr(v, ", package");
        if (comma) *comma = 0;
        snprintf(text, sizeof text, "MPI (%s)", v);
    }
    return text;
#else
    return "none (built without MPI: NABLA_WITH_MPI=OFF)";
#endif
}

#ifdef NABLA_HAVE_MPI
/* "fn: what: MPI's message" */
static void mpi_error(const char *fn, const char *what, int code) {
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, msg, &n) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", code);
    else msg[n < (int)sizeof msg ? n : (int)sizeof msg - 1] = 0;
    nb__error("%s: %s failed on rank %d: %s", fn, what, G.rank, msg);
}
#endif

#ifdef NABLA_HAVE_MPI /* the MPI build's only */
/* Marks the group unusable with the error just recorded. */
static void fail_group(void) {
    if (G.failed[0]) return;
    const char *e = nb_error();
    snprintf(G.failed, sizeof G.failed, "%s", e ? e : "a collective failed");
}
#endif

int nb__dist_usable(const char *fn) {
    if (!G.initialized) {
        nb__error("%s: the process group is not initialised (call nb_dist_init first)", fn);
        return -1;
    }
    if (G.failed[0]) {
        nb__error("%s: the process group is unusable since an earlier collective failed (%s); restart the job", fn,
                  G.failed);
        return -1;
    }
    return 0;
}

int nb_dist_init(int *argc, char ***argv) {
    if (G.initialized) return 0;
    const char *env = getenv("NABLA_DIST_TIMEOUT");
    if (env && *env) {
        char *end;
        errno = 0;
        double t = strtod(env, &end);
        if (errno || *end || !(t > 0) || !isfinite(t)) {
            nb__error("nb_dist_init: NABLA_DIST_TIMEOUT=\"%s\" is not a positive number of seconds", env);
            return -1;
        }
        G.env_timeout = t;
    }
    const char *var = NULL, *value = NULL;
    int launched = launched_size(&var, &value);
    G.rank = 0;
    G.size = 1;
    G.seq = 0;
    G.failed[0] = 0;
#ifdef NABLA_HAVE_MPI
    int already = 0, finalized = 0;
    MPI_Initialized(&already);
    MPI_Finalized(&finalized);
    if (finalized) {
        nb__error("nb_dist_init: MPI was finalized already; it cannot be initialised again in this process");
        return -1;
    }
    if (launched > 0 || already) {
        if (!already) {
            /* Open MPI 4.1 picks recursive doubling for a non-blocking allreduce, which here
               took 9.7 ms for DDP's 13 MB bucket on 2 ranks against 4.0 ms for the ring (and
               4.5 ms for the blocking allreduce); the ring also moves the fewest bytes as ranks
               grow. Unless the user chose one (the variable is set), DDP's buckets take the
               ring. It gives every rank the same bits. */
            setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
            int provided = 0;
            /* MPI_Init failures abort inside MPI itself (MPI's error handler is only set after it) */
            if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
                nb__error("nb_dist_init: MPI_Init_thread failed");
                return -1;
            }
            G.own_mpi = true;
            const char *prog = getenv("NABLA_DIST_PROGRESS");
            P.enabled = !prog || strcmp(prog, "0") != 0;
        }
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &G.comm);
        if (rc != MPI_SUCCESS) {
            mpi_error("nb_dist_init", "MPI_Comm_dup", rc);
            if (G.own_mpi) MPI_Finalize();
            G.own_mpi = false;
            return -1;
        }
        MPI_Comm_set_errhandler(G.comm, MPI_ERRORS_RETURN);
        rc = MPI_Comm_dup(MPI_COMM_WORLD, &G.side);
        if (rc != MPI_SUCCESS) {
            mpi_error("nb_dist_init", "MPI_Comm_dup", rc);
            MPI_Comm_free(&G.comm);
            if (G.own_mpi) MPI_Finalize();
            G.own_mpi = false;
            return -1;
        }
        MPI_Comm_set_errhandler(G.side, MPI_ERRORS_RETURN);
        MPI_Comm_rank(G.comm, &G.rank);
        MPI_Comm_size(G.comm, &G.size);
        G.mpi = true;
    }
#else
    (void)argc;
    (void)argv;
    if (launched > 1) {
        nb__error("nb_dist_init: started by an MPI launcher as one of %d processes (%s=%s), but nabla was built without "
                  "MPI (NABLA_WITH_MPI=OFF): install libopenmpi-dev and configure with -DNABLA_WITH_MPI=ON",
                  launched, var, value);
        return -1;
    }
#endif
    G.initialized = true;
    nb__data_set_dist_default(G.rank, G.size);
    return 0;
}

void nb_dist_finalize(void) {
    if (!G.initialized) return;
#ifdef NABLA_HAVE_MPI
    progress_stop();
    P.enabled = false;
    if (G.mpi) {
        /* after a failure the duplicate may still have collectives in flight: leave it to MPI_Finalize */
        if (!G.failed[0]) MPI_Comm_free(&G.comm), MPI_Comm_free(&G.side);
        if (G.own_mpi) MPI_Finalize();
    }
#endif
    for (int i = 0; i < G.nadopted; i++) free(G.adopted[i]);
    free(G.adopted);
    G.adopted = NULL;
    G.nadopted = G.adopted_cap = 0;
    G.initialized = G.mpi = G.own_mpi = false;
    G.rank = 0;
    G.size = 1;
    nb__data_set_dist_default(0, 1);
}

const char *nb_dist_failure(void) { return G.initialized && G.failed[0] ? G.failed : NULL; }

void nb_dist_abort(int code) {
    if (code == 0) code = 1;
#ifdef NABLA_HAVE_MPI
    if (G.initialized && G.mpi) {
        progress_stop(); /* MPI is serialized: no test of the progress thread beside the abort */
        MPI_LOCK();
        MPI_Abort(MPI_COMM_WORLD, code);
        MPI_UNLOCK();
    }
#endif
    exit(code);
}

bool nb_dist_is_initialized(void) { return G.initialized; }
int nb_dist_rank(void) { return G.rank; }
int nb_dist_world_size(void) { return G.size; }

void nb__dist_adopt(void *mem) {
    if (!mem) return;
    if (G.nadopted == G.adopted_cap) {
        int cap = G.adopted_cap ? 2 * G.adopted_cap : 8;
        void **grown = realloc(G.adopted, sizeof(void *) * (size_t)cap);
        if (!grown) return; /* leaked rather than freed under a collective that may still write it */
        G.adopted = grown;
        G.adopted_cap = cap;
    }
    G.adopted[G.nadopted++] = mem;
}

/* ---- polling ---- */

#ifdef NABLA_HAVE_MPI /* the MPI build's only */
/* Waits a little between tests of a pending collective, waited seconds into the wait. MPI moves
   a collective on only inside the test calls, a step of its algorithm at a time, so a sleep
   between them stalls it: for the first 10 ms it yields (giving the core to a peer that shares
   it, else returning at once), then naps up to 200 us, so a rank waiting long leaves the cores
   to those still computing. */
static void backoff(int *spins, double waited) {
    if (waited < 0.01) sched_yield();
    else {
        long ns = 2000L << (*spins / 64 < 7 ? *spins / 64 : 7);
        struct timespec ts = { 0, ns > 200000 ? 200000 : ns };
        nanosleep(&ts, NULL);
    }
    ++*spins;
}
#endif

#ifdef NABLA_HAVE_MPI
/* Polls reqs until all are done (0), the deadline passes (1: done[i] tells which finished) or
   MPI reports an error (-1, recorded as fn's with what). */
static int poll_requests(MPI_Request *reqs, int n, bool *done, double deadline, const char *fn, const char *what) {
    int left = 0;
    for (int i = 0; i < n; i++) {
        done[i] = reqs[i] == MPI_REQUEST_NULL;
        left += !done[i];
    }
    int *idx = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!idx) { nb__error("%s: out of memory", fn); return -1; }
    int spins = 0;
    double start = nb__dist_now();
    while (left > 0) {
        int outcount = 0;
        MPI_LOCK();
        int rc = MPI_Testsome(n, reqs, &outcount, idx, MPI_STATUSES_IGNORE);
        MPI_UNLOCK();
        if (rc != MPI_SUCCESS) {
            free(idx);
            mpi_error(fn, what, rc);
            return -1;
        }
        if (outcount == MPI_UNDEFINED) break;
        for (int k = 0; k < outcount; k++) done[idx[k]] = true;
        left -= outcount;
        if (left == 0) break;
        if (nb__dist_now() > deadline) { free(idx); return 1; }
        if (outcount == 0) backoff(&spins, nb__dist_now() - start);
    }
    free(idx);
    return 0;
}

/* After a timeout: which peers are still there. Every rank that times out sends every peer, on
   the side communicator (its own tag), how late it noticed its own timeout, and listens for
   theirs for up to PING_GRACE seconds (or the timeout, when shorter). A peer whose word did not
   come in that time is stopped (SIGSTOP, a debugger), dead or cut off; so is one that noticed its
   timeout more than LATE_LIMIT s after its deadline: it was stopped while it waited and has just
   been continued (mpirun continues every rank to end a job one of them aborted). One that
   answered in time was alive, waiting on someone else. The survivors of one failure time out
   within about the same moment (each waited one timeout on the same collective), so the grace
   covers their skew. my_late: how late this rank noticed its own timeout. Writes the silent
   ranks ("1" or "1, 3") into names ("" when every peer answered); the words not delivered are
   left to MPI (the group is unusable after a timeout anyway). */
#define PING_TAG 7102
#define PING_GRACE 1.0
#define LATE_LIMIT 0.5
static void silent_peers(char *names, size_t size, double my_late) {
    names[0] = 0;
    int peers = G.size - 1;
    static double word; /* the sends may outlive this call: a buffer that stays */
    word = my_late;
    double *got = malloc(sizeof(double) * (size_t)(peers > 0 ? peers : 1));
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)(peers > 0 ? peers : 1));
    bool *done = malloc(sizeof(bool) * 2 * (size_t)(peers > 0 ? peers : 1));
    if (!got || !reqs || !done || peers < 1) {
        free(got); free(reqs); free(done);
        return;
    }
    int k = 0, rc = MPI_SUCCESS;
    for (int j = 0; j < peers && rc == MPI_SUCCESS; j++) {
        int r = j < G.rank ? j : j + 1;
        MPI_LOCK();
        rc = MPI_Irecv(&got[j], 1, MPI_DOUBLE, r, PING_TAG, G.side, &reqs[k]);
        MPI_UNLOCK();
        if (rc == MPI_SUCCESS) k++;
    }
    for (int j = 0; j < peers && rc == MPI_SUCCESS; j++) {
        int r = j < G.rank ? j : j + 1;
        MPI_LOCK();
        rc = MPI_Isend(&word, 1, MPI_DOUBLE, r, PING_TAG, G.side, &reqs[k]);
        MPI_UNLOCK();
        if (rc == MPI_SUCCESS) k++;
    }
    if (rc != MPI_SUCCESS || k != 2 * peers) {
        snprintf(names, size, "(unknown: the MPI messages could not be posted)");
    } else {
        double t = timeout_seconds() < PING_GRACE ? timeout_seconds() : PING_GRACE;
        /* only the receives decide; the sends are polled alongside so they move on */
        (void)poll_requests(reqs, k, done, nb__dist_now() + t, "nb_dist", "the liveness check");
        size_t at = 0;
        int missing = 0;
        for (int j = 0; j < peers; j++) {
            if (done[j] && !(got[j] > LATE_LIMIT)) continue;
            int r = j < G.rank ? j : j + 1;
            if (missing < 16 && at < size)
                at += (size_t)snprintf(names + at, size - at, "%s%d", missing ? ", " : "", r);
            missing++;
        }
        if (missing > 16 && at < size) snprintf(names + at, size - at, " and %d more", missing - 16);
    }
    for (int j = 0; j < k; j++) { /* take back the receives; leave the sends to MPI */
        if (reqs[j] == MPI_REQUEST_NULL) continue;
        MPI_LOCK();
        if (j < peers) {
            MPI_Cancel(&reqs[j]);
            MPI_Wait(&reqs[j], MPI_STATUS_IGNORE);
        } else {
            MPI_Request_free(&reqs[j]);
        }
        MPI_UNLOCK();
    }
    free(got); free(reqs); free(done);
}

/* The clause of a payload timeout's message that says who is gone (from silent_peers). */
static void payload_culprits(char *buf, size_t size, double deadline) {
    char names[400];
    double late = nb__dist_now() - deadline;
    silent_peers(names, sizeof names, late);
    if (late > LATE_LIMIT)
        snprintf(buf, size, "this rank noticed it %.1f s after the deadline, so it was itself stopped or starved", late);
    else if (!names[0]) snprintf(buf, size, "every peer answered a check after it, so a transport failed");
    else snprintf(buf, size, "rank%s %s did not answer a check after it (stopped, dead or cut off)",
                  strchr(names, ',') ? "s" : "", names);
}

static MPI_Datatype mpi_type(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return MPI_FLOAT;
    case NB_F64: return MPI_DOUBLE;
    case NB_I64: return MPI_INT64_T;
    case NB_I32: return MPI_INT32_T;
    case NB_U8: return MPI_UINT8_T;
    case NB_I8: return MPI_INT8_T;
    case NB_F16: case NB_BF16: return MPI_UINT16_T; /* moved, never reduced */
    case NB_BOOL: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(nb_reduce_op op) {
    switch (op) {
    case NB_REDUCE_MAX: return MPI_MAX;
    case NB_REDUCE_MIN: return MPI_MIN;
    default: return MPI_SUM;
    }
}
#endif

/* ---- started collectives on raw buffers ---- */

/* MPI counts are int: longer buffers are split into pieces of at most this many elements. */
#define PIECE ((int64_t)1 << 30)

struct nb_dist_op {
    int n;
    int failed; /* an MPI error code the progress thread met (0: none) */
#ifdef NABLA_HAVE_MPI
    MPI_Request req[];
#endif
};

static bool reducible(nb_dtype dt) {
    return dt == NB_F32 || dt == NB_F64 || dt == NB_I64 || dt == NB_I32 || dt == NB_U8 || dt == NB_I8;
}

/* Starts the pieces of a sum (root < 0) or a broadcast from root. */
static int start_pieces(void *buf, int64_t count, nb_dtype dt, int root, nb_reduce_op op, const char *fn, nb_dist_op **out) {
    *out = NULL;
    if (nb__dist_usable(fn) < 0) return -1;
    if (count < 0) { nb__error("%s: %lld elements", fn, (long long)count); return -1; }
    if (G.size == 1 || count == 0) return 0;
#ifdef NABLA_HAVE_MPI
    int64_t pieces = (count + PIECE - 1) / PIECE;
    nb_dist_op *o = malloc(sizeof *o + sizeof(MPI_Request) * (size_t)pieces);
    if (!o) { nb__error("%s: out of memory", fn); return -1; }
    o->n = 0;
    o->failed = 0;
    size_t es = nb__esize(dt);
    for (int64_t p = 0; p < pieces; p++) {
        int64_t at = p * PIECE, n = count - at < PIECE ? count - at : PIECE;
        char *ptr = (char *)buf + (size_t)at * es;
        MPI_LOCK();
        int rc = root < 0 ? MPI_Iallreduce(MPI_IN_PLACE, ptr, (int)n, mpi_type(dt), mpi_op(op), G.comm, &o->req[p])
                          : MPI_Ibcast(ptr, (int)n, mpi_type(dt), root, G.comm, &o->req[p]);
        MPI_UNLOCK();
        if (rc != MPI_SUCCESS) {
            mpi_error(fn, root < 0 ? "MPI_Iallreduce" : "MPI_Ibcast", rc);
            fail_group(); /* pieces already started cannot be taken back: the ranks are out of step */
            if (o->n == 0) free(o); /* else left in flight, as MPI may still write buf */
            return -1;
        }
        o->n++;
    }
    *out = o;
    return 0;
#else
    (void)buf; (void)dt; (void)root; (void)op;
    nb__error("%s: needs peers, but nabla was built without MPI (NABLA_WITH_MPI=OFF)", fn);
    return -1;
#endif
}

int nb__dist_start_sum(void *buf, int64_t count, nb_dtype dtype, const char *fn, nb_dist_op **op) {
    if (!reducible(dtype)) {
        *op = NULL;
        nb__error("%s: cannot sum %s elements across ranks (f32, f64, i64, i32 or u8)", fn, nb_dtype_name(dtype));
        return -1;
    }
    return start_pieces(buf, count, dtype, -1, NB_REDUCE_SUM, fn, op);
}

int nb__dist_start_broadcast(void *buf, int64_t count, nb_dtype dtype, int root, const char *fn, nb_dist_op **op) {
    if (root < 0 || root >= G.size) {
        *op = NULL;
        nb__error("%s: root %d is not a rank of this group of %d", fn, root, G.size);
        return -1;
    }
    return start_pieces(buf, count, dtype, root, NB_REDUCE_SUM, fn, op);
}

/* Starts an all-gather (gather) or a summing reduce-scatter of per elements per rank. */
static int start_block(bool gather, const void *send, void *recv, int64_t per, nb_dtype dt, bool side, const char *fn,
                       nb_dist_op **out) {
    *out = NULL;
    if (nb__dist_usable(fn) < 0) return -1;
    if (per < 0 || per > INT_MAX) {
        nb__error("%s: %lld elements per rank; at most %d (MPI's count)", fn, (long long)per, INT_MAX);
        return -1;
    }
    if (!gather && !reducible(dt)) {
        nb__error("%s: cannot sum %s elements across ranks (f32, f64, i64, i32 or u8)", fn, nb_dtype_name(dt));
        return -1;
    }
    size_t bytes = (size_t)per * nb__esize(dt);
    if (G.size == 1 || per == 0) {
        if (bytes) memmove(recv, send, bytes);
        return 0;
    }
#ifdef NABLA_HAVE_MPI
    nb_dist_op *o = malloc(sizeof *o + sizeof(MPI_Request));
    if (!o) { nb__error("%s: out of memory", fn); return -1; }
    MPI_Comm c = side ? G.side : G.comm;
    MPI_LOCK();
    int rc = gather ? MPI_Iallgather(send, (int)per, mpi_type(dt), recv, (int)per, mpi_type(dt), c, &o->req[0])
                    : MPI_Ireduce_scatter_block(send, recv, (int)per, mpi_type(dt), MPI_SUM, c, &o->req[0]);
    MPI_UNLOCK();
    if (rc != MPI_SUCCESS) {
        mpi_error(fn, gather ? "MPI_Iallgather" : "MPI_Ireduce_scatter_block", rc);
        fail_group();
        free(o);
        return -1;
    }
    o->n = 1;
    o->failed = 0;
    *out = o;
    return 0;
#else
    nb__error("%s: needs peers, but nabla was built without MPI (NABLA_WITH_MPI=OFF)", fn);
    return -1;
#endif
}

int nb__dist_start_all_gather(const void *send, void *recv, int64_t per, nb_dtype dtype, bool side, const char *fn,
                              nb_dist_op **op) {
    return start_block(true, send, recv, per, dtype, side, fn, op);
}

int nb__dist_start_reduce_scatter(const void *send, void *recv, int64_t per, nb_dtype dtype, bool side, const char *fn,
                                  nb_dist_op **op) {
    return start_block(false, send, recv, per, dtype, side, fn, op);
}

bool nb__dist_test(nb_dist_op *op) {
    if (!op) return true;
#ifdef NABLA_HAVE_MPI
    int flag = 0;
    MPI_LOCK();
    int rc = MPI_Testall(op->n, op->req, &flag, MPI_STATUSES_IGNORE);
    MPI_UNLOCK();
    if (rc != MPI_SUCCESS) return true; /* the wait reports it */
    return flag != 0;
#else
    return true;
#endif
}

#ifdef NABLA_HAVE_MPI
static void *progress_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&P.lock);
    while (!P.stop) {
        if (P.n == 0) {
            pthread_cond_wait(&P.wake, &P.lock);
            continue;
        }
        for (int i = 0; i < P.n;) {
            int flag = 0;
            MPI_LOCK();
            int rc = MPI_Testall(P.ops[i]->n, P.ops[i]->req, &flag, MPI_STATUSES_IGNORE);
            MPI_UNLOCK();
            if (rc != MPI_SUCCESS) P.ops[i]->failed = rc;
            if (rc != MPI_SUCCESS || flag) P.ops[i] = P.ops[--P.n]; /* done: its wait returns at once */
            else i++;
        }
        pthread_mutex_unlock(&P.lock);
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&P.lock);
    }
    pthread_mutex_unlock(&P.lock);
    return NULL;
}

static void progress_stop(void) {
    pthread_mutex_lock(&P.lock);
    bool running = P.running;
    P.stop = true;
    pthread_cond_signal(&P.wake);
    pthread_mutex_unlock(&P.lock);
    if (running) pthread_join(P.thread, NULL);
    P.running = P.stop = false;
    P.n = 0;
}
#endif

void nb__dist_progress(nb_dist_op *op) {
#ifdef NABLA_HAVE_MPI
    if (!op || !P.enabled) return;
    pthread_mutex_lock(&P.lock);
    if (!P.running && pthread_create(&P.thread, NULL, progress_main, NULL) == 0) P.running = true;
    if (P.running && P.n < PROGRESS_MAX) {
        P.ops[P.n++] = op;
        pthread_cond_signal(&P.wake);
    }
    pthread_mutex_unlock(&P.lock);
#else
    (void)op;
#endif
}

int nb__dist_wait(nb_dist_op *op, const char *fn, const char *what) {
    if (!op) return 0;
#ifdef NABLA_HAVE_MPI
    /* the progress thread lets go of op first */
    pthread_mutex_lock(&P.lock);
    for (int i = 0; i < P.n; i++)
        if (P.ops[i] == op) { P.ops[i] = P.ops[--P.n]; break; }
    pthread_mutex_unlock(&P.lock);
    if (op->failed) {
        mpi_error(fn, what, op->failed);
        fail_group(); /* op stays in flight: leaked */
        return -1;
    }
    double t = timeout_seconds();
    bool *done = malloc(sizeof(bool) * (size_t)op->n);
    if (!done) { nb__error("%s: out of memory", fn); fail_group(); return -1; }
    double deadline = nb__dist_now() + t;
    int rc = poll_requests(op->req, op->n, done, deadline, fn, what);
    free(done);
    if (rc == 1) {
        char who[500];
        payload_culprits(who, sizeof who, deadline);
        nb__error("%s: timed out after %g s in %s on rank %d: every rank had started it; %s (the timeout is "
                  "$NABLA_DIST_TIMEOUT or nb_dist_set_timeout)", fn, t, what, G.rank, who);
    }
    if (rc != 0) {
        fail_group(); /* op stays in flight: leaked, as MPI may still write its buffer */
        return -1;
    }
    free(op);
    return 0;
#else
    (void)fn; (void)what;
    return 0;
#endif
}

/* ---- headers ---- */

enum { H_MAGIC, H_SEQ, H_KIND, H_OP, H_ROOT, H_DTYPE, H_NDIM, H_DIMS, H_WORDS = H_DIMS + NB_MAX_DIMS };
#define HEADER_MAGIC 0x4e42444831LL /* "NBDH1" */
#define HEADER_TAG 7101

#ifdef NABLA_HAVE_MPI /* the MPI build's only */
static void describe_header(const int64_t *h, char *buf, size_t size) {
    size_t at = 0;
    int nd = (int)h[H_NDIM];
    at += (size_t)snprintf(buf + at, size - at, "[");
    for (int i = 0; i < nd && i < NB_MAX_DIMS && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", i ? ", " : "", (long long)h[H_DIMS + i]);
    if (at < size)
        snprintf(buf + at, size - at, "] %s", h[H_DTYPE] >= 0 && h[H_DTYPE] < NB_DTYPE_COUNT ? nb_dtype_name((nb_dtype)h[H_DTYPE]) : "?");
}
#endif

#ifdef NABLA_HAVE_MPI /* the MPI build's only */
/* What differs between header a (of rank ra) and b (of rank rb), as a message; false when
   nothing that must agree does. */
static bool header_mismatch(const int64_t *a, int ra, const int64_t *b, int rb, char *msg, size_t size) {
    char da[160], db[160];
    if (a[H_MAGIC] != HEADER_MAGIC || b[H_MAGIC] != HEADER_MAGIC) {
        snprintf(msg, size, "rank %d sent a message that is not a nabla collective header", a[H_MAGIC] != HEADER_MAGIC ? ra : rb);
        return true;
    }
    int ka = (int)a[H_KIND], kb = (int)b[H_KIND];
    if (ka != kb) {
        snprintf(msg, size, "rank %d called %s (its collective #%lld) while rank %d called %s (its #%lld): every rank must "
                 "call the same collectives in the same order", ra, ka > 0 && ka <= KIND_BARRIER ? kind_fn[ka] : "?",
                 (long long)a[H_SEQ], rb, kb > 0 && kb <= KIND_BARRIER ? kind_fn[kb] : "?", (long long)b[H_SEQ]);
        return true;
    }
    if (ka == KIND_BARRIER) return false;
    describe_header(a, da, sizeof da);
    describe_header(b, db, sizeof db);
    bool shape_differs = a[H_DTYPE] != b[H_DTYPE] || a[H_NDIM] != b[H_NDIM];
    for (int i = 0; i < a[H_NDIM] && i < NB_MAX_DIMS && !shape_differs; i++) shape_differs = a[H_DIMS + i] != b[H_DIMS + i];
    if (shape_differs) {
        snprintf(msg, size, "the tensors differ across ranks: rank %d has %s, rank %d has %s", ra, da, rb, db);
        return true;
    }
    if ((ka == KIND_ALL_REDUCE || ka == KIND_REDUCE_SCATTER) && a[H_OP] != b[H_OP]) {
        snprintf(msg, size, "the reduction differs across ranks: rank %d asks for %s, rank %d for %s", ra,
                 a[H_OP] >= 0 && a[H_OP] < 4 ? op_name[a[H_OP]] : "?", rb, b[H_OP] >= 0 && b[H_OP] < 4 ? op_name[b[H_OP]] : "?");
        return true;
    }
    if (ka == KIND_BROADCAST && a[H_ROOT] != b[H_ROOT]) {
        snprintf(msg, size, "the root differs across ranks: rank %d broadcasts from %lld, rank %d from %lld", ra,
                 (long long)a[H_ROOT], rb, (long long)b[H_ROOT]);
        return true;
    }
    return false;
}
#endif

/* Sends this rank's header to every peer and receives theirs; 0 when all arrived and agree,
   else <0 with fn's error: the ranks that did not arrive by the deadline, or the first rank
   whose call differs from this one's. */
static int exchange_headers(const int64_t *mine, const char *fn, double deadline) {
#ifdef NABLA_HAVE_MPI
    int peers = G.size - 1;
    int64_t *all = malloc(sizeof(int64_t) * H_WORDS * (size_t)G.size); /* all[r]: rank r's header */
    int64_t *sendbuf = malloc(sizeof(int64_t) * H_WORDS);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)peers);
    bool *done = malloc(sizeof(bool) * 2 * (size_t)peers);
    if (!all || !sendbuf || !reqs || !done) {
        free(all); free(sendbuf); free(reqs); free(done);
        nb__error("%s: out of memory for the headers of %d ranks", fn, G.size);
        return -1;
    }
    memset(done, 0, sizeof(bool) * 2 * (size_t)peers);
    memcpy(sendbuf, mine, sizeof(int64_t) * H_WORDS);
    memcpy(all + (size_t)G.rank * H_WORDS, mine, sizeof(int64_t) * H_WORDS);
    int k = 0, rc = MPI_SUCCESS;
    for (int r = 0; r < G.size && rc == MPI_SUCCESS; r++) {
        if (r == G.rank) continue;
        MPI_LOCK();
        rc = MPI_Irecv(all + (size_t)r * H_WORDS, H_WORDS, MPI_INT64_T, r, HEADER_TAG, G.comm, &reqs[k]);
        MPI_UNLOCK();
        if (rc == MPI_SUCCESS) k++;
    }
    for (int r = 0; r < G.size && rc == MPI_SUCCESS; r++) {
        if (r == G.rank) continue;
        MPI_LOCK();
        rc = MPI_Isend(sendbuf, H_WORDS, MPI_INT64_T, r, HEADER_TAG, G.comm, &reqs[k]);
        MPI_UNLOCK();
        if (rc == MPI_SUCCESS) k++;
    }
    int prc = rc == MPI_SUCCESS ? poll_requests(reqs, k, done, deadline, fn, "the header exchange") : -1;
    if (rc != MPI_SUCCESS) mpi_error(fn, "posting the header messages", rc);
    if (prc == 1) {
        /* name the peers whose header did not come: receive j (j < peers) is from rank j or j + 1 */
        char names[400];
        size_t at = 0;
        int missing = 0;
        for (int j = 0; j < peers && j < k; j++) {
            if (done[j]) continue;
            int r = j < G.rank ? j : j + 1;
            if (missing < 16 && at < sizeof names)
                at += (size_t)snprintf(names + at, sizeof names - at, "%s%d", missing ? ", " : "", r);
            missing++;
        }
        if (missing > 16 && at < sizeof names) snprintf(names + at, sizeof names - at, " and %d more", missing - 16);
        /* answers the check of the peers that timed out in a payload, and tells a rank stuck
           elsewhere from one that is gone */
        char silent[400], gone[520] = "";
        silent_peers(silent, sizeof silent, nb__dist_now() - deadline);
        if (silent[0] && strcmp(silent, names))
            snprintf(gone, sizeof gone, "; rank%s %s did not answer a check after it (stopped, dead or cut off)",
                     strchr(silent, ',') ? "s" : "", silent);
        nb__error("%s: timed out after %g s on rank %d (its collective #%lld): rank%s %s did not arrive%s (the timeout "
                  "is $NABLA_DIST_TIMEOUT or nb_dist_set_timeout)", fn, timeout_seconds(), G.rank,
                  (long long)mine[H_SEQ], missing == 1 ? "" : "s", names, gone);
    }
    if (prc != 0) {
        /* take back the receives still posted; a send not yet delivered keeps its buffer (adopted) */
        bool sends_pending = false;
        for (int j = 0; j < k; j++) {
            if (done[j] || reqs[j] == MPI_REQUEST_NULL) continue;
            MPI_LOCK();
            if (j < peers) {
                MPI_Cancel(&reqs[j]);
                MPI_Wait(&reqs[j], MPI_STATUS_IGNORE);
            } else {
                MPI_Request_free(&reqs[j]);
                sends_pending = true;
            }
            MPI_UNLOCK();
        }
        fail_group();
        if (sends_pending) nb__dist_adopt(sendbuf);
        else free(sendbuf);
        free(all); free(reqs); free(done);
        return -1;
    }
    free(sendbuf); free(reqs); free(done);
    /* every rank compares every header with its own, so every rank fails alike on a mismatch */
    char msg[500];
    for (int r = 0; r < G.size; r++) {
        if (r == G.rank) continue;
        if (header_mismatch(all + (size_t)r * H_WORDS, r, mine, G.rank, msg, sizeof msg)) {
            free(all);
            nb__error("%s: %s (seen on rank %d)", fn, msg, G.rank);
            return -1;
        }
    }
    free(all);
    return 0;
#else
    (void)mine; (void)fn; (void)deadline;
    return 0;
#endif
}

/* ---- collectives on tensors ---- */

/* Checks t for fn: a contiguous cpu tensor, of a dtype that can be reduced when reduce is set. */
static int check_tensor(const char *fn, nb_tensor *t, bool reduce, nb_reduce_op op) {
    char d[200];
    if (!t) {
        if (!nb__has_error()) nb__error("%s: tensor is NULL", fn);
        return -1;
    }
    if (t->storage->device.type != NB_CPU) {
        char dv[32];
        nb__error("%s: tensor %s is on %s; the collectives take cpu tensors (nb_to first)", fn, nb__describe(t, d, sizeof d),
                  nb_device_str(t->storage->device, dv, sizeof dv));
        return -1;
    }
    if (!nb_is_contiguous(t)) {
        nb__error("%s: tensor %s is not contiguous (nb_contiguous first)", fn, nb__describe(t, d, sizeof d));
        return -1;
    }
    if (reduce) {
        if (!nb__enum_ok(fn, "op", (int)op, NB_REDUCE_MIN + 1, "nb_reduce_op", "sum, avg, max, min")) {
            return -1;
        }
        if (!reducible(t->dtype)) {
            nb__error("%s: cannot reduce %s across ranks (f32, f64, i64, i32 or u8; nb_cast first)", fn,
                      nb__describe(t, d, sizeof d));
            return -1;
        }
        if (op == NB_REDUCE_AVG && !nb__is_float(t->dtype)) {
            nb__error("%s: NB_REDUCE_AVG needs a float tensor, not %s (sum, then divide)", fn, nb__describe(t, d, sizeof d));
            return -1;
        }
    }
    return 0;
}

static void fill_header(int64_t *h, int kind, nb_tensor *t, int op, int root) {
    memset(h, 0, sizeof(int64_t) * H_WORDS);
    h[H_MAGIC] = HEADER_MAGIC;
    h[H_SEQ] = (int64_t)G.seq;
    h[H_KIND] = kind;
    h[H_OP] = op;
    h[H_ROOT] = root;
    h[H_DTYPE] = t ? (int64_t)t->dtype : -1;
    h[H_NDIM] = t ? t->shape.ndim : 0;
    for (int i = 0; t && i < t->shape.ndim; i++) h[H_DIMS + i] = t->shape.dim[i];
}

/* The start of every collective: a usable group, then (with peers) the header exchange. */
static int begin(int kind, nb_tensor *t, int op, int root, double *deadline) {
    const char *fn = kind_fn[kind];
    if (nb__dist_usable(fn) < 0) return -1;
    *deadline = nb__dist_now() + timeout_seconds();
    int64_t h[H_WORDS];
    fill_header(h, kind, t, op, root);
    G.seq++;
    if (G.size == 1) return 0;
    return exchange_headers(h, fn, *deadline);
}

#ifdef NABLA_HAVE_MPI /* the MPI build's only */
static void bump_version(nb_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }
#endif

/* Divides t's n float elements at p by the world size (for NB_REDUCE_AVG). */
void nb__dist_scale(void *dst, const void *src, int64_t n, nb_dtype dt, int world) {
    if (dt == NB_F32) {
        float *o = dst, w = (float)world;
        const float *in = src;
        for (int64_t i = 0; i < n; i++) o[i] = in[i] / w;
    } else {
        double *o = dst, w = (double)world;
        const double *in = src;
        for (int64_t i = 0; i < n; i++) o[i] = in[i] / w;
    }
}

int nb__dist_agree(int rc, const char *fn) {
    if (!nb_dist_is_initialized() || nb_dist_world_size() == 1) return rc;
    int64_t mine = rc < 0 ? nb_dist_rank() + 1 : 0;
    char msg[700] = "";
    if (rc < 0) {
        snprintf(msg, sizeof msg, "%s", nb_error() ? nb_error() : "failed");
        nb_error_clear();
    }
    nb_scope *s = nb_scope_begin();
    nb_tensor *t = nb_from_data(&mine, NB_SHAPE(1), NB_I64);
    int arc = t ? nb_dist_all_reduce(t, NB_REDUCE_MAX) : -1;
    int64_t worst = arc == 0 ? *(const int64_t *)nb_data_ptr(t) : 0;
    nb_scope_end(s);
    if (rc < 0) nb__error("%s", msg);
    else if (arc < 0) return -1;
    else if (worst > 0) nb__error("%s: rank %lld failed (its error is on that rank)", fn, (long long)(worst - 1));
    return rc < 0 || worst > 0 ? -1 : 0;
}

static size_t index_hash(const nb_tensor *t, size_t cap) {
    return (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

int nb__dist_index_init(nb__dist_index *ix, int n) {
    ix->cap = 16;
    while (ix->cap < 2 * (size_t)(n > 0 ? n : 0)) ix->cap *= 2;
    ix->keys = calloc(ix->cap, sizeof *ix->keys);
    ix->vals = malloc(sizeof *ix->vals * ix->cap);
    if (!ix->keys || !ix->vals) {
        nb__dist_index_free(ix);
        return -1;
    }
    return 0;
}

int nb__dist_index_put(nb__dist_index *ix, const nb_tensor *t, int v) {
    size_t h = index_hash(t, ix->cap);
    while (ix->keys[h] && ix->keys[h] != t) h = (h + 1) & (ix->cap - 1);
    if (ix->keys[h]) return ix->vals[h];
    ix->keys[h] = t;
    ix->vals[h] = v;
    return -1;
}

int nb__dist_index_get(const nb__dist_index *ix, const nb_tensor *t) {
    if (!ix->cap) return -1;
    for (size_t h = index_hash(t, ix->cap); ix->keys[h]; h = (h + 1) & (ix->cap - 1))
        if (ix->keys[h] == t) return ix->vals[h];
    return -1;
}

void nb__dist_index_free(nb__dist_index *ix) {
    free(ix->keys);
    free(ix->vals);
    *ix = (nb__dist_index){ 0 };
}

#ifdef NABLA_HAVE_MPI
/* Waits for one request of fn against deadline; on failure t is kept alive (MPI may still
   write it) and the group is marked unusable. */
static int wait_one(MPI_Request *req, double deadline, const char *fn, const char *what, nb_tensor *keep) {
    bool done = false;
    int rc = poll_requests(req, 1, &done, deadline, fn, what);
    if (rc == 1) {
        char who[500];
        payload_culprits(who, sizeof who, deadline);
        nb__error("%s: timed out after %g s in %s on rank %d: every rank had arrived (headers exchanged); %s", fn,
                  timeout_seconds(), what, G.rank, who);
    }
    if (rc != 0) {
        fail_group();
        if (keep) nb_retain(keep); /* never released: its storage may still be written */
        return -1;
    }
    return 0;
}
#endif

int nb_dist_all_reduce(nb_tensor *t, nb_reduce_op op) {
    const char *fn = "nb_dist_all_reduce";
    if (check_tensor(fn, t, true, op) < 0) return -1;
    double deadline;
    if (begin(KIND_ALL_REDUCE, t, op, -1, &deadline) < 0) return -1;
    if (G.size == 1 || t->numel == 0) return 0;
#ifdef NABLA_HAVE_MPI
    void *p = nb__data(t);
    size_t es = nb__esize(t->dtype);
    for (int64_t at = 0; at < t->numel; at += PIECE) {
        int n = (int)(t->numel - at < PIECE ? t->numel - at : PIECE);
        MPI_Request req;
        MPI_LOCK();
        int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)p + (size_t)at * es, n, mpi_type(t->dtype), mpi_op(op), G.comm, &req);
        MPI_UNLOCK();
        if (rc != MPI_SUCCESS) { mpi_error(fn, "MPI_Iallreduce", rc); fail_group(); return -1; }
        if (wait_one(&req, deadline, fn, "the allreduce", t) < 0) return -1;
    }
    if (op == NB_REDUCE_AVG) nb__dist_scale(p, p, t->numel, t->dtype, G.size);
    bump_version(t);
    return 0;
#else
    return 0;
#endif
}

int nb_dist_broadcast(nb_tensor *t, int root) {
    const char *fn = "nb_dist_broadcast";
    if (check_tensor(fn, t, false, NB_REDUCE_SUM) < 0) return -1;
    if (nb__dist_usable(fn) < 0) return -1;
    if (root < 0 || root >= G.size) {
        nb__error("%s: root %d is not a rank of this group of %d", fn, root, G.size);
        return -1;
    }
    double deadline;
    if (begin(KIND_BROADCAST, t, NB_REDUCE_SUM, root, &deadline) < 0) return -1;
    if (G.size == 1 || t->numel == 0) return 0;
#ifdef NABLA_HAVE_MPI
    void *p = nb__data(t);
    size_t es = nb__esize(t->dtype);
    for (int64_t at = 0; at < t->numel; at += PIECE) {
        int n = (int)(t->numel - at < PIECE ? t->numel - at : PIECE);
        MPI_Request req;
        MPI_LOCK();
        int rc = MPI_Ibcast((char *)p + (size_t)at * es, n, mpi_type(t->dtype), root, G.comm, &req);
        MPI_UNLOCK();
        if (rc != MPI_SUCCESS) { mpi_error(fn, "MPI_Ibcast", rc); fail_group(); return -1; }
        if (wait_one(&req, deadline, fn, "the broadcast", t) < 0) return -1;
    }
    if (G.rank != root) bump_version(t);
    return 0;
#else
    return 0;
#endif
}

/* The shape of t with axis 0 multiplied (or divided, when div) by the world size. */
static bool world_shape(const char *fn, nb_tensor *t, bool div, nb_shape *out) {
    char d[200];
    nb_shape s = t->shape;
    if (s.ndim == 0) {
        if (div) {
            nb__error("%s: tensor %s is 0-d; it needs an axis 0 of world size x k (%d x k)", fn, nb__describe(t, d, sizeof d),
                      G.size);
            return false;
        }
        s.ndim = 1;
        s.dim[0] = 1;
    }
    if (div) {
        if (s.dim[0] % G.size != 0) {
            nb__error("%s: axis 0 of %s is not a multiple of the world size %d", fn, nb__describe(t, d, sizeof d), G.size);
            return false;
        }
        s.dim[0] /= G.size;
    } else if (nb__mul_overflows(s.dim[0], G.size, &s.dim[0]) || !nb__shape_check(NULL, &s, nb__esize(t->dtype), NULL)) {
        nb__error("%s: %s from %d ranks is too large", fn, nb__describe(t, d, sizeof d), G.size);
        return false;
    }
    *out = s;
    return true;
}

nb_tensor *nb_dist_all_gather(nb_tensor *t) {
    const char *fn = "nb_dist_all_gather";
    if (check_tensor(fn, t, false, NB_REDUCE_SUM) < 0) return NULL;
    if (nb__dist_usable(fn) < 0) return NULL;
    nb_shape s;
    if (!world_shape(fn, t, false, &s)) return NULL;
    if (t->numel > INT_MAX) {
        char d[200];
        nb__error("%s: %s has %lld elements; at most %d per rank (MPI's count)", fn, nb__describe(t, d, sizeof d),
                  (long long)t->numel, INT_MAX);
        return NULL;
    }
    nb_tensor *out = nb__tensor_new(s, t->dtype);
    if (!out) return NULL;
    double deadline;
    if (begin(KIND_ALL_GATHER, t, NB_REDUCE_SUM, -1, &deadline) < 0) { nb_release(out); return NULL; }
    size_t bytes = (size_t)t->numel * nb__esize(t->dtype);
    if (G.size == 1 || t->numel == 0) {
        if (bytes) memcpy(nb__data(out), nb__data(t), bytes);
        return nb__own(out);
    }
#ifdef NABLA_HAVE_MPI
    MPI_Request req;
    MPI_LOCK();
    int rc = MPI_Iallgather(nb__data(t), (int)t->numel, mpi_type(t->dtype), nb__data(out), (int)t->numel, mpi_type(t->dtype),
                            G.comm, &req);
    MPI_UNLOCK();
    if (rc != MPI_SUCCESS) { mpi_error(fn, "MPI_Iallgather", rc); fail_group(); nb_release(out); return NULL; }
    if (wait_one(&req, deadline, fn, "the all-gather", out) < 0) { nb_retain(t); nb_release(out); return NULL; }
    return nb__own(out);
#else
    return nb__own(out);
#endif
}

nb_tensor *nb_dist_reduce_scatter(nb_tensor *t, nb_reduce_op op) {
    const char *fn = "nb_dist_reduce_scatter";
    if (check_tensor(fn, t, true, op) < 0) return NULL;
    if (nb__dist_usable(fn) < 0) return NULL;
    nb_shape s;
    if (!world_shape(fn, t, true, &s)) return NULL;
    int64_t per = t->numel / G.size;
    if (per > INT_MAX) {
        char d[200];
        nb__error("%s: %s gives each rank %lld elements; at most %d (MPI's count)", fn, nb__describe(t, d, sizeof d),
                  (long long)per, INT_MAX);
        return NULL;
    }
    nb_tensor *out = nb__tensor_new(s, t->dtype);
    if (!out) return NULL;
    double deadline;
    if (begin(KIND_REDUCE_SCATTER, t, op, -1, &deadline) < 0) { nb_release(out); return NULL; }
    size_t bytes = (size_t)per * nb__esize(t->dtype);
    if (G.size == 1 || per == 0) {
        if (bytes) memcpy(nb__data(out), nb__data(t), bytes);
        return nb__own(out);
    }
#ifdef NABLA_HAVE_MPI
    MPI_Request req;
    MPI_LOCK();
    int rc = MPI_Ireduce_scatter_block(nb__data(t), nb__data(out), (int)per, mpi_type(t->dtype), mpi_op(op), G.comm, &req);
    MPI_UNLOCK();
    if (rc != MPI_SUCCESS) { mpi_error(fn, "MPI_Ireduce_scatter_block", rc); fail_group(); nb_release(out); return NULL; }
    if (wait_one(&req, deadline, fn, "the reduce-scatter", out) < 0) { nb_retain(t); nb_release(out); return NULL; }
    if (op == NB_REDUCE_AVG) nb__dist_scale(nb__data(out), nb__data(out), per, t->dtype, G.size);
    return nb__own(out);
#else
    return nb__own(out);
#endif
}

int nb_dist_barrier(void) {
    double deadline;
    /* the header exchange is itself a barrier: a rank leaves it once every peer's header came */
    return begin(KIND_BARRIER, NULL, 0, -1, &deadline);
}
