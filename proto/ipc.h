/*
 * ipc.h: the local protocol between mccld and its clients (libmccl and
 * mcclctl), over a SOCK_SEQPACKET Unix socket.  One record is one frame,
 * so a frame's length is exactly the record's length; descriptors travel
 * with the record that needs them (SCM_RIGHTS) and nowhere else.
 *
 * Version history:
 *   1  first version.
 *   2  the completion doorbell (IPC_BELL, struct ipc_doorbell): collectives
 *      that end well are answered through it instead of by IPC_OP_DONE.
 *   3  ipc_op.algo (was flags, always 0): the allreduce algorithm asked for.
 *   4  the submission ring in the doorbell segment: collectives are
 *      descriptors there, taken by the job's engine thread; IPC_OP carries
 *      sends and receives only.  A doorbell is needed before IPC_JOIN.
 *      IPC_JOB_FAILED tells a rank its job failed, whatever it had pending.
 *   5  gather, scatter, allgatherv and alltoallv; the v-collectives' counts
 *      and displacements in a segment (ipc_op.vec_seg, vec_off); bitwise
 *      reductions; the doorbell takes two pages; receives from any source
 *      (IPC_ANY_SOURCE), IPC_OP_DONE says a receive's source and tag.
 *   6  ipc_op.wire: a float32 reduction's data crosses the network as
 *      bfloat16 or float16 (summed in float32 on every node).
 *   7  cross-memory attach: ipc_hello.probe_addr and probe_val, which
 *      the daemon reads in the client's memory; ipc_hello_ok.xmem says
 *      whether it could; ipc_op.flags' IPC_OP_XMEM: an allreduce's
 *      buffers are addresses in the client's own memory.
 *   8  ipc_ctl_reply.more: a document longer than one record comes in
 *      pieces, each but the last with more = 1 (CTL_PIECE_MAX bytes each,
 *      CTL_DOC_MAX in all); the client joins their trailers.
 */
#ifndef MCCL_IPC_H
#define MCCL_IPC_H

#include <sys/types.h>

#include <stdint.h>
#include "wire.h"

#define IPC_MAGIC		0x4d43434cU	/* "MCCL" */
#define IPC_VERSION		8
#define IPC_MSG_MAX		(256 * 1024)	/* largest record either side sends */
#define IPC_TEXT_MAX		1024		/* error and status messages */

#define JOB_NAME_MAX		128		/* including the NUL */
#define NODE_NAME_MAX		64

enum ipc_type {
	/* 100: session */
	IPC_HELLO = 100,	/* c->d: first record on every connection */
	IPC_HELLO_OK = 101,	/* d->c */
	IPC_ERROR = 102,	/* d->c: a request failed; trailer: message */
	/* 200: shared memory */
	IPC_SEG_ADD = 200,	/* c->d, with one memfd */
	IPC_SEG_OK = 201,	/* d->c */
	IPC_SEG_DEL = 202,	/* c->d: no reply */
	IPC_BELL = 210,		/* c->d: a segment is the doorbell; SEG_OK */
	/* 300: jobs */
	IPC_JOIN = 300,		/* c->d: this connection is rank r of job J */
	IPC_JOINED = 301,	/* d->c: all ranks are there, links are up */
	IPC_LEAVE = 302,	/* c->d: orderly detach (mccl_comm_destroy) */
	IPC_ABORT = 303,	/* c->d: abort the job everywhere */
	IPC_JOB_FAILED = 304,	/* d->c: trailer: why; every pending op failed */
	/* 400: operations */
	IPC_OP = 400,		/* c->d: submit a send or a receive */
	IPC_OP_DONE = 401,	/* d->c: trailer: message when code != 0 */
	/* 500: control (mcclctl) */
	IPC_CTL = 500,		/* c->d: trailer: argument (a job name) */
	IPC_CTL_REPLY = 501,	/* d->c: trailer: a JSON document */
};

/* Collectives, as carried in ipc_op.coll and peer_ophdr.coll. */
enum coll_type {
	COLL_ALLREDUCE = 1,
	COLL_BROADCAST = 2,
	COLL_BARRIER = 3,
	COLL_REDUCE = 4,
	COLL_ALLGATHER = 5,
	COLL_REDUCE_SCATTER = 6,
	COLL_ALLTOALL = 7,
	COLL_SEND = 8,		/* point to point: root is the peer rank */
	COLL_RECV = 9,
	COLL_GATHER = 10,
	COLL_SCATTER = 11,
	COLL_ALLGATHERV = 12,	/* vec: recvcounts, displs; count: their sum */
	COLL_ALLTOALLV = 13,	/* vec: sendcounts, sdispls, recvcounts,
				   rdispls; count: 0 */
	COLL_MAX = 13,
};

/*
 * Inter-node algorithms (ipc_op.algo, peer_ophdr.algo).  A client asks for
 * one or for AUTO; the daemon resolves AUTO (its "algo" key, else by its
 * cost model) and puts what it runs in the operation header, so nodes that
 * chose differently fail the op with both names instead of hanging.  The
 * allreduce (and reduce) runs ring, doubling, rabenseifner or direct; the
 * broadcast ring (a pipelined chain) or tree: one asked for that a
 * collective does not have leaves that collective's choice to the model.
 */
enum algo_type {
	ALGO_AUTO = 0,		/* ipc_op only: the daemon chooses */
	ALGO_RING = 1,		/* pipelined ring: reduce-scatter, allgather */
	ALGO_DOUBLING = 2,	/* recursive doubling: log2(n) whole exchanges */
	ALGO_RABENSEIFNER = 3,	/* recursive halving, then recursive doubling */
	ALGO_DIRECT = 4,	/* one round: every node sends to every node */
	ALGO_TREE = 5,		/* broadcast: a binomial tree from the root */
	ALGO_MAX = 5,
};

/* How messages list them, for MCCL_ALGO and the "algo" key. */
#define ALGO_NAMES	"auto, ring, doubling, rabenseifner, direct or tree"


#define IPC_ANY_TAG	0xffffffffU
#define IPC_ANY_SOURCE	0xffffffffU	/* a receive's root: any rank */

enum ctl_cmd {
	CTL_STATUS = 1,
	CTL_PEERS = 2,
	CTL_JOBS = 3,
	CTL_ABORT = 4,		/* trailer: job name; root and admin_group */
	CTL_RELOAD = 5,		/* root and admin_group */
	CTL_METRICS = 6,
	CTL_JOB = 7,		/* trailer: job name */
	CTL_MONITOR = 8,	/* a reply per event, until the client leaves */
	CTL_FAILED = 9,		/* the failed jobs kept (failed_jobs_kept) */
	CTL_CHECK = 10,		/* measure every pair of nodes; trailer:
				   "force" or nothing; root and admin_group */
	CTL_MAX = 10,
};

/*
 * probe_addr: where the client's memory holds probe_val, until HELLO_OK.
 * The daemon reads it there (process_vm_readv) to learn whether the kernel
 * lets it read and write this client's memory itself; 0: don't try.
 */
struct ipc_hello {
	uint32_t	version;
	uint32_t	pid;
	uint64_t	probe_addr;
	uint64_t	probe_val;
};

struct ipc_hello_ok {
	uint32_t	version;
	uint32_t	node_index;
	uint32_t	nnodes;
	uint32_t	init_timeout_ms;	/* the daemon's defaults, so the */
	uint32_t	op_timeout_ms;		/* library's waits match them */
	uint32_t	xmem;		/* 1: IPC_OP_XMEM is open to this client */
	char		node_name[NODE_NAME_MAX];
};

struct ipc_error {
	uint32_t	code;		/* mccl_result_t */
	uint32_t	request;	/* the type of the request that failed */
};

struct ipc_seg_add {
	uint32_t	seg_id;		/* chosen by the client, unique per connection */
	uint64_t	size;
};

struct ipc_seg_ok {
	uint32_t	seg_id;
};

struct ipc_seg_del {
	uint32_t	seg_id;
};

struct ipc_bell {
	uint32_t	seg_id;		/* its first IPC_BELL_SIZE bytes */
};


struct ipc_join {
	uint32_t	nranks;
	uint32_t	rank;
	uint32_t	timeout_ms;
	char		job[JOB_NAME_MAX];
};

struct ipc_joined {
	uint64_t	job_id;
	uint32_t	nranks;
	uint32_t	rank;
	uint32_t	nnodes;		/* nodes the job spans */
	uint32_t	nlocal;		/* its ranks on this node */
};

/*
 * An operation: a collective's descriptor in the submission ring, or a send
 * or receive in an IPC_OP record.  Buffers are (segment, offset) pairs
 * inside segments this connection registered; the daemon checks that
 * [off, off + len) lies inside.  A v-collective's vector (nranks uint64s
 * per array, proto_vec_len) is one more such pair: the daemon copies it
 * before it checks it.
 */
struct ipc_op {
	uint64_t	seq;		/* rises with each op of a connection,
					   on the ring and in records alike;
					   collectives match by their order
					   on the ring, not by seq */
	uint8_t		coll;
	uint8_t		dtype;
	uint8_t		redop;
	uint8_t		algo;		/* enum algo_type: allreduce and reduce */
	uint32_t	root;		/* root rank, where the collective has one */
	uint64_t	count;
	uint32_t	send_seg;
	uint32_t	recv_seg;
	uint64_t	send_off;
	uint64_t	recv_off;
	uint32_t	timeout_ms;	/* 0: the daemon's op_timeout */
	uint32_t	tag;		/* send and recv; IPC_ANY_TAG for recv */
	uint32_t	vec_seg;	/* the v-collectives' vector */
	uint8_t		wire;		/* float32 sum or average: what crosses
					   the network, MCCL_BFLOAT16 or
					   MCCL_FLOAT16; 0: float32 itself */
	uint8_t		flags;		/* IPC_OP_* */
	uint64_t	vec_off;
};

/*
 * An allreduce's send_off and recv_off are addresses in the client's own
 * memory, which the daemon reads and writes there (process_vm_readv and
 * writev) instead of in a segment: send_seg and recv_seg are 0.  Only where
 * HELLO_OK said xmem.
 */
#define IPC_OP_XMEM		0x01

/*
 * The doorbell segment: a client registers it (IPC_BELL) before it joins a
 * job.  It holds two things, each half written by one side only:
 *
 * Completion.  When a collective ends well, the job's engine thread stores
 * the connection's seq of it in done_seq (collectives end in the order a
 * connection submits them, so every earlier one has ended too), then bumps
 * word, and wakes the futex on word if sleepers is not 0.  The daemon bumps
 * word likewise after every record it sends the connection, so a client
 * sleeping on word also wakes for replies and failures, which come as
 * records.
 *
 * Submission.  A ring of IPC_SQ_SLOTS collective descriptors, single
 * producer (the client) and single consumer (the engine).  The client
 * writes descriptor n into sq[n % IPC_SQ_SLOTS], then stores n + 1 in
 * sq_head (release); it never has more than IPC_SQ_SLOTS descriptors
 * ahead of sq_tail, the count the engine has taken.  Then, if sq_sleeping
 * is set, it bumps sq_bell and wakes the futex on it: the engine sets
 * sq_sleeping, looks at sq_head once more, and sleeps on sq_bell.
 *
 * The ring and the socket are not ordered with each other: a segment that
 * a descriptor names must have been registered (SEG_OK) before the
 * descriptor is published, and a segment deleted (SEG_DEL, unanswered) may
 * still serve descriptors the daemon takes before it reads the deletion.
 *
 * The daemon writes done_seq, word, sq_tail and sq_sleeping, and reads the
 * rest.  It copies a descriptor out of its slot before checking it, and
 * checks it as it would a record, so a client that scribbles on the page
 * confuses itself alone.  Fields are accessed atomically; word and sq_bell
 * are shared futexes.  Each side's fields have a cache line of their own.
 */
#define IPC_SQ_SLOTS		64

struct ipc_doorbell {
	/* the daemon's: completion */
	uint32_t	word;		/* futex: bumped after each event */
	uint32_t	sleepers;	/* client threads in FUTEX_WAIT on word
					   (the client's) */
	uint64_t	done_seq;	/* collectives up to this seq ended well */
	uint8_t		pad0[48];
	/* the client's: submission */
	uint64_t	sq_head;	/* descriptors published, ever */
	uint32_t	sq_bell;	/* futex: the engine sleeps on it */
	uint8_t		pad1[52];
	/* the daemon's: consumption */
	uint64_t	sq_tail;	/* descriptors taken, ever */
	uint32_t	sq_sleeping;	/* the engine sleeps on sq_bell */
	uint8_t		pad2[52];
	struct ipc_op	sq[IPC_SQ_SLOTS];
};

#define IPC_BELL_SIZE		sizeof(struct ipc_doorbell)

_Static_assert(IPC_BELL_SIZE <= 8192, "the doorbell fits in two pages");

struct ipc_op_done {
	uint64_t	seq;
	uint32_t	code;
	uint32_t	source;		/* a receive: the rank that sent, */
	uint32_t	tag;		/* and its tag; else 0 */
};

struct ipc_job_failed {
	uint32_t	code;		/* mccl_result_t */
};

struct ipc_ctl {
	uint32_t	cmd;
};

struct ipc_ctl_reply {
	uint32_t	code;
	uint32_t	more;		/* 1: the document goes on in the next */
};

/*
 * A control reply's JSON document: a record's trailer at a time, each
 * record 64 KiB at most, well within a Unix socket's default send buffer
 * (net.core.wmem_default, 208 KiB), past which a record is refused.
 */
#define CTL_PIECE_MAX		(65536 - WIRE_HDR_LEN - 8)
#define CTL_DOC_MAX		(64u << 20)

extern const struct wire_proto ipc_proto;

#define PROTO_SYSTEM_SOCKET	"/run/mccl/mccld.sock"

void	proto_default_socket(char *, size_t);
int	proto_job_name_check(const char *, char *, size_t);
int	proto_dir_check(const char *, const uid_t *, size_t, char *, size_t);
int	proto_op_bytes(int, uint64_t, size_t, uint32_t, uint32_t, uint32_t,
	    uint64_t *, uint64_t *);
int	proto_bufs_ok(int, uint32_t, uintptr_t, uint64_t, uintptr_t, uint64_t);
size_t	proto_vec_len(int, uint32_t);
void	proto_vec_recv_blocks(int, uint32_t, const uint64_t *,
	    const uint64_t **, const uint64_t **);
int	proto_vec_bytes(int, uint64_t, size_t, uint32_t, uint32_t,
	    const uint64_t *, uint64_t *, uint64_t *, char *, size_t);
uint32_t proto_vec_digest(const uint64_t *, size_t);
const char *proto_coll_name(int);
/* The result codes the wire carries: mccl_result_t's (mccl.h, whose users
 * check that the two agree). */
#define PROTO_NUM_RESULTS	11
const char *proto_result_name(int);
const char *proto_algo_name(int);
int	proto_algo_parse(const char *);
int	proto_coll_reduces(int);
int	proto_coll_has_root(int);
int	proto_coll_p2p(int);

#endif
