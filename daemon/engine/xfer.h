/*
 * xfer.h: one operation between nodes, for engine/ alone: struct xfer
 * (the links, the positions, the deadline and what the op reports) and the
 * algorithms that run on it (ring.c, allreduce.c, on duplex.c's frame
 * engine).
 */
#ifndef MCCL_XFER_H
#define MCCL_XFER_H

#include "engine/engine.h"
#include "engine/algo.h"

struct crew;
struct link;

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

/* duplex.c: counts the bytes a data link carried for data_bytes (engine.h) */
void		count_bytes(int, const uint32_t *, uint32_t, size_t);

#endif
