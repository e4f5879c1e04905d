/*
 * engine.h: the data plane (engine/), for the control plane above it and
 * for its own files: a job's engine thread (engine.c) and what it runs on,
 * the submission rings (subq.c), operations (op.c), segments (seg.c), the
 * inter-node algorithms (ring.c), send/recv (p2p.c), the reduction kernels
 * (reduce.c).  Nothing here calls up into control/: what goes up is an op
 * on the engine's completion queue and a wake-up of the main loop
 * (engine_notify); the control plane takes both with engine_collect.
 */
#ifndef MCCL_ENGINE_H
#define MCCL_ENGINE_H

#include <sys/queue.h>
#include <sys/types.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mccld.h"
#include "engine/algo.h"
#include "engine/budget.h"

struct link;

/* ---- reduce.c: element-wise kernels (any thread) ---- */

size_t		dtype_size(int);
const char	*dtype_name(int);
const char	*redop_name(int);
int		reduce_supported(int dtype, int op);
void		reduce_into(void *dst, const void *src, size_t count, int dtype,
		    int op);
void		reduce_many(void *dst, const void *const *srcs, size_t nsrcs,
		    size_t count, int dtype, int op);
void		reduce_fan(void *const *dsts, size_t ndsts,
		    const void *const *srcs, size_t nsrcs, size_t count,
		    int dtype, int op, uint32_t avg_div);
void		reduce_scale_avg(void *buf, size_t count, int dtype,
		    uint32_t nranks);
void		wire_narrow(void *, const float *, size_t, int);
void		wire_widen(float *, const void *, size_t, int);
void		wire_add_narrow(float *, const float *, const void *, void *,
		    size_t, int, int);
const char	*reduce_isa(void);
int		reduce_force_isa(const char *);	/* tests: NULL = best */

/* ---- crew.c: a job's helper threads, one task's parts at once (engine thread) ---- */
#define CREW_MAX	7		/* threads besides the caller */
struct crew;
struct crew	*crew_new(void);
void		 crew_free(struct crew *);
int		 crew_start(struct crew *, unsigned,
		    void (*)(void *, unsigned), void *);
void		 crew_wait(struct crew *);
int		 crew_run(struct crew *, unsigned, void (*)(void *, unsigned),
		    void *);
void		 crew_stop(struct crew *);
int		 crew_stopped(const struct crew *);
int		 crew_stop_fd(const struct crew *);
unsigned	 crew_size(struct crew *);
/* ---- ring.c and allreduce.c, on duplex.c: algorithms between nodes
   (engine thread) ---- */

/*
 * How long an op waits, once a link hung up or the job was aborted, for
 * what may still come (the last frames, the failure's reason) before it
 * calls the event its own failure (duplex.c, engine.c).
 */
#define LINK_GRACE_NS	(250 * 1000000ULL)

struct xfer {
	uint32_t	  nnodes;	/* nodes of the job, in ring order */
	uint32_t	  me;		/* this node's position in that order */
	struct link *const *links;	/* data link to each position, lane by
					   lane (nlanes * nnodes); NULL at me,
					   and where not made yet */
	/* makes lane 0's links to the positions given, or fails as the op
	   (code, err); NULL: every link the op needs is made */
	int		(*link_on_use)(struct xfer *, const uint32_t *,
			    uint32_t);
	void		 *link_arg;
	uint32_t	  nlanes;	/* allreduce: rings run side by side */
	const char *const *names;	/* node name of each position, for messages */
	int		  abort_fd;	/* readable once the job is aborted */
	const int	 *aborted;	/* set then too (atomic); or NULL */
	uint64_t	  deadline_ns;	/* CLOCK_MONOTONIC; 0: none */
	size_t		  chunk;	/* pipeline chunk in bytes */
	int		  algo;		/* allreduce: enum algo_type asked for */
	int		  wire;		/* float32 sum: MCCL_BFLOAT16 or
					   MCCL_FLOAT16 on the wire, where the
					   ring runs; 0 none */
	uint64_t	  wire_saved;	/* bytes that wire did not send */
	uint8_t		  wire_run;	/* the wire the data crossed on (the
					   ring's float32 sums), else 0 */
	uint64_t	  lane_ns;	/* lanes on threads of their own: from
					   their start to the last one's end,
					   summed over the lanes */
	uint64_t	  lane_wait_ns;	/* of it, lanes ended, waiting for the
					   last one */
	struct link_cost  cost;		/* the job's, for AUTO (algo.c) */
	uint64_t	  spin_ns;	/* spin on the links before sleeping */
	uint8_t		 *scratch;	/* at least 2 * chunk * nlanes bytes */
	struct crew	 *crew;		/* runs a large allreduce's lanes on
					   threads of their own; or NULL */
	struct crew	 *stop_by;	/* a lane's copy: its crew, to stop the
					   other lanes with and be stopped by */
	struct peer_ophdr hdr;		/* this operation, checked against the peers' */
	int		  pair_bytes;	/* hdr.count: the bytes of each pair, */
	uint64_t	  rx_bytes;	/* expected from the node we receive from */
	const uint32_t	 *node_index;	/* cluster index of each position */
	uint32_t	 *waiting;	/* the position waited on, published
					   before each sleep; or NULL */
	uint32_t	  blame;	/* timed out waiting on it; NO_POS */
	uint64_t	  hup_ns;	/* a link we send on hung up then, */
	uint64_t	  abort_ns;	/* the job was aborted then: this op */
	int		  code;		/* mccl_result_t, on failure */
	char		  err[ERR_MAX];
};

int		ring_allreduce(struct xfer *, const void *, void *, size_t, int,
		    int);
int		node_allreduce(struct xfer *, const void *, void *, size_t, int,
		    int);
int		ring_allreduce_wire(struct xfer *, const void *, void *, size_t,
		    int, int);
int		node_broadcast(struct xfer *, void *, size_t, uint32_t);
int		ring_pairs_with(uint32_t, uint32_t, uint32_t);
int		ring_broadcast(struct xfer *, void *, size_t, uint32_t);
int		tree_broadcast(struct xfer *, void *, size_t, uint32_t);
int		ring_allgather(struct xfer *, void *, const size_t *, const size_t *);
int		ring_barrier(struct xfer *);
int		xfer_exchange(struct xfer *, uint32_t, const void *, size_t,
		    uint32_t, void *, size_t);
int		xfer_exchange_sized(struct xfer *, uint32_t, const void *,
		    size_t, uint32_t, void *, size_t);
int		ring_gather(struct xfer *, void *, const size_t *,
		    const size_t *, uint32_t, void *);
int		ring_scatter(struct xfer *, void *, const size_t *,
		    const size_t *, uint32_t, void *);

/* duplex.c: the bytes each node's data links carried, both ways; the
 * engine threads that move them count them, the control plane reads them */
enum { DATA_SENT, DATA_RECEIVED };
void		count_bytes(int, const uint32_t *, uint32_t, size_t);
uint64_t	data_bytes(uint32_t, int);

/* ---- seg.c: clients' segments (any thread, under one lock) ---- */

struct seg {
	TAILQ_ENTRY(seg) entry;
	uint32_t	 id;
	uint8_t		*base;
	uint64_t	 size;
	int		 refs;		/* its table's, plus one per op using
					   it, plus a doorbell's */
};
TAILQ_HEAD(seg_list, seg);

/* xmem.c: a client's own memory, where the kernel lets the daemon in */
struct xmem {
	pid_t		 pid;		/* 0: closed */
	int		 pidfd;
	uint32_t	 inflight;	/* calls into the kernel now (atomic) */
	uint64_t	 moved_ns;	/* the last one's start or end (atomic) */
	int		 refused;	/* no more calls (atomic): xmem_refuse */
};

int		xmem_open(struct xmem *, pid_t, uid_t, uint64_t, uint64_t,
		    char *, size_t);
void		xmem_close(struct xmem *);
int		xmem_read(struct xmem *, void *, uint64_t, size_t);
uint64_t	xmem_stuck_ns(struct xmem *);
void		xmem_refuse(struct xmem *);
int		xmem_write(struct xmem *, uint64_t, const void *, size_t);

struct segtab {				/* one connection's segments */
	struct seg_list	 segs;
	struct xmem	 xm;		/* and its own memory: set at HELLO,
					   before any job reads the table */
	uint32_t	 nsegs;		/* main thread */
	uint64_t	 bytes;		/* main thread */
	int		 refs;		/* the connection's, its engine's */
};

struct segtab	*segtab_new(void);
void		segtab_ref(struct segtab *);
void		segtab_unref(struct segtab *);
void		segtab_clear(struct segtab *);
struct seg	*segtab_find(struct segtab *, uint32_t);
int		segtab_add(struct segtab *, uint32_t, uint8_t *, uint64_t);
void		segtab_del(struct segtab *, uint32_t);
void		seg_ref(struct seg *);
void		seg_unref(struct seg *);
struct seg	*seg_resolve(struct segtab *, uint32_t, uint64_t, uint64_t,
		    uint8_t **, char *, size_t);
void		bell_ring(struct seg *, uint64_t);

/* ---- a job and its operations, as both planes see them ----
 *
 * The control plane (control/) makes a job, forms it and fails it: every
 * field here is its own, set before the engine starts and fixed while it
 * runs, except eng, whose state the engine's files alone see (struct
 * engine, engine_state.h), and p2p (p2p.c), alike.  An op is the engine's
 * while it runs, the main thread's once handed back (engine_collect).
 */

enum job_state { JOB_FORMING, JOB_LINKING, JOB_READY, JOB_FAILED };

struct op_part {			/* one local rank's buffers */
	int		 submitted;
	uint64_t	 req;		/* the rank's own seq for this op */
	uint64_t	 ring_to;	/* its ring's tail once this op's
					   descriptor was taken (0: never) */
	struct seg	*send_seg;
	struct seg	*recv_seg;
	uint8_t		*send;
	uint8_t		*recv;
	struct xmem *xm;		/* set: send and recv are addresses in
					   the client's own memory (IPC_OP_XMEM),
					   reached only through xmem_read and
					   xmem_write; its segtab outlives the
					   op (the subq's reference) */
	uint64_t	*vec;		/* v-collectives: the rank's vector, a
					   copy (proto_vec_len); freed with op */
};

struct op {
	TAILQ_ENTRY(op)	 entry;
	struct job	*job;
	struct ipc_op	 desc;		/* as the first local rank sent it; for
					   collectives desc.seq is the job's
					   collective number, the same on every
					   rank */
	uint32_t	 p2p_rank;	/* send/recv: the local rank that posted it
					   (its part is parts[its local index]) */
	uint32_t	 p2p_source;	/* a receive that ended well: the */
	uint32_t	 p2p_tag;	/* message's sender and tag */
	uint64_t	 deadline_ns;	/* for the engine */
	uint64_t	 ready_ns;	/* handed to the engine (metrics) */
	uint64_t	 start_ns;	/* the engine took it */
	uint64_t	 done_ns;	/* the engine ended it */
	uint32_t	 wait_pos;	/* the node position it waits on now
					   (engine, relaxed atomic; NO_POS) */
	uint32_t	 blame_pos;	/* it timed out waiting on this one */
	int		 code;		/* result, set by the engine */
	uint8_t		 algo_run;	/* allreduce or broadcast between
					   nodes: enum algo_type, set by the
					   engine */
	uint64_t	 node_ns;	/* an allreduce's inter-node part took */
	uint8_t		 wire_run;	/* and its wire (peer_ophdr.wire) */
	uint64_t	 wire_saved;	/* bytes that wire did not send */
	uint64_t	 lane_ns;	/* its lanes' time, and of it their */
	uint64_t	 lane_wait_ns;	/* wait for the last (struct xfer) */
	uint64_t	 xmem_bytes;	/* read and written in clients' own
					   memory (set by the engine) */
	int		 combined_ahead;	/* its first segment was
					   combined while the op before it
					   ran (coll_segments) */
	int		 handed_on;	/* its last segment's fan-out, and
					   its end, went to the next op */
	int		 alt_buf;	/* in the ranks' own memory: its node
					   buffer is the engine's tmp_alt */
	struct op	*before;	/* that op, while this one has it */
	char		 err[ERR_MAX];
	struct op_part	 parts[];	/* by local index */
};
TAILQ_HEAD(op_list, op);

/*
 * What a job's threads read of the daemon's settings: control/ copies
 * them when the job forms and never changes the copy while the threads
 * run.  A reload reaches a running engine as engine_retune, which its
 * thread applies between operations; send/recv keeps the job's start.
 */
struct engine_tunables {
	int32_t		 spin_us;	/* SPIN_AUTO, or microseconds */
	int		 algo;		/* enum algo_type, for an op asking AUTO */
	uint32_t	 op_timeout_ms;	/* an op whose client gives none */
	uint32_t	 connect_timeout_ms;	/* a data link's set-up */
	int		 link_choice;	/* enum link_choice */
};

struct engine_conf {
	struct engine_tunables tun;	/* as the job started */
	uint64_t	 chunk_bytes;	/* the pipeline's (a restart changes it) */
	char		 node_name[NODE_NAME_MAX];	/* this node's */
	uint32_t	 node_index;	/* this node's in the cluster */
	struct conf_node *nodes;	/* of each position: name, address, the
					   device that reaches it (the job's) */
};

struct job {
	TAILQ_ENTRY(job) entry;
	uint64_t	 id;		/* 0 until formed */
	uid_t		 uid;
	char		 name[JOB_NAME_MAX];
	uint32_t	 nranks;
	enum job_state	 state;
	uint32_t	 timeout_ms;	/* formation */
	struct event	*ev_timeout;
	struct client	**clients;	/* by rank; NULL if not on this node */
	uint32_t	 nlocal;
	uint32_t	 nleft;		/* local ranks that have gone */
	uint32_t	*local_ranks;	/* sorted, once formed */
	uint32_t	 coordinator;	/* cluster node index */

	/* topology, fixed once formed */
	uint32_t	 nnodes;
	uint32_t	 me;		/* our position in the ring order */
	uint32_t	*node_index;	/* cluster index of each position */
	uint32_t	*rank_pos;	/* position of each rank */
	uint32_t	*rank_slot;	/* of each rank in node order (ranks of
					   position 0 first, each in rank order) */
	uint32_t	*pos_first;	/* first slot of each position */
	uint32_t	*pos_count;	/* ranks of each position */
	int		 slots_are_ranks; /* node order == rank order */
	const char	**names;	/* node name of each position */
	struct engine_conf conf;	/* what its threads read of the settings */

	/* operations */
	uint64_t	 ops_completed;
	uint64_t	 op_slow_ns[2];	/* the slowest collective of the last
					   64, and of the 64 before (main
					   thread: mcclctl's "behind") */
	uint32_t	 op_slow_n;	/* collectives in this window */
	uint64_t	 bytes_done;
	uint64_t	 wire_ops;	/* collectives on a 16-bit wire, */
	uint64_t	 wire_saved;	/* and the bytes it did not send */
	int		 code;		/* the job's failure, once failed */
	char		 err[ERR_MAX];
	time_t		 failed_at;
	uint64_t	 fail_seq;	/* the op that failed it here, if one */
	uint8_t		 fail_coll;	/* did (0: none) */

	/* the data plane (engine/): its state is its own */
	struct engine	*eng;		/* engine.c, from engine_start */
	int		 fail_told;	/* the ranks have IPC_JOB_FAILED */
	uint32_t	 nlanes;	/* collective links per pair of nodes */
	struct link_cost cost;		/* agreed at formation: what AUTO
					   predicts from (algo.c) */

	/* p2p: the send/recv thread and its links (p2p.c) */
	struct p2p	*p2p;
	struct event	*ev_engine;	/* activated by the engine and p2p
					   threads, also when they exit */
	int		 dying;		/* job_free: waiting for its threads */
	int		 stuck;		/* a thread of it is stuck in a client's
					   memory: the exit does not wait */
};


/* ---- engine/op.c: an operation's life (any thread) ---- */

struct op	*op_new(struct job *);
void		 op_free(struct op *);
const char	*op_check(uint32_t, const struct ipc_op *, char *, size_t);
int		 op_attach(struct op *, uint32_t, struct segtab *, uint32_t,
		    const struct ipc_op *, char *, size_t);

/* ---- p2p.c: a job's point-to-point messages (their own thread) ---- */

struct p2p;
int		p2p_init(struct job *, char *, size_t);
int		p2p_start(struct job *, char *, size_t);
void		p2p_submit(struct job *, struct op *);
int		p2p_adopt_link(struct job *, uint32_t, int);
void		p2p_quit(struct job *);
int		p2p_exited(struct job *);
void		p2p_finish(struct job *);
void		p2p_limits(uint64_t, uint64_t);
uint64_t	p2p_kept_bytes(void);
uint64_t	p2p_links_open(void);

/* ---- subq.c: submission rings, the engine's side ---- */

struct op	*subq_take(struct job *, uint64_t *);
int		subq_ready(struct job *);
struct op	*subq_take_ahead(struct job *);
struct op	*subq_next_ahead(struct job *, int);
void		subq_completed(struct job *, const struct op *);
void		subq_leave(struct job *, uint32_t);
uint64_t	subq_submitted(const struct job *, uint32_t);
uint64_t	subq_waiting_since(const struct job *, uint64_t *);
int		subq_pending(const struct job *, uint32_t);

/* ---- engine.c: a job's data plane thread ---- */

struct engine_rank {		/* a local rank, as engine_start takes it */
	uint32_t	 rank;
	struct seg	*bell;		/* its doorbell segment */
	struct segtab	*segs;		/* its connection's segments */
};

struct op_now {			/* the op an engine runs, at one moment */
	uint64_t	 seq;
	uint8_t		 coll;
	uint64_t	 count;
	uint64_t	 ready_ns;
	uint64_t	 deadline_ns;
	uint32_t	 wait_pos;	/* the node position it waits on */
};

int		engine_start(struct job *, const struct engine_rank *, char *,
		    size_t);
int		engine_adopt_link(struct job *, uint32_t, uint32_t, int);
int		engine_collect(struct job *, struct op_list *, int *, char *,
		    size_t);
int		engine_current(struct job *, struct op_now *);
int		engine_stopped(struct job *);
void		engine_abort(struct job *);
void		engine_wake(struct job *);
void		engine_retune(struct job *, const struct engine_tunables *);
void		engine_notify(struct job *);
void		engine_op_done(struct job *, struct op *);
void		engine_quit(struct job *);
int		engine_exited(struct job *);
void		engine_finish(struct job *);
void		engine_shutdown(void);
uint64_t	engine_links_open(void);

#endif
