/*
 * engine.h: the data plane's interface (engine/), the calls the control
 * plane makes and what they take: a job as its threads see it, its
 * operations (op.c), its engine thread (engine.c), the submission rings
 * (subq.c), send/recv (p2p.c).  The rest of engine/ has its own headers:
 * reduce.h (kernels), crew.h (helper threads), seg.h (clients' memory),
 * xfer.h (an op between nodes, the algorithms), coll.h (an op on this
 * node), algo.h (the cost model), budget.h (memory caps), check.h
 * (mcclctl check's links).  Nothing here calls up into control/: what goes
 * up is an op on the engine's completion queue and a wake-up of the main
 * loop (engine_notify); the control plane takes both with engine_collect.
 */
#ifndef MCCL_ENGINE_H
#define MCCL_ENGINE_H

#include <sys/queue.h>
#include <sys/types.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mccl.h"
#include "ipc.h"
#include "peer.h"
#include "log.h"
#include "transport/transport.h"	/* conf_node, link_choice */
#include "engine/algo.h"
#include "engine/budget.h"
#include "engine/seg.h"

/* duplex.c: the bytes each node's data links carried, both ways; the
 * engine threads that move them count them, the control plane reads them */
enum { DATA_SENT, DATA_RECEIVED };
uint64_t	data_bytes(uint32_t, int);

#define NO_POS		UINT32_MAX	/* no node position */

/* ---- a job and its operations, as both planes see them ----
 *
 * An op is the engine's while it runs, the main thread's once handed back
 * (engine_collect).
 */

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
	struct comm	*comm;
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

/*
 * A job as its threads see it: who it is, its ranks and nodes, what it
 * runs by, and the data plane's own state.  The control plane fills it in
 * when the job forms (control/job.h keeps it in the job, with the job's
 * life) and changes none of it while the threads run.
 */
struct comm {
	uint64_t	 id;		/* 0 until formed */
	uid_t		 uid;
	char		 name[JOB_NAME_MAX];
	uint32_t	 nranks;
	uint32_t	 nlocal;	/* ranks on this node */
	uint32_t	*local_ranks;	/* sorted, once formed */

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
	uint32_t	 nlanes;	/* collective links per pair of nodes */
	struct link_cost cost;		/* agreed at formation: what AUTO
					   predicts from (algo.c) */
	struct engine_conf conf;	/* what its threads read of the settings */

	/* the data plane's state, its own (engine_state.h, p2p.c) */
	struct engine	*eng;		/* engine.c, from engine_start */
	struct p2p	*p2p;		/* the send/recv thread and its links */
	struct event	*ev_engine;	/* the main loop's: activated by the
					   engine and p2p threads, also when
					   they exit */
};


/* ---- engine/op.c: an operation's life (any thread) ---- */

struct op	*op_new(struct comm *);
void		 op_free(struct op *);
const char	*op_check(uint32_t, const struct ipc_op *, char *, size_t);
int		 op_attach(struct op *, uint32_t, struct segtab *, uint32_t,
		    const struct ipc_op *, char *, size_t);

/* ---- p2p.c: a job's point-to-point messages (their own thread) ---- */

struct p2p;
int		p2p_init(struct comm *, char *, size_t);
int		p2p_start(struct comm *, char *, size_t);
void		p2p_submit(struct comm *, struct op *);
int		p2p_adopt_link(struct comm *, uint32_t, int);
void		p2p_quit(struct comm *);
int		p2p_exited(struct comm *);
void		p2p_finish(struct comm *);
void		p2p_limits(uint64_t, uint64_t);
uint64_t	p2p_kept_bytes(void);
uint64_t	p2p_links_open(void);

/* ---- subq.c: submission rings, the engine's side ---- */

struct op	*subq_take(struct comm *, uint64_t *);
int		subq_ready(struct comm *);
struct op	*subq_take_ahead(struct comm *);
struct op	*subq_next_ahead(struct comm *, int);
void		subq_completed(struct comm *, const struct op *);
void		subq_leave(struct comm *, uint32_t);
uint64_t	subq_submitted(const struct comm *, uint32_t);
uint64_t	subq_waiting_since(const struct comm *, uint64_t *);
int		subq_pending(const struct comm *, uint32_t);

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

int		engine_start(struct comm *, const struct engine_rank *, char *,
		    size_t);
int		engine_adopt_link(struct comm *, uint32_t, uint32_t, int);
int		engine_collect(struct comm *, struct op_list *, int *, char *,
		    size_t);
int		engine_current(struct comm *, struct op_now *);
int		engine_stopped(struct comm *);
void		engine_abort(struct comm *);
void		engine_wake(struct comm *);
void		engine_retune(struct comm *, const struct engine_tunables *);
void		engine_notify(struct comm *);
void		engine_op_done(struct comm *, struct op *);
void		engine_quit(struct comm *);
int		engine_exited(struct comm *);
void		engine_finish(struct comm *);
void		engine_shutdown(void);
uint64_t	engine_links_open(void);

#endif

