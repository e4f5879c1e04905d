/*
 * duplex.h: the frame engine under the node-level algorithms (ring.c,
 * allreduce.c).
 * An algorithm says what a node sends and receives as plans (which blocks
 * of which buffer, cut into frames of what size, which of them reduced on
 * arrival) paired into lanes (a plan out to one node, a plan in from
 * another); duplex.c moves the frames of any number of lanes at once, each
 * link both ways, until all are done, the op fails or its deadline passes.
 */
#ifndef MCCL_DUPLEX_H
#define MCCL_DUPLEX_H

#include "engine/xfer.h"

#define TXQ		8			/* frames one sendmsg may carry */
#define OPHDR_LEN	25			/* body of PEER_DATA_OPHDR */
#define MIN(a, b)	((a) < (b) ? (a) : (b))
#define MAX(a, b)	((a) > (b) ? (a) : (b))

/* One frame's payload and where it lives. */
struct frame {
	uint8_t		*ptr;
	size_t		 len;
	uint16_t	 type;		/* PEER_DATA_OPHDR or PEER_DATA */
	uint8_t		 reduce;	/* received into scratch, then reduced */
	uint8_t		 fwd;		/* sent: a received frame passed on */
};

/*
 * An operation as this node sees it.  Blocks are numbered from here: block
 * 0 is this node's own contribution, block i >= 1 the i-th to arrive from
 * upstream (the left, or the right on a reversed lane).  Sent block i
 * (i >= 1) is always received block i, so the ring moves every block one
 * position per step and the sender needs no list.
 */
struct plan {
	const struct xfer *x;
	struct link *const *links;	/* its lane's link to each position */
	uint8_t		*scratch;	/* its lane's two reduction slots */
	int		 reversed;	/* data flows right to left */
	uint8_t		*buf;
	uint8_t		*src;		/* allreduce: this node's contribution,
					   only read; buf when in place */
	size_t		 chunk;		/* payload bytes per frame, whole elements */
	size_t		 esize;
	int		 dtype, op;
	size_t		 nreduce;	/* received blocks 1..nreduce are reduced */
	size_t		 total;		/* allreduce: elements; otherwise bytes */
	const size_t	*offs, *lens;	/* allgather: block of each position */
	void		(*block)(const struct plan *, size_t, size_t *, size_t *);
};

/* Cuts a range of blocks into frames of at most plan->chunk bytes. */
struct walk {
	size_t		 blk, end;	/* next block, one past the last */
	size_t		 off;		/* bytes of blk already cut */
};

struct txent {
	uint8_t		 hdr[WIRE_HDR_LEN];
	uint8_t		*data;
	size_t		 len;
};

/* The link to the right: the frames this node sends. */
struct tx {
	int		 active;
	struct link	*link;
	uint32_t	 peer;
	struct walk	 w;
	struct frame	 next;		/* cut, not yet queued */
	int		 has_next;
	size_t		 nfwd;		/* forwarded frames queued so far */
	struct txent	 q[TXQ];	/* being sent, oldest at qhead */
	size_t		 qhead, qlen;
	size_t		 qoff;		/* bytes of q[qhead] already sent */
	uint8_t		 opbody[OPHDR_LEN];
	uint64_t	 last_ns;	/* last byte accepted */
};

struct pend {
	uint8_t		*dst;
	const uint8_t	*own;		/* this node's contribution to dst */
	const uint8_t	*src;		/* the received frame */
	size_t		 len;
};

/* The link to the left: the frames this node receives. */
struct rx {
	int		 active;
	struct link	*link;
	uint32_t	 peer;
	struct walk	 w;
	struct frame	 cur, nxt;
	int		 has_cur, has_nxt;
	uint8_t		 hdr[WIRE_HDR_LEN];
	size_t		 hdr_got;	/* of cur's header */
	uint8_t		 nhdr[WIRE_HDR_LEN];	/* the next one, read ahead */
	size_t		 got;		/* of cur's payload */
	uint8_t		*slot;		/* cur's half of scratch, when reduced */
	size_t		 nred;		/* reduced frames started */
	struct pend	 pend[2];	/* received, not yet reduced; oldest first */
	size_t		 npend;
	size_t		 done;		/* data frames final in buf, in order */
	uint8_t		 opbody[OPHDR_LEN];
	uint64_t	 last_ns;	/* last byte received */
};

/* One pair of directions the engine drives: frames out by ptx, in by prx. */
struct lane {
	const struct plan *ptx, *prx;
	size_t		 nown, nsend, nrecv;
	uint32_t	 to, from;
	struct tx	 tx;
	struct rx	 rx;
};

/* Part k of an op, on lane k's links (duplex_parts). */
typedef int (*part_fn)(struct xfer *, size_t, void *);

int	duplex_fail(struct xfer *, int, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
int	duplex_plan(struct xfer *, struct plan *, void *, size_t);
const char *duplex_node(const struct xfer *, uint32_t);
int	duplex_lanes(struct xfer *, struct lane *, size_t);
int	duplex_parts(struct xfer *, size_t, part_fn, void *);
int	duplex_run(struct xfer *, const struct plan *, const struct plan *,
	    size_t, size_t, size_t, uint32_t, uint32_t);

/* ring.c: block cuts, a lane's neighbours and the pairwise step, which
   allreduce.c's algorithms share */
uint32_t ring_pos(const struct plan *, size_t);
size_t	block_start(size_t, size_t, size_t);
void	whole_block(const struct plan *, size_t, size_t *, size_t *);
void	ring_peers(const struct plan *, uint32_t *, uint32_t *);
int	pair_run(struct xfer *, struct plan *, uint32_t, const size_t[2],
	    const size_t[2], int, int);

#endif
