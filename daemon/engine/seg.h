/*
 * seg.h: clients' memory as the daemon reaches it: the shared-memory
 * segments each connection registers (seg.c, any thread, under one lock)
 * and a client's own memory through the kernel (xmem.c).  The control
 * plane adds and removes segments; the engine resolves an op's buffers.
 */
#ifndef MCCL_SEG_H
#define MCCL_SEG_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

struct seg {
	TAILQ_ENTRY(seg) entry;
	uint32_t	 id;
	uint8_t		*base;
	uint64_t	 size;
	int		 refs;		/* its table's, plus one per op using
					   it, plus a doorbell's */
};
TAILQ_HEAD(seg_list, seg);

/* xmem.c: a client's own memory, where the kernel lets the daemon in */
struct xmem {
	pid_t		 pid;		/* 0: closed */
	int		 pidfd;
	uint32_t	 inflight;	/* calls into the kernel now (atomic) */
	uint64_t	 moved_ns;	/* the last one's start or end (atomic) */
	int		 refused;	/* no more calls (atomic): xmem_refuse */
};

int		xmem_open(struct xmem *, pid_t, uid_t, uint64_t, uint64_t,
		    char *, size_t);
void		xmem_close(struct xmem *);
int		xmem_read(struct xmem *, void *, uint64_t, size_t);
uint64_t	xmem_stuck_ns(struct xmem *);
void		xmem_refuse(struct xmem *);
int		xmem_write(struct xmem *, uint64_t, const void *, size_t);

struct segtab {				/* one connection's segments */
	struct seg_list	 segs;
	struct xmem	 xm;		/* and its own memory: set at HELLO,
					   before any job reads the table */
	uint32_t	 nsegs;		/* main thread */
	uint64_t	 bytes;		/* main thread */
	int		 refs;		/* the connection's, its engine's */
};

struct segtab	*segtab_new(void);
void		segtab_ref(struct segtab *);
void		segtab_unref(struct segtab *);
void		segtab_clear(struct segtab *);
struct seg	*segtab_find(struct segtab *, uint32_t);
int		segtab_add(struct segtab *, uint32_t, uint8_t *, uint64_t);
void		segtab_del(struct segtab *, uint32_t);
void		seg_ref(struct seg *);
void		seg_unref(struct seg *);
struct seg	*seg_resolve(struct segtab *, uint32_t, uint64_t, uint64_t,
		    uint8_t **, char *, size_t);
void		bell_ring(struct seg *, uint64_t);

#endif
