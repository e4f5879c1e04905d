/*
 * pass.h: a node's passes over its local buffers (pass.c), as the engine
 * runs them: on its crew, or a side crew beside the network.
 */
#ifndef MCCL_PASS_H
#define MCCL_PASS_H

#include "engine/engine.h"

#define PASS_PARTS_MAX		(CREW_MAX + 1)

struct pass_fault {			/* the access that stopped a pass */
	int			 err;		/* an errno; 0: none */
	const struct xmem	*xm;		/* whose memory */
	uint64_t		 addr;
	size_t			 len;
	int			 writing;
};

struct pass {
	void *const		*dsts;
	const void *const	*srcs;
	uint32_t		 ndsts, nsrcs;
	size_t			 count, per;
	unsigned		 nparts;
	int			 dtype, redop;
	uint32_t		 avg_div;
	void			**pdsts;	/* nparts x ndsts, offset */
	const void		**psrcs;	/* nparts x nsrcs, offset */
	const struct xmem *const *sxm;		/* pass_xmem, or NULL */
	const struct xmem *const *dxm;
	void			**local;	/* nparts x ndsts: the local
						   ones of a chunk */
	uint8_t			*bounce;	/* nparts chunks: a remote
						   source's, reduced from */
	struct pass_fault	 fault;
};

/*
 * A large allreduce's segments (engine_segments), cut alike on every node
 * from the count alone: PASS_SEG_FIRST bytes first and last, doubling up
 * to PASS_SEG_MAX between, the middle in equal segments of at most that.
 */
#define PASS_SEG_FIRST		(1u << 20)
#define PASS_SEG_MAX		(8u << 20)

struct pass_segs {
	size_t		 count;		/* elements of the op */
	size_t		 first;		/* elements of the first and last */
	size_t		 mid;		/* elements of each middle one */
	unsigned	 nramp;		/* doubling segments at each end */
	size_t		 nmid;		/* middle segments */
	size_t		 nseg;
};

void	pass_segs_plan(struct pass_segs *, size_t, size_t);
size_t	pass_seg_off(const struct pass_segs *, size_t);
size_t	pass_seg_len(const struct pass_segs *, size_t);

int	pass_init(struct pass *, void *const *, uint32_t, const void *const *,
	    uint32_t, size_t, int, int, uint32_t, unsigned);
int	pass_xmem(struct pass *, const struct xmem *const *,
	    const struct xmem *const *);
void	pass_part(void *, unsigned);
int	pass_run(struct pass *, struct crew *);
void	pass_free(struct pass *);

#endif
