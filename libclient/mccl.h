/*
 * mccl.h: the MCCL client library, libmccl.
 *
 * A process attaches to the mccld daemon of its node and becomes one rank of
 * a job: a set of nranks processes, spread over any nodes of the cluster,
 * named by a string the application chooses (scoped to its user id).  It
 * then submits collective operations on its buffers; the daemons combine the
 * buffers of the ranks on each node in shared memory, run one inter-node
 * collective per node and write the results back in place.
 *
 * Conventions, as in NCCL and MPI:
 *  - count is in elements of dtype, never bytes;
 *  - req == NULL makes a call blocking; otherwise it returns at once and
 *    *req is completed (and freed) by mccl_wait(), or polled by mccl_test();
 *  - collectives on one communicator complete in the order they were issued;
 *  - every call returns MCCL_SUCCESS or an error code, and
 *    mccl_last_error(comm) then says what failed and why.
 *
 * Buffers: memory from mccl_alloc() is shared with the daemon, which reads
 * and writes it in place (zero copy).  Any other pointer works too.  An
 * allreduce of 4 MiB or more of it is read and written by the daemon in
 * this process's memory itself (process_vm_readv/writev: one copy each
 * way), where the kernel lets it: the daemon runs as this process's user
 * (or both as root) and MCCL_XMEM is not 0; for a rank alone on its node,
 * only on a machine of 4 CPUs or more, where the daemon's threads share
 * the copy.  Anything else is staged
 * through a segment of the library's own, which costs a copy in and out
 * of every operation; the daemon's log says once, per process, why it
 * could not read the process's memory.  Either way a buffer must stay
 * mapped, and the send buffer unchanged, until its operation completes:
 * one freed early fails the operation (MCCL_ERR_INVALID_ARGUMENT, naming
 * it), never another process's data.
 *
 * Errors during an operation (a peer that died, a timeout, an abort) fail
 * that operation on every rank and leave the communicator unusable: every
 * later call on it returns the same error.  Destroy it and create another.
 *
 * Thread safety: a communicator may be used from several threads; calls on
 * it are serialized.  Different communicators are independent.
 *
 * Environment: MCCL_SOCKET (the daemon's socket path), MCCL_JOB, MCCL_RANK,
 * MCCL_NRANKS (mccl_comm_init_env, which also understands torchrun, Slurm
 * and Open MPI; see there), MCCL_INIT_TIMEOUT_MS, MCCL_OP_TIMEOUT_MS,
 * MCCL_XMEM (0: stage every buffer that is not mccl_alloc memory; 2: let
 * the daemon in for every allreduce from 4 MiB, a lone rank's too).
 */
#ifndef MCCL_H
#define MCCL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what is declared here is
 * all it exports (a test checks the list). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define MCCL_VERSION_MAJOR	0
#define MCCL_VERSION_MINOR	1
#define MCCL_VERSION_PATCH	0

typedef enum {
	MCCL_SUCCESS = 0,
	MCCL_ERR_INVALID_ARGUMENT,	/* a bad argument; nothing was done */
	MCCL_ERR_UNSUPPORTED,		/* valid, but not supported (e.g. int AVG) */
	MCCL_ERR_CONNECT,		/* no daemon answers on the socket */
	MCCL_ERR_TIMEOUT,		/* a deadline passed */
	MCCL_ERR_PEER_FAILED,		/* a rank, node or link of the job failed */
	MCCL_ERR_ABORTED,		/* the job was aborted */
	MCCL_ERR_PERMISSION,		/* not allowed for this user */
	MCCL_ERR_NO_MEMORY,		/* out of memory, or over a limit */
	MCCL_ERR_PROTOCOL,		/* the daemon sent something unexpected */
	MCCL_ERR_INTERNAL		/* a bug: please report it */
} mccl_result_t;

#define MCCL_NUM_RESULTS	11

typedef enum {
	MCCL_INT8,
	MCCL_UINT8,
	MCCL_INT32,
	MCCL_UINT32,
	MCCL_INT64,
	MCCL_UINT64,
	MCCL_FLOAT16,
	MCCL_BFLOAT16,
	MCCL_FLOAT32,
	MCCL_FLOAT64
} mccl_dtype_t;

#define MCCL_NUM_DTYPES	10

typedef enum {
	MCCL_SUM,
	MCCL_PROD,
	MCCL_MIN,
	MCCL_MAX,
	MCCL_AVG,	/* floating-point types only: the sum, divided by
			   nranks once at the end */
	MCCL_BAND,	/* integer types only: bitwise and, */
	MCCL_BOR,	/* or, */
	MCCL_BXOR	/* exclusive or */
} mccl_op_t;

#define MCCL_NUM_OPS	8

typedef struct mccl_comm mccl_comm_t;		/* opaque */
typedef struct mccl_request mccl_request_t;	/* opaque */

/*
 * Join job `job` as rank `rank` of `nranks` through the local daemon, and
 * return once all nranks ranks, on whatever nodes, have joined and the
 * daemons have connected.  Fails with MCCL_ERR_TIMEOUT after the init
 * timeout (MCCL_INIT_TIMEOUT_MS, default 30 s), naming the ranks that never
 * came; with MCCL_ERR_INVALID_ARGUMENT if another process holds the same
 * rank or the ranks disagree on nranks; with MCCL_ERR_CONNECT if no daemon
 * answers (the message names the socket path tried).
 * On failure *comm is NULL; mccl_last_error(NULL) gives the message.
 */
mccl_result_t	mccl_comm_init(mccl_comm_t **comm, const char *job, int nranks,
		    int rank);

/*
 * mccl_comm_init() with job, rank and nranks from the environment of the
 * launcher.  Each comes from the first of these that is set:
 *   rank:   MCCL_RANK, RANK (torchrun), SLURM_PROCID, OMPI_COMM_WORLD_RANK
 *   nranks: MCCL_NRANKS, WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE
 *   job:    MCCL_JOB, TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT,
 *           SLURM_JOB_ID.SLURM_STEP_ID, OMPI_MCA_orte_hnp_uri or
 *           PMIX_NAMESPACE (Open MPI 4 or 5)
 */
mccl_result_t	mccl_comm_init_env(mccl_comm_t **comm);

/*
 * The deadline of comm's later operations: each fails with MCCL_ERR_TIMEOUT
 * once it has waited op_timeout_ms for another rank (0: the daemon's
 * op_timeout_ms; MCCL_OP_TIMEOUT_MS sets it at init).  torch's process
 * group timeout is this.
 */
mccl_result_t	mccl_comm_set_timeout(mccl_comm_t *comm, int op_timeout_ms);

/*
 * What comm's float32 sums and averages (allreduce, reduce and
 * reduce-scatter) send between nodes:
 * MCCL_FLOAT32 (the default: the data as it is), or MCCL_BFLOAT16 or
 * MCCL_FLOAT16, half the bytes.  On a 16-bit wire each node's partial sum
 * is rounded to the format (to nearest even) on its way out and added in
 * float32 on the next node; the result, rounded once more to the format,
 * is bit-identical on every rank and within (n + 1) (u sum|x| + e) of the
 * exact sum of the ranks' x, for n nodes, u = 2^-8 and e = 2^-134
 * (bfloat16) or u = 2^-11 and e = 2^-25 (float16).  Float16's range ends
 * at 65504 (a larger partial sum becomes an infinity), and below 2^-14 its
 * spacing stays 2^-24: gradient-sized values (about 1e-5) keep few bits
 * there, so bfloat16, with float32's range, is their wire.  Infinities and
 * NaNs arrive as what they were.  It applies where the ring runs (from
 * 64 KiB a rank, or by MCCL_ALGO=ring), on jobs of several nodes; other
 * operations are not affected.
 * MCCL_WIRE_DTYPE=bf16, fp16 or fp32 sets it at init; mccl_comm_split's
 * communicators start with their parent's.  Every rank of a job must ask
 * for the same: any reduction whose ranks differ fails, naming both,
 * whatever its size.
 */
mccl_result_t	mccl_comm_set_wire_dtype(mccl_comm_t *comm,
		    mccl_dtype_t wire);

/*
 * The daemons' view of comm's job, as JSON (what `mcclctl -j job NAME`
 * prints): its state, ranks, nodes, operations completed and in flight,
 * per node.  buf gets it, NUL-terminated; a buffer too small fails with
 * MCCL_ERR_INVALID_ARGUMENT saying the size needed.
 */
mccl_result_t	mccl_comm_stats(mccl_comm_t *comm, char *buf, size_t len);

/* Leave the job and free the communicator, its buffers and requests.  Other
 * ranks' pending operations on the job fail if this one leaves early. */
mccl_result_t	mccl_comm_destroy(mccl_comm_t *comm);

int		mccl_comm_rank(const mccl_comm_t *comm);
int		mccl_comm_size(const mccl_comm_t *comm);

/* Memory shared with the daemon (a sealed memfd segment), page-aligned:
 * operations on it are zero-copy.  Returns NULL on failure (see
 * mccl_last_error). */
void		*mccl_alloc(mccl_comm_t *comm, size_t bytes);
void		 mccl_free(mccl_comm_t *comm, void *ptr);

/*
 * recvbuf[i] = op over all ranks of sendbuf[i], for i < count, on every
 * rank.  sendbuf == recvbuf is in place.  Results are bit-identical on
 * every rank.
 */
mccl_result_t	mccl_allreduce(const void *sendbuf, void *recvbuf, size_t count,
		    mccl_dtype_t dtype, mccl_op_t op, mccl_comm_t *comm,
		    mccl_request_t **req);

/* Copy count elements of root's buf into buf on every other rank. */
mccl_result_t	mccl_broadcast(void *buf, size_t count, mccl_dtype_t dtype,
		    int root, mccl_comm_t *comm, mccl_request_t **req);

/* Complete once every rank has called it. */
mccl_result_t	mccl_barrier(mccl_comm_t *comm, mccl_request_t **req);

/* recvbuf[i] on root = op over all ranks of sendbuf[i]; recvbuf is only
 * used on root (it may be NULL elsewhere). */
mccl_result_t	mccl_reduce(const void *sendbuf, void *recvbuf, size_t count,
		    mccl_dtype_t dtype, mccl_op_t op, int root, mccl_comm_t *comm,
		    mccl_request_t **req);

/* recvbuf (nranks * sendcount elements) = the sendbufs of ranks 0, 1, ...
 * in order.  In place: sendbuf == recvbuf + rank * sendcount elements. */
mccl_result_t	mccl_allgather(const void *sendbuf, void *recvbuf,
		    size_t sendcount, mccl_dtype_t dtype, mccl_comm_t *comm,
		    mccl_request_t **req);

/* recvbuf (recvcount elements) on rank r = block r of the element-wise
 * reduction of the sendbufs (nranks * recvcount elements).  In place:
 * recvbuf == sendbuf + rank * recvcount elements. */
mccl_result_t	mccl_reduce_scatter(const void *sendbuf, void *recvbuf,
		    size_t recvcount, mccl_dtype_t dtype, mccl_op_t op,
		    mccl_comm_t *comm, mccl_request_t **req);

/* Block j (count elements) of sendbuf goes to rank j, and lands in block
 * r of its recvbuf, r being the sender.  sendbuf == recvbuf is in place. */
mccl_result_t	mccl_alltoall(const void *sendbuf, void *recvbuf, size_t count,
		    mccl_dtype_t dtype, mccl_comm_t *comm, mccl_request_t **req);

/* recvbuf on root (nranks * sendcount elements) = every rank's sendbuf,
 * rank 0's first; recvbuf is not used elsewhere (may be NULL).  In place:
 * sendbuf == recvbuf + root * sendcount elements on root. */
mccl_result_t	mccl_gather(const void *sendbuf, void *recvbuf,
		    size_t sendcount, mccl_dtype_t dtype, int root,
		    mccl_comm_t *comm, mccl_request_t **req);

/* recvbuf on rank r (recvcount elements) = block r of root's sendbuf
 * (nranks * recvcount elements); sendbuf is not used elsewhere.  In place:
 * recvbuf == sendbuf + root * recvcount elements on root. */
mccl_result_t	mccl_scatter(const void *sendbuf, void *recvbuf,
		    size_t recvcount, mccl_dtype_t dtype, int root,
		    mccl_comm_t *comm, mccl_request_t **req);

/* Rank r's sendbuf (sendcount elements, equal to recvcounts[r]) lands at
 * recvbuf + displs[r] elements on every rank.  recvcounts must be the same
 * on every rank (the daemons check it); displs are each rank's own.  The
 * receive blocks must not overlap sendbuf: there is no in-place form. */
mccl_result_t	mccl_allgatherv(const void *sendbuf, size_t sendcount,
		    void *recvbuf, const size_t *recvcounts,
		    const size_t *displs, mccl_dtype_t dtype,
		    mccl_comm_t *comm, mccl_request_t **req);

/* sendcounts[j] elements at sendbuf + sdispls[j] go to rank j, and land
 * at recvbuf + rdispls[r] there, r being the sender; each rank's
 * recvcounts[r] must equal rank r's sendcounts for it (checked: the
 * operation fails on every rank if they differ).  No in-place form. */
mccl_result_t	mccl_alltoallv(const void *sendbuf, const size_t *sendcounts,
		    const size_t *sdispls, void *recvbuf,
		    const size_t *recvcounts, const size_t *rdispls,
		    mccl_dtype_t dtype, mccl_comm_t *comm,
		    mccl_request_t **req);

/*
 * Point to point: send count elements of buf to rank peer with tag (>= 0),
 * or receive them from rank peer (or MCCL_ANY_SOURCE) with tag (or
 * MCCL_ANY_TAG).  Any two ranks of the communicator may exchange messages.
 * Messages from one rank to another are received in the order they were
 * sent; a receive takes the first one from its peer (from any source: the
 * first to arrive) whose tag it accepts, and its count must equal the
 * send's.  mccl_recv_status also says whose message it took and its tag:
 * *status is set when the receive completes well.  Sends are eager: a send completes once the daemon has the
 * data, whether or not the receive is posted yet (the daemon keeps at most
 * 1 GiB of such messages per job; past that the job fails with
 * MCCL_ERR_NO_MEMORY).  Unlike collectives, sends and receives may
 * complete out of the order they were issued in.
 */
#define MCCL_ANY_TAG	(-1)
#define MCCL_ANY_SOURCE	(-1)

typedef struct {
	int		source;		/* the sending rank */
	int		tag;
} mccl_status_t;

mccl_result_t	mccl_send(const void *buf, size_t count, mccl_dtype_t dtype,
		    int peer, int tag, mccl_comm_t *comm, mccl_request_t **req);
mccl_result_t	mccl_recv(void *buf, size_t count, mccl_dtype_t dtype, int peer,
		    int tag, mccl_comm_t *comm, mccl_request_t **req);
mccl_result_t	mccl_recv_status(void *buf, size_t count, mccl_dtype_t dtype,
		    int peer, int tag, mccl_status_t *status, mccl_comm_t *comm,
		    mccl_request_t **req);

/*
 * Split comm as MPI_Comm_split: every rank calls it; ranks passing the same
 * color form a new communicator, ordered by key then by rank in comm.
 * color == MCCL_UNDEFINED gives *newcomm = NULL.  Collective over comm.
 */
#define MCCL_UNDEFINED	(-1)
mccl_result_t	mccl_comm_split(mccl_comm_t *comm, int color, int key,
		    mccl_comm_t **newcomm);

/* End every pending operation of the job, on every rank, with
 * MCCL_ERR_ABORTED.  The communicator must then be destroyed. */
mccl_result_t	mccl_comm_abort(mccl_comm_t *comm);

/*
 * Wait for req to complete, at most timeout_ms (< 0: the operation's own
 * deadline, which always exists).  On completion, req is freed and the
 * operation's result returned.  MCCL_ERR_TIMEOUT from mccl_wait itself
 * leaves req pending: wait again or destroy the communicator.
 */
mccl_result_t	mccl_wait(mccl_request_t *req, int timeout_ms);

/* *done = 1 and the operation's result once it completed (req is then
 * freed); *done = 0 and MCCL_SUCCESS while it is still pending.  Never
 * blocks, but takes in what the daemon already sent: polling alone
 * completes every operation.  A failed communicator completes a pending
 * request with its error (mccl_wait too). */
mccl_result_t	mccl_test(mccl_request_t *req, int *done);

/* A static description of a result code. */
const char	*mccl_strerror(mccl_result_t r);

/* The detailed message of the last error on comm, or of the last failed
 * mccl_comm_init in this thread when comm is NULL. */
const char	*mccl_last_error(const mccl_comm_t *comm);

/* Size in bytes of one element of dtype, or 0 if dtype is unknown. */
size_t		 mccl_dtype_size(mccl_dtype_t dtype);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
