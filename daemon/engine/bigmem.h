/*
 * bigmem.h: large buffers out of malloc's arenas, given back to the
 * kernel when freed (bigmem.c).
 */
#ifndef MCCL_BIGMEM_H
#define MCCL_BIGMEM_H

#include <stddef.h>

void	*bigmem_alloc(size_t);
void	 bigmem_free(void *, size_t);

#endif
