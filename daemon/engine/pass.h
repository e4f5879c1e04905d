/*
 * pass.h: a node's passes over its local buffers (pass.c), as the engine
 * runs them: on its crew, or a side crew beside the network.
 */
#ifndef MCCL_PASS_H
#define MCCL_PASS_H

#include "engine/engine.h"
#include "engine/crew.h"

#define PASS_PARTS_MAX		(CREW_MAX + 1)

struct pass_fault {			/* the access that stopped a pass */
	int			 err;		/* an errno; 0: none */
	struct xmem	*xm;		/* whose memory */
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
	struct xmem *const *sxm;		/* pass_xmem, or NULL */
	struct xmem *const *dxm;
	void			**local;	/* nparts x ndsts: the local
						   ones of a chunk */
	uint8_t			*bounce;	/* nparts chunks: a remote
						   source's, reduced from */
	struct pass_fault	 fault;
};

int	pass_init(struct pass *, void *const *, uint32_t, const void *const *,
	    uint32_t, size_t, int, int, uint32_t, unsigned);
int	pass_xmem(struct pass *, struct xmem *const *,
	    struct xmem *const *);
void	pass_part(void *, unsigned);
int	pass_run(struct pass *, struct crew *);
void	pass_free(struct pass *);

#endif
