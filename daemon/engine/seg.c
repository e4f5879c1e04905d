/*
 * seg.c: clients' shared-memory segments.  A connection's segments are in
 * its table; the main thread adds and removes them, and a job's engine
 * thread resolves the buffers of the descriptors it takes from the
 * connection's submission ring (subq.c) in the same table.  One lock
 * guards every table and every segment's reference count; it is held for a
 * lookup or a count, never across anything that waits.
 */
#include <sys/mman.h>
#include <sys/syscall.h>

#include <linux/futex.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "transport/transport.h"

static pthread_mutex_t seg_mtx = PTHREAD_MUTEX_INITIALIZER;

struct segtab *
segtab_new(void)
{
	struct segtab *t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	TAILQ_INIT(&t->segs);
	t->xm.pidfd = -1;
	t->refs = 1;
	return t;
}

void
segtab_ref(struct segtab *t)
{
	pthread_mutex_lock(&seg_mtx);
	t->refs++;
	pthread_mutex_unlock(&seg_mtx);
}

/* Drop every segment of t: lookups fail from now on. */
void
segtab_clear(struct segtab *t)
{
	struct seg *s;

	while ((s = TAILQ_FIRST(&t->segs)) != NULL)
		segtab_del(t, s->id);
}

void
segtab_unref(struct segtab *t)
{
	int last;

	pthread_mutex_lock(&seg_mtx);
	last = --t->refs == 0;
	pthread_mutex_unlock(&seg_mtx);
	if (!last)
		return;
	segtab_clear(t);
	xmem_close(&t->xm);
	free(t);
}

/* Main thread: the segment id of t, or NULL. */
struct seg *
segtab_find(struct segtab *t, uint32_t id)
{
	struct seg *s;

	TAILQ_FOREACH(s, &t->segs, entry)
		if (s->id == id)
			return s;
	return NULL;
}

/* Main thread: a mapping becomes segment id; its reference is the table's. */
int
segtab_add(struct segtab *t, uint32_t id, uint8_t *base, uint64_t size)
{
	struct seg *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -1;
	s->id = id;
	s->base = base;
	s->size = size;
	s->refs = 1;
	pthread_mutex_lock(&seg_mtx);
	TAILQ_INSERT_TAIL(&t->segs, s, entry);
	pthread_mutex_unlock(&seg_mtx);
	t->nsegs++;
	t->bytes += size;
	return 0;
}

/* Main thread: segment id leaves t; ops that use it keep it mapped. */
void
segtab_del(struct segtab *t, uint32_t id)
{
	struct seg *s;

	if ((s = segtab_find(t, id)) == NULL)
		return;
	pthread_mutex_lock(&seg_mtx);
	TAILQ_REMOVE(&t->segs, s, entry);
	pthread_mutex_unlock(&seg_mtx);
	t->nsegs--;
	t->bytes -= s->size;
	seg_unref(s);
}

void
seg_ref(struct seg *s)
{
	pthread_mutex_lock(&seg_mtx);
	s->refs++;
	pthread_mutex_unlock(&seg_mtx);
}

void
seg_unref(struct seg *s)
{
	int last;

	pthread_mutex_lock(&seg_mtx);
	last = --s->refs == 0;
	pthread_mutex_unlock(&seg_mtx);
	if (!last)
		return;
	link_mem_forget(s);		/* before its pages go */
	munmap(s->base, s->size);
	free(s);
}

/*
 * Any thread: resolve a buffer [off, off + len) of segment id in t, as an
 * operation names it: a reference on the segment and the mapped address.
 * Segment 0 with length 0 is "no buffer" (NULL, and *ptr NULL).
 */
struct seg *
seg_resolve(struct segtab *t, uint32_t id, uint64_t off, uint64_t len,
    uint8_t **ptr, char *err, size_t errlen)
{
	struct seg *s;

	*ptr = NULL;
	if (id == 0 && len == 0)
		return NULL;
	pthread_mutex_lock(&seg_mtx);
	TAILQ_FOREACH(s, &t->segs, entry)
		if (s->id == id)
			break;
	if (s == NULL)
		snprintf(err, errlen, "segment %u is not registered", id);
	else if (off > s->size || len > s->size - off) {
		snprintf(err, errlen, "buffer [%llu, +%llu) lies outside "
		    "segment %u of %llu bytes", (unsigned long long)off,
		    (unsigned long long)len, id, (unsigned long long)s->size);
		s = NULL;
	} else {
		s->refs++;
		*ptr = s->base + off;
	}
	pthread_mutex_unlock(&seg_mtx);
	return s;
}

/*
 * Any thread: tell the client of a doorbell that something happened; with
 * done_seq > 0, that its collectives up to done_seq ended well.  The
 * caller holds a reference on bell, so the page stays mapped.
 */
void
bell_ring(struct seg *bell, uint64_t done_seq)
{
	struct ipc_doorbell *b = (struct ipc_doorbell *)(void *)bell->base;

	if (done_seq > 0)
		__atomic_store_n(&b->done_seq, done_seq, __ATOMIC_RELEASE);
	__atomic_add_fetch(&b->word, 1, __ATOMIC_SEQ_CST);
	/* Ordered after the bump: a sleeper that raced us sees a new word. */
	if (__atomic_load_n(&b->sleepers, __ATOMIC_SEQ_CST) != 0)
		syscall(SYS_futex, &b->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
