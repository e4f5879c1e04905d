/*
 * pass.c: passes over a node's local buffers: combining its ranks' inputs,
 * handing a result to each.  They are bound by memory, which one core
 * can't drive at the machine's bandwidth, while the ranks or the network
 * wait: a large pass is cut in parts of whole cache lines, one per thread
 * of the job's crew, the last part taking the rest.  Each part does, from
 * its first element on: every dsts[i] = srcs[0] op ... op srcs[nsrcs - 1],
 * divided by avg_div when that is above 1; one source and no division: a
 * copy.
 *
 * A source or destination may be in a client's own memory (xmem.c): such
 * a pass goes a chunk at a time, each chunk read or written by the kernel
 * (one copy) and reduced while it is in the cache.  Those passes have one
 * destination (a combine into the node's buffer) or one source (a fan-out
 * from it); a failed access stops the pass and names the buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/pass.h"
#include "engine/crew.h"
#include "engine/reduce.h"

#define PASS_SPLIT_BYTES	(4u << 20)	/* smaller: one thread */
#define XMEM_CHUNK_BYTES	(256u << 10)	/* a part's bounce buffer */

/* Threads for a pass; sysconf reads a file: not for small ones. */
static unsigned
pass_parts(size_t bytes)
{
	long ncpu;

	if (bytes < PASS_SPLIT_BYTES ||
	    (ncpu = sysconf(_SC_NPROCESSORS_ONLN)) <= 1)
		return 1;
	return ncpu > PASS_PARTS_MAX ? PASS_PARTS_MAX : (unsigned)ncpu;
}

/*
 * A pass of at most maxparts parts (none where there is nothing to do).
 * It keeps dsts and srcs, which must outlive it.  -1: out of memory.
 */
int
pass_init(struct pass *p, void *const *dsts, uint32_t ndsts,
    const void *const *srcs, uint32_t nsrcs, size_t count, int dtype,
    int redop, uint32_t avg_div, unsigned maxparts)
{
	size_t es = dtype_size(dtype), line = 64 / es;

	*p = (struct pass){ .dsts = dsts, .srcs = srcs, .ndsts = ndsts,
	    .nsrcs = nsrcs, .count = count, .nparts = pass_parts(count * es),
	    .dtype = dtype, .redop = redop, .avg_div = avg_div };
	if (ndsts == 0 || nsrcs == 0 || count == 0) {
		p->nparts = 0;
		return 0;
	}
	if (p->nparts > maxparts)
		p->nparts = maxparts;
	p->per = count / p->nparts - (count / p->nparts) % line;
	/* one allocation for both: pdsts, then psrcs */
	p->pdsts = calloc((size_t)p->nparts * (ndsts + nsrcs), sizeof(void *));
	if (p->pdsts == NULL) {
		p->nparts = 0;
		return -1;
	}
	p->psrcs = (void *)(p->pdsts + (size_t)p->nparts * ndsts);
	return 0;
}

/*
 * Sources (sxm) or destinations (dxm) in clients' own memory: entry i set
 * where srcs[i] or dsts[i] is an address there.  Not both: a pass with
 * sxm is a combine into its one destination, with dxm a fan-out of its
 * one source.  -1: out of memory, or both.
 */
int
pass_xmem(struct pass *p, struct xmem *const *sxm,
    struct xmem *const *dxm)
{
	if (p->nparts == 0 || (sxm == NULL && dxm == NULL))
		return 0;
	if ((sxm != NULL && (dxm != NULL || p->ndsts != 1)) ||
	    (dxm != NULL && p->nsrcs != 1))
		return -1;
	p->sxm = sxm;
	p->dxm = dxm;
	p->local = calloc((size_t)p->nparts * p->ndsts, sizeof(*p->local));
	p->bounce = malloc((size_t)p->nparts * XMEM_CHUNK_BYTES);
	return p->local == NULL || p->bounce == NULL ? -1 : 0;
}

void
pass_free(struct pass *p)
{
	free(p->pdsts);			/* and psrcs */
	free(p->local);
	free(p->bounce);
	p->pdsts = p->local = NULL;
	p->psrcs = NULL;
	p->bounce = NULL;
}

/* The first failed access of the pass is the one it reports. */
static void
pass_fail(struct pass *p, int err, struct xmem *xm, const void *addr,
    size_t len, int writing)
{
	int none = 0;

	if (__atomic_compare_exchange_n(&p->fault.err, &none, err, 0,
	    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		p->fault.xm = xm;
		p->fault.addr = (uint64_t)(uintptr_t)addr;
		p->fault.len = len;
		p->fault.writing = writing;
	}
}

static int
pass_failed(struct pass *p)
{
	return __atomic_load_n(&p->fault.err, __ATOMIC_ACQUIRE) != 0;
}

/* One chunk of a combine: d = s[0] op ... op s[nsrcs - 1]. */
static int
xmem_combine(struct pass *p, uint8_t *d, const void **s, size_t n,
    uint8_t *bounce)
{
	size_t bytes = n * dtype_size(p->dtype);

	for (uint32_t i = 0; i < p->nsrcs; i++) {
		struct xmem *xm = p->sxm != NULL ? p->sxm[i] : NULL;
		const void *in = s[i];
		uint8_t *to = i == 0 ? d : bounce;
		int err;

		if (xm != NULL) {
			if ((err = xmem_read(xm, to, (uint64_t)(uintptr_t)s[i],
			    bytes)) != 0) {
				pass_fail(p, err, xm, s[i], bytes, 0);
				return -1;
			}
			in = to;
		}
		if (i == 0) {
			if (in != d)
				memcpy(d, in, bytes);
		} else
			reduce_into(d, in, n, p->dtype, p->redop);
	}
	return 0;
}

/* One chunk of a fan-out of s: to the local destinations (divided on the
   way, s among them then), then to the others. */
static int
xmem_fan(struct pass *p, void **d, const void *s, size_t n, void **local)
{
	size_t bytes = n * dtype_size(p->dtype);
	uint32_t nlocal = 0;
	int err;

	for (uint32_t i = 0; i < p->ndsts; i++)
		if (p->dxm == NULL || p->dxm[i] == NULL)
			local[nlocal++] = d[i];
	if (p->avg_div > 1)
		reduce_fan(local, nlocal, &s, 1, n, p->dtype, p->redop,
		    p->avg_div);
	else
		for (uint32_t i = 0; i < nlocal; i++)
			if (local[i] != s)
				memcpy(local[i], s, bytes);
	for (uint32_t i = 0; p->dxm != NULL && i < p->ndsts; i++)
		if (p->dxm[i] != NULL && (err = xmem_write(p->dxm[i],
		    (uint64_t)(uintptr_t)d[i], s, bytes)) != 0) {
			pass_fail(p, err, p->dxm[i], d[i], bytes, 1);
			return -1;
		}
	return 0;
}

static void
xmem_part(struct pass *p, unsigned t, void **d, const void **s, size_t n)
{
	size_t es = dtype_size(p->dtype), chunk = XMEM_CHUNK_BYTES / es;
	uint8_t *bounce = p->bounce + (size_t)t * XMEM_CHUNK_BYTES;
	void **local = p->local + (size_t)t * p->ndsts;

	for (size_t done = 0; done < n && !pass_failed(p); ) {
		size_t c = n - done < chunk ? n - done : chunk;
		int rc;

		if (p->dxm != NULL)
			rc = xmem_fan(p, d, s[0], c, local);
		else
			rc = xmem_combine(p, d[0], s, c, bounce);
		if (rc == -1)
			return;
		done += c;
		for (uint32_t i = 0; i < p->ndsts; i++)
			d[i] = (uint8_t *)d[i] + c * es;
		for (uint32_t i = 0; i < p->nsrcs; i++)
			s[i] = (const uint8_t *)s[i] + c * es;
	}
}

void
pass_part(void *arg, unsigned t)
{
	struct pass *p = arg;
	size_t es = dtype_size(p->dtype), at = t * p->per,
	    n = t + 1 < p->nparts ? p->per : p->count - at;
	void **d = p->pdsts + (size_t)t * p->ndsts;
	const void **s = p->psrcs + (size_t)t * p->nsrcs;

	for (uint32_t i = 0; i < p->ndsts; i++)
		d[i] = (uint8_t *)p->dsts[i] + at * es;
	for (uint32_t i = 0; i < p->nsrcs; i++)
		s[i] = (const uint8_t *)p->srcs[i] + at * es;
	if (n == 0)
		return;
	if (p->bounce != NULL)
		xmem_part(p, t, d, s, n);
	else if (p->nsrcs == 1 && p->avg_div <= 1) {
		for (uint32_t i = 0; i < p->ndsts; i++)
			if (d[i] != s[0])
				memcpy(d[i], s[0], n * es);
	} else if (p->ndsts == 1 && p->avg_div <= 1)
		reduce_many(d[0], s, p->nsrcs, n, p->dtype, p->redop);
	else
		reduce_fan(d, p->ndsts, s, p->nsrcs, n, p->dtype, p->redop,
		    p->avg_div);
}

/* Every part, on the crew where there is one.  -1: an access failed
   (p->fault says which). */
int
pass_run(struct pass *p, struct crew *crew)
{
	if (p->nparts <= 1 || crew == NULL ||
	    crew_run(crew, p->nparts, pass_part, p) == -1)
		for (unsigned t = 0; t < p->nparts; t++)	/* here */
			pass_part(p, t);
	return pass_failed(p) ? -1 : 0;
}
