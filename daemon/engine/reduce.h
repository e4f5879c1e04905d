/*
 * reduce.h: element-wise kernels (reduce.c), callable from any thread:
 * the reductions by dtype and op, vectorised and chosen at run time, the
 * 16-bit wire's conversions, and the names mcclctl and the log print.
 */
#ifndef MCCL_REDUCE_H
#define MCCL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "mccl.h"		/* the dtypes and ops */

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

#endif
