/*
 * coll.h: a collective on this node, in layers whose calls go down only:
 * coll.c runs an op by its collective's row; pipeline.c runs a large
 * allreduce in segments, overlapped; exchange.c runs the collectives that
 * move blocks; local.c, under them all, combines the local ranks' buffers
 * into one and fans the node's result out to them.
 */
#ifndef MCCL_COLL_H
#define MCCL_COLL_H

#include "engine/engine_state.h"

struct pass_fault;
struct xmem;

/* local.c */
uint32_t	local_index_of(const struct comm *, uint32_t);
int		coll_nomem(struct xfer *);
uint8_t	       *coll_tmp(struct comm *, size_t, struct xfer *);
void		coll_pass_fault(const struct comm *, const struct op *,
		    const struct pass_fault *, struct xfer *);
void		coll_pass_fault_into(const struct comm *, const struct op *,
		    const struct pass_fault *, int *, char *, size_t);
int		coll_pass(struct comm *, const struct op *, void *const *,
		    struct xmem *const *, uint32_t, const void *const *,
		    struct xmem *const *, uint32_t, size_t, uint32_t,
		    struct xfer *);
size_t		op_bytes(const struct op *);
int		op_in_xmem(const struct comm *, const struct op *);
uint32_t	combine_srcs(const struct comm *, const struct op *,
		    const uint8_t *, size_t, const void **,
		    struct xmem **);
uint32_t	fan_dsts(const struct comm *, const struct op *, uint8_t *,
		    size_t, uint32_t, void **, struct xmem **);
int		coll_combine(struct comm *, const struct op *, uint8_t *, size_t,
		    size_t, struct xfer *);
int		coll_fan_out(struct comm *, const struct op *, uint8_t *, size_t,
		    size_t, uint32_t, struct xfer *);
uint8_t	       *coll_node_buf(struct comm *, const struct op *, struct xfer *);

/* pipeline.c */
int		coll_segmented(const struct comm *, size_t);
int		coll_segments(struct comm *, struct op *, struct xfer *);

/* exchange.c */
int		coll_allgather(struct comm *, struct op *, struct xfer *);
int		coll_gather(struct comm *, struct op *, struct xfer *);
int		coll_scatter(struct comm *, struct op *, struct xfer *);
int		coll_reduce_scatter(struct comm *, struct op *, struct xfer *);
int		coll_alltoall(struct comm *, struct op *, struct xfer *);
int		coll_allgatherv(struct comm *, struct op *, struct xfer *);
int		coll_alltoallv(struct comm *, struct op *, struct xfer *);

#endif
