/*
 * spin.h: how long a thread waiting for the other side of shared memory
 * (a client on its doorbell, an engine on its queue or its links) spins
 * before it sleeps.  Shared by mccld and libmccl, so both ends follow one
 * policy: spin while the machine has an idle CPU for the thread we wait
 * on, never when it has none, and always for a bounded time.
 */
#ifndef MCCL_SPIN_H
#define MCCL_SPIN_H

#include <stddef.h>
#include <stdint.h>

#define SPIN_AUTO	(-1)	/* spin_us: decide by the machine's load */
#define SPIN_AUTO_US	50	/* auto: the bound while a CPU is idle */
#define SPIN_MAX_US	100000

int		spin_parse(const char *, int32_t *, char *, size_t);
uint64_t	spin_budget_ns(int32_t);
void		spin_pause(void);

#endif
