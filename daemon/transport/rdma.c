/*
 * rdma.c: the RDMA transport, through libibverbs: the only file that calls
 * it.  Each link is one reliable-connected queue pair.
 *
 * The stream in each direction moves by RDMA WRITE with immediate data
 * into a ring of NSLOTS slots of SLOT_BYTES in the receiver's memory: each
 * write fills one slot (its length in the immediate data) and the
 * receiver, once it has copied a slot out, returns it to the sender as a
 * credit (a zero-length write whose immediate data has CREDIT set and the
 * number of slots).  A sender never has more than NSLOTS slots unread, so
 * it never overwrites one; and the receiver keeps enough receives posted
 * for every write and credit that can be on the way (RQ_DEPTH).
 *
 * Data leaves straight from registered memory: the clients' segments and
 * the engine's buffers, registered once per device and kept in a cache
 * by key until forgotten (mem_add, mem_forget).  Anything else (frame
 * headers, memory that would not register) is copied into this link's
 * staging slot of the same index, or sent inline when small.  Writes
 * complete in order, so a send is done with its bytes when the write that
 * carried them completes.
 *
 * Completions are polled from the CQ in every call; before the engine
 * sleeps, arm() asks for an event on the completion channel and also
 * watches the link's TCP connection, whose hang-up tells a dead peer at
 * once.  A failed completion fails the link with the verbs' status in
 * words; both ends then fail their operations (PEER_FAILED).
 */
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <sodium.h>

#include "log.h"
#include "transport.h"

#define SLOT_BYTES	((uint32_t)64 << 10)
#define NSLOTS		16u
#define RING_BYTES	(SLOT_BYTES * NSLOTS)
#define SQ_DEPTH	(2 * NSLOTS + 8)	/* writes, credits, spare */
#define RQ_DEPTH	(2 * NSLOTS + 8)	/* the same, from the peer */
#define SEND_SGE	4
#define INLINE_WANT	128
#define CREDIT		0x80000000u		/* immediate data of a credit */
#define CREDIT_WRID	UINT64_MAX
#define PORTS_MAX	8
#define MRS_MAX		1024	/* registrations per device; past it,
				   data is staged (none is evicted: a
				   write may be on its way from it) */
#define DEVS_MAX	16

_Static_assert(SLOT_BYTES < CREDIT, "a slot's length is immediate data");

/* ---- devices and their registrations (any thread, under dev_mtx) ---- */

struct mr_ent {
	const void	*key;
	uint8_t		*base;
	size_t		 len;
	struct ibv_mr	*mr;		/* NULL: would not register */
};

struct rdma_dev {
	char		 name[LINK_DEV_MAX];	/* "mlx5_0:1" */
	struct ibv_context *ctx;
	struct ibv_pd	*pd;
	uint8_t		 port;
	uint16_t	 lid;
	enum ibv_mtu	 mtu;
	int		 gid_index;
	union ibv_gid	 gid;
	int		 refs;		/* links, and their halves */
	struct mr_ent	 mrs[MRS_MAX];
	size_t		 nmrs;
};

static pthread_mutex_t	 dev_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct rdma_dev	*devs[DEVS_MAX];
static int		 reg_warned;

static int
gid_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return memcmp(g, &zero, sizeof(zero)) == 0;
}

/* An IPv4-mapped GID: RoCE v2 over IPv4 on most configurations. */
static int
gid_v4(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
	    0xff };

	return memcmp(g->raw, pfx, sizeof(pfx)) == 0;
}

/* The port's GID to use: an IPv4-mapped one if any, else the first set. */
static int
port_gid(struct ibv_context *ctx, uint8_t port, int tbl_len,
    union ibv_gid *gid)
{
	union ibv_gid g;
	int first = -1;

	for (int i = 0; i < tbl_len; i++) {
		if (ibv_query_gid(ctx, port, i, &g) != 0 || gid_zero(&g))
			continue;
		if (gid_v4(&g)) {
			*gid = g;
			return i;
		}
		if (first == -1) {
			first = i;
			*gid = g;
		}
	}
	return first;
}

/* Port `want` of ctx (0: the first active one) into d; -1 with why. */
static int
dev_port(struct rdma_dev *d, uint8_t want, char *why, size_t len)
{
	struct ibv_port_attr pa;

	for (uint8_t p = want ? want : 1; p <= (want ? want : PORTS_MAX); p++) {
		if (ibv_query_port(d->ctx, p, &pa) != 0)
			break;
		if (pa.state != IBV_PORT_ACTIVE)
			continue;
		if ((d->gid_index = port_gid(d->ctx, p, pa.gid_tbl_len,
		    &d->gid)) == -1 && pa.link_layer ==
		    IBV_LINK_LAYER_ETHERNET)
			continue;	/* RoCE needs a GID */
		d->port = p;
		d->lid = pa.lid;
		d->mtu = pa.active_mtu;
		return 0;
	}
	snprintf(why, len, want ? "port %u is not active or has no address" :
	    "no active port with an address", want);
	return -1;
}

/* Open name ("" = any) at port (0 = any active); -1 with why. */
static struct rdma_dev *
dev_open(struct ibv_device *ibd, uint8_t port, char *why, size_t len)
{
	struct rdma_dev *d;

	if ((d = calloc(1, sizeof(*d))) == NULL) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	if ((d->ctx = ibv_open_device(ibd)) == NULL)
		snprintf(why, len, "cannot open %s: %s",
		    ibv_get_device_name(ibd), strerror(errno));
	else if (dev_port(d, port, why, len) == 0 &&
	    (d->pd = ibv_alloc_pd(d->ctx)) == NULL)
		snprintf(why, len, "%s: cannot allocate a protection domain",
		    ibv_get_device_name(ibd));
	if (d->pd == NULL) {
		if (d->ctx != NULL)
			ibv_close_device(d->ctx);
		free(d);
		return NULL;
	}
	snprintf(d->name, sizeof(d->name), "%s:%u", ibv_get_device_name(ibd),
	    d->port);
	return d;
}

/* "mlx5_0:2" into its name and port (0 when not given). */
static void
dev_spec(const char *spec, char *name, size_t len, uint8_t *port)
{
	const char *colon = strchr(spec, ':');
	size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);

	snprintf(name, len, "%.*s", (int)n, spec);
	*port = colon != NULL ? (uint8_t)atoi(colon + 1) : 0;
}

/* A device already open for spec, with a reference; dev_mtx held. */
static struct rdma_dev *
dev_cached(const char *name, uint8_t port)
{
	size_t n = strlen(name);

	for (int i = 0; i < DEVS_MAX; i++) {
		struct rdma_dev *d = devs[i];

		if (d != NULL && (n == 0 || (strncmp(d->name, name, n) == 0 &&
		    d->name[n] == ':')) && (port == 0 || port == d->port)) {
			d->refs++;
			return d;
		}
	}
	return NULL;
}

/* The device spec names ("" = the first that works), opened once. */
static struct rdma_dev *
dev_get(const char *spec, char *why, size_t len)
{
	struct ibv_device **list;
	struct rdma_dev *d;
	char name[LINK_DEV_MAX];
	uint8_t port;
	int n, slot;

	dev_spec(spec, name, sizeof(name), &port);
	pthread_mutex_lock(&dev_mtx);
	if ((d = dev_cached(name, port)) != NULL)
		goto out;
	for (slot = 0; slot < DEVS_MAX && devs[slot] != NULL; slot++)
		;
	if (slot == DEVS_MAX) {
		snprintf(why, len, "%d devices open already", DEVS_MAX);
		goto out;
	}
	if ((list = ibv_get_device_list(&n)) == NULL || n == 0) {
		snprintf(why, len, "no RDMA device on this node");
		if (list != NULL)
			ibv_free_device_list(list);
		goto out;
	}
	snprintf(why, len, "no RDMA device \"%s\" on this node", name);
	for (int i = 0; i < n && d == NULL; i++)
		if (name[0] == '\0' ||
		    strcmp(ibv_get_device_name(list[i]), name) == 0)
			d = dev_open(list[i], port, why, len);
	ibv_free_device_list(list);
	if (d != NULL) {
		d->refs = 1;
		devs[slot] = d;
	}
out:
	pthread_mutex_unlock(&dev_mtx);
	return d;
}

static void
dev_put(struct rdma_dev *d)
{
	int last;

	pthread_mutex_lock(&dev_mtx);
	if ((last = --d->refs == 0))
		for (int i = 0; i < DEVS_MAX; i++)
			if (devs[i] == d)
				devs[i] = NULL;
	pthread_mutex_unlock(&dev_mtx);
	if (!last)
		return;
	for (size_t i = 0; i < d->nmrs; i++)
		if (d->mrs[i].mr != NULL)
			ibv_dereg_mr(d->mrs[i].mr);
	ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
	free(d);
}

static void
mr_drop(struct rdma_dev *d, size_t i)
{
	if (d->mrs[i].mr != NULL)
		ibv_dereg_mr(d->mrs[i].mr);
	d->mrs[i] = d->mrs[--d->nmrs];
}

/* Register [base, base + len) under key on d; dev_mtx held. */
static void
mr_add(struct rdma_dev *d, const void *key, void *base, size_t len)
{
	struct ibv_mr *mr;
	size_t i;

	for (i = 0; i < d->nmrs && d->mrs[i].key != key; i++)
		;
	if (i < d->nmrs && d->mrs[i].base == base && d->mrs[i].len == len)
		return;
	if (i < d->nmrs)
		mr_drop(d, i);		/* the key's memory moved */
	if (d->nmrs == MRS_MAX) {
		errno = ENOSPC;
		mr = NULL;
	} else {
		mr = ibv_reg_mr(d->pd, base, len, IBV_ACCESS_LOCAL_WRITE);
		d->mrs[d->nmrs++] = (struct mr_ent){ key, base, len, mr };
	}
	if (mr == NULL && !reg_warned) {
		reg_warned = 1;
		log_warnx("rdma: cannot register %zu bytes on %s (%s): data "
		    "from there is copied through staging slots instead", len,
		    d->name, d->nmrs == MRS_MAX ? "too many registrations" :
		    strerror(errno));
	}
}

static void
rdma_mem_add(const void *key, void *base, size_t len)
{
	pthread_mutex_lock(&dev_mtx);
	for (int i = 0; i < DEVS_MAX; i++)
		if (devs[i] != NULL)
			mr_add(devs[i], key, base, len);
	pthread_mutex_unlock(&dev_mtx);
}

static void
rdma_mem_forget(const void *key)
{
	pthread_mutex_lock(&dev_mtx);
	for (int i = 0; i < DEVS_MAX; i++)
		for (size_t k = 0; devs[i] != NULL && k < devs[i]->nmrs; k++)
			if (devs[i]->mrs[k].key == key)
				mr_drop(devs[i], k--);
	pthread_mutex_unlock(&dev_mtx);
}

/* The local key that covers [p, p + len), or 0 with *ok unset. */
static uint32_t
mr_lkey(struct rdma_dev *d, const uint8_t *p, size_t len, int *ok)
{
	uint32_t lkey = 0;

	*ok = 0;
	pthread_mutex_lock(&dev_mtx);
	for (size_t i = 0; i < d->nmrs; i++) {
		const struct mr_ent *e = &d->mrs[i];

		if (e->mr != NULL && p >= e->base && len <= e->len &&
		    (size_t)(p - e->base) <= e->len - len) {
			lkey = e->mr->lkey;
			*ok = 1;
			break;
		}
	}
	pthread_mutex_unlock(&dev_mtx);
	return lkey;
}

/* ---- a link ---- */

struct rdma_link {
	struct link	 l;		/* first: the transport's link */
	struct rdma_dev	*dev;
	struct ibv_comp_channel *ch;
	struct ibv_cq	*cq;
	struct ibv_qp	*qp;
	uint8_t		*ring;		/* the peer writes here */
	uint8_t		*stage;		/* we write from here */
	struct ibv_mr	*ring_mr, *stage_mr;
	uint32_t	 max_inline;
	uint32_t	 psn;
	uint64_t	 raddr;		/* the peer's ring */
	uint32_t	 rkey;
	/* sending */
	uint64_t	 slots_sent;	/* writes posted; slot = n % NSLOTS */
	uint64_t	 slots_freed;	/* credited back */
	uint64_t	 tx_posted;	/* stream bytes in posted writes */
	uint64_t	 tx_done;	/* in completed ones */
	uint64_t	 tx_told;	/* counted to the caller */
	uint32_t	 sq_out;	/* requests not completed */
	int		 tx_stalled;	/* the caller's bytes wait for room */
	/* receiving */
	uint64_t	 slots_in;	/* writes arrived */
	uint64_t	 slots_read;	/* copied out */
	uint64_t	 slots_credited;
	uint32_t	 slot_len[NSLOTS];
	uint32_t	 slot_off;	/* of slot slots_read */
	int		 failed;	/* errno for every call from then on */
};

static int
link_failed(struct rdma_link *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
link_failed(struct rdma_link *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->failed) {
		va_start(ap, fmt);
		vsnprintf(r->l.why, sizeof(r->l.why), fmt, ap);
		va_end(ap);
		r->failed = EIO;
	}
	errno = r->failed;
	return -1;
}

static void
link_free(struct rdma_link *r)
{
	struct ibv_cq *cq;
	void *ctx;

	if (r->qp != NULL)
		ibv_destroy_qp(r->qp);
	if (r->cq != NULL) {
		/* Events read and not acknowledged would block the destroy. */
		while (ibv_get_cq_event(r->ch, &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
		ibv_destroy_cq(r->cq);
	}
	if (r->ch != NULL)
		ibv_destroy_comp_channel(r->ch);
	if (r->ring_mr != NULL)
		ibv_dereg_mr(r->ring_mr);
	if (r->stage_mr != NULL)
		ibv_dereg_mr(r->stage_mr);
	free(r->ring);
	free(r->stage);
	if (r->l.fd != -1)
		close(r->l.fd);
	if (r->dev != NULL)
		dev_put(r->dev);
	free(r);
}

static int
post_recvs(struct rdma_link *r, int n)
{
	struct ibv_recv_wr wr[RQ_DEPTH], *bad;

	for (int i = 0; i < n; i++)
		wr[i] = (struct ibv_recv_wr){ .wr_id = 0, .next = i + 1 < n ?
		    &wr[i + 1] : NULL, .sg_list = NULL, .num_sge = 0 };
	return n == 0 ? 0 : ibv_post_recv(r->qp, wr, &bad);
}

static int
qp_init(struct rdma_link *r, char *why, size_t len)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = RQ_DEPTH,
		    .max_send_sge = SEND_SGE, .max_recv_sge = 1,
		    .max_inline_data = INLINE_WANT },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0,
	    .port_num = r->dev->port,
	    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	if ((r->qp = ibv_create_qp(r->dev->pd, &qa)) == NULL) {
		qa.cap.max_inline_data = 0;	/* a device without inline */
		r->qp = ibv_create_qp(r->dev->pd, &qa);
	}
	if (r->qp == NULL) {
		snprintf(why, len, "cannot create a queue pair on %s: %s",
		    r->dev->name, strerror(errno));
		return -1;
	}
	r->max_inline = qa.cap.max_inline_data;
	if ((errno = ibv_modify_qp(r->qp, &a, IBV_QP_STATE |
	    IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) != 0 ||
	    (errno = post_recvs(r, RQ_DEPTH)) != 0) {
		snprintf(why, len, "cannot ready a queue pair on %s: %s",
		    r->dev->name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Registered, page-aligned memory of RING_BYTES; -1 with why. */
static int
ring_alloc(struct rdma_link *r, uint8_t **p, struct ibv_mr **mr, int access,
    char *why, size_t len)
{
	if (posix_memalign((void **)p, 4096, RING_BYTES) != 0) {
		*p = NULL;
		snprintf(why, len, "out of memory");
		return -1;
	}
	if ((*mr = ibv_reg_mr(r->dev->pd, *p, RING_BYTES, access)) == NULL) {
		snprintf(why, len, "cannot register %u bytes on %s: %s",
		    RING_BYTES, r->dev->name, strerror(errno));
		return -1;
	}
	return 0;
}

static void *
rdma_offer(const struct link_want *w, struct peer_data_link *m, char *why,
    size_t len)
{
	struct rdma_link *r;
	int fl;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	r->l.tp = &rdma_transport;
	r->l.fd = -1;
	if ((r->dev = dev_get(w->rdma_dev, why, len)) == NULL ||
	    ring_alloc(r, &r->ring, &r->ring_mr, IBV_ACCESS_LOCAL_WRITE |
	    IBV_ACCESS_REMOTE_WRITE, why, len) == -1 ||
	    ring_alloc(r, &r->stage, &r->stage_mr, IBV_ACCESS_LOCAL_WRITE,
	    why, len) == -1)
		goto fail;
	if ((r->ch = ibv_create_comp_channel(r->dev->ctx)) == NULL ||
	    (fl = fcntl(r->ch->fd, F_GETFL)) == -1 ||
	    fcntl(r->ch->fd, F_SETFL, fl | O_NONBLOCK) == -1 ||
	    (r->cq = ibv_create_cq(r->dev->ctx, SQ_DEPTH + RQ_DEPTH, r, r->ch,
	    0)) == NULL) {
		snprintf(why, len, "cannot create a completion queue on %s: "
		    "%s", r->dev->name, strerror(errno));
		goto fail;
	}
	if (qp_init(r, why, len) == -1)
		goto fail;
	r->psn = randombytes_uniform(1U << 24);
	memset(m, 0, sizeof(*m));
	m->transport = PEER_LINK_RDMA;
	m->qpn = r->qp->qp_num;
	m->psn = r->psn;
	m->lid = r->dev->lid;
	m->mtu = (uint32_t)r->dev->mtu;
	memcpy(m->gid, r->dev->gid.raw, sizeof(m->gid));
	m->ring_addr = (uint64_t)(uintptr_t)r->ring;
	m->ring_rkey = r->ring_mr->rkey;
	m->ring_bytes = RING_BYTES;
	wire_strlcpy(r->l.device, r->dev->name, sizeof(r->l.device));
	return r;
fail:
	link_free(r);
	return NULL;
}

static int
qp_connect(struct rdma_link *r, const struct peer_data_link *p, char *why,
    size_t len)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = (enum ibv_mtu)(p->mtu < (uint32_t)r->dev->mtu ?
		    p->mtu : (uint32_t)r->dev->mtu),
		.dest_qp_num = p->qpn, .rq_psn = p->psn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .dlid = (uint16_t)p->lid, .port_num = r->dev->port,
		    .is_global = !gid_zero((const union ibv_gid *)p->gid),
		    .grh = { .sgid_index = (uint8_t)(r->dev->gid_index < 0 ?
		    0 : r->dev->gid_index), .hop_limit = 64 } },
	};

	memcpy(a.ah_attr.grh.dgid.raw, p->gid, sizeof(p->gid));
	if ((errno = ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_AV |
	    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) != 0) {
		snprintf(why, len, "queue pair to RTR on %s: %s", r->dev->name,
		    strerror(errno));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;			/* 4.096 us * 2^14: 67 ms */
	a.retry_cnt = 7;
	a.rnr_retry = 7;		/* for ever: credits make it rare */
	a.sq_psn = r->psn;
	a.max_rd_atomic = 1;
	if ((errno = ibv_modify_qp(r->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
	    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
	    IBV_QP_MAX_QP_RD_ATOMIC)) != 0) {
		snprintf(why, len, "queue pair to RTS on %s: %s", r->dev->name,
		    strerror(errno));
		return -1;
	}
	return 0;
}

static struct link *
rdma_join(void *half, int fd, const struct peer_data_link *p, char *why,
    size_t len)
{
	struct rdma_link *r = half;

	r->l.fd = fd;
	if (p->ring_bytes != RING_BYTES || p->qpn >= (1U << 24) ||
	    p->psn >= (1U << 24) || p->mtu < IBV_MTU_256 ||
	    p->mtu > IBV_MTU_4096) {
		snprintf(why, len, "the peer's set-up is not ours (ring of %u "
		    "bytes, queue pair %u, mtu %u)", p->ring_bytes, p->qpn,
		    p->mtu);
		link_free(r);
		return NULL;
	}
	r->raddr = p->ring_addr;
	r->rkey = p->ring_rkey;
	if (qp_connect(r, p, why, len) == -1) {
		link_free(r);
		return NULL;
	}
	return &r->l;
}

static void
rdma_drop(void *half)
{
	link_free(half);
}

static void
rdma_close(struct link *l)
{
	link_free((struct rdma_link *)l);
}

/* ---- completions ---- */

static const char *
opname(enum ibv_wc_opcode op)
{
	return op == IBV_WC_RDMA_WRITE ? "write" : op & IBV_WC_RECV ?
	    "receive" : "request";
}

/* A credit: the peer read `n` more slots. */
static int
took_credit(struct rdma_link *r, uint32_t n)
{
	if (n > r->slots_sent - r->slots_freed)
		return link_failed(r, "node %s returned %u slots, %llu were "
		    "out", r->l.peer, n, (unsigned long
		    long)(r->slots_sent - r->slots_freed));
	r->slots_freed += n;
	return 0;
}

static int
took_write(struct rdma_link *r, uint32_t imm, uint32_t bytes)
{
	if (imm != bytes || bytes == 0 || bytes > SLOT_BYTES ||
	    r->slots_in - r->slots_read >= NSLOTS)
		return link_failed(r, "node %s wrote %u bytes past its "
		    "credits (slot length %u)", r->l.peer,
		    bytes, imm);
	r->slot_len[r->slots_in++ % NSLOTS] = bytes;
	return 0;
}

static int
completion(struct rdma_link *r, const struct ibv_wc *wc, int *reposts)
{
	uint32_t imm;

	if (wc->status != IBV_WC_SUCCESS)
		return link_failed(r, "%s on %s: %s (verbs status %d)",
		    opname(wc->opcode), r->dev->name,
		    ibv_wc_status_str(wc->status), (int)wc->status);
	if (!(wc->opcode & IBV_WC_RECV)) {
		r->sq_out--;
		if (wc->wr_id != CREDIT_WRID && wc->wr_id > r->tx_done)
			r->tx_done = wc->wr_id;
		return 0;
	}
	(*reposts)++;
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags &
	    IBV_WC_WITH_IMM))
		return link_failed(r, "node %s sent an unexpected request "
		    "(opcode %d)", r->l.peer, wc->opcode);
	imm = ntohl(wc->imm_data);
	return imm & CREDIT ? took_credit(r, imm & ~CREDIT) :
	    took_write(r, imm, wc->byte_len);
}

/* Return the slots read since the last credit, if worth a request. */
static int
give_credit(struct rdma_link *r)
{
	uint64_t n = r->slots_read - r->slots_credited;
	struct ibv_send_wr wr, *bad;

	if (n == 0 || (n < NSLOTS / 4 && r->slots_read < r->slots_in) ||
	    r->sq_out >= SQ_DEPTH)
		return 0;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = CREDIT_WRID;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(CREDIT | (uint32_t)n);
	wr.wr.rdma.remote_addr = r->raddr;
	wr.wr.rdma.rkey = r->rkey;
	if ((errno = ibv_post_send(r->qp, &wr, &bad)) != 0)
		return link_failed(r, "posting a credit on %s: %s",
		    r->dev->name, strerror(errno));
	r->sq_out++;
	r->slots_credited = r->slots_read;
	return 0;
}

/* Take every completion there is; -1 once the link failed. */
static int
progress(struct rdma_link *r)
{
	struct ibv_wc wc[16];
	int n, reposts = 0;

	if (r->failed) {
		errno = r->failed;
		return -1;
	}
	do {
		if ((n = ibv_poll_cq(r->cq, 16, wc)) < 0)
			return link_failed(r, "polling the completion queue on "
			    "%s failed", r->dev->name);
		for (int i = 0; i < n; i++)
			if (completion(r, &wc[i], &reposts) == -1)
				return -1;
	} while (n == 16);
	if ((errno = post_recvs(r, reposts)) != 0)
		return link_failed(r, "posting receives on %s: %s",
		    r->dev->name, strerror(errno));
	return give_credit(r);
}

/* ---- sending ---- */

/* Where the next piece of the caller's bytes starts. */
struct cursor {
	const struct iovec *iov;
	int		 n, i;
	size_t		 off;
};

static size_t
cur_left(const struct cursor *c)
{
	return c->i < c->n ? c->iov[c->i].iov_len - c->off : 0;
}

static void
cur_skip(struct cursor *c, uint64_t bytes)
{
	while (c->i < c->n && bytes > 0) {
		size_t k = cur_left(c) < bytes ? cur_left(c) : (size_t)bytes;

		bytes -= k;
		if ((c->off += k) == c->iov[c->i].iov_len) {
			c->i++;
			c->off = 0;
		}
	}
	while (c->i < c->n && cur_left(c) == 0) {
		c->i++;
		c->off = 0;
	}
}

/* The bytes of the next write: up to a slot, in up to SEND_SGE pieces. */
static uint64_t
peek_bytes(const struct cursor *c)
{
	uint64_t total = 0;
	int pieces = 0;

	for (int i = c->i; i < c->n && total < SLOT_BYTES &&
	    pieces < SEND_SGE; i++) {
		size_t len = c->iov[i].iov_len - (i == c->i ? c->off : 0);

		total += len;
		pieces += len > 0;
	}
	return total < SLOT_BYTES ? total : SLOT_BYTES;
}

/*
 * Gather the next write from the cursor into sge: registered pieces as
 * they are, the rest copied into the slot's staging space; all of it
 * inline when small.  Returns its bytes.
 */
static uint32_t
gather(struct rdma_link *r, struct cursor *c, uint8_t *stage,
    struct ibv_sge *sge, int *nsge, int *inl)
{
	uint32_t total = 0, staged = 0, lkey = r->stage_mr->lkey;

	*nsge = 0;
	*inl = peek_bytes(c) <= r->max_inline;
	while (cur_left(c) > 0 && total < SLOT_BYTES && *nsge < SEND_SGE) {
		const uint8_t *p = (const uint8_t *)c->iov[c->i].iov_base +
		    c->off;
		uint32_t k = (uint32_t)(cur_left(c) < SLOT_BYTES - total ?
		    cur_left(c) : SLOT_BYTES - total);
		int ok = 0;
		uint32_t key = *inl ? 0 : mr_lkey(r->dev, p, k, &ok);

		if (*inl || ok)
			sge[(*nsge)++] = (struct ibv_sge){ (uintptr_t)p, k, key };
		else if (*nsge > 0 && sge[*nsge - 1].lkey == lkey &&
		    sge[*nsge - 1].addr + sge[*nsge - 1].length ==
		    (uintptr_t)(stage + staged)) {
			memcpy(stage + staged, p, k);	/* joins the last */
			sge[*nsge - 1].length += k;
			staged += k;
		} else {
			memcpy(stage + staged, p, k);
			sge[(*nsge)++] = (struct ibv_sge){ (uintptr_t)(stage +
			    staged), k, lkey };
			staged += k;
		}
		total += k;
		cur_skip(c, k);
	}
	return total;
}

/* Post one write of the cursor's next bytes into the peer's next slot. */
static int
post_write(struct rdma_link *r, struct cursor *c)
{
	uint32_t slot = (uint32_t)(r->slots_sent % NSLOTS);
	struct ibv_sge sge[SEND_SGE];
	struct ibv_send_wr wr, *bad;
	uint32_t bytes;
	int nsge, inl;

	bytes = gather(r, c, r->stage + (size_t)slot * SLOT_BYTES, sge, &nsge,
	    &inl);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = r->tx_posted + bytes;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	wr.imm_data = htonl(bytes);
	wr.wr.rdma.remote_addr = r->raddr + (uint64_t)slot * SLOT_BYTES;
	wr.wr.rdma.rkey = r->rkey;
	if ((errno = ibv_post_send(r->qp, &wr, &bad)) != 0)
		return link_failed(r, "posting a write on %s: %s",
		    r->dev->name, strerror(errno));
	r->slots_sent++;
	r->sq_out++;
	r->tx_posted += bytes;
	return 0;
}

/* Room for another write: a credit for the peer's slot, and in the SQ. */
static int
tx_room(const struct rdma_link *r)
{
	return r->slots_sent - r->slots_freed < NSLOTS &&
	    r->sq_out < SQ_DEPTH - NSLOTS;
}

static ssize_t
rdma_send(struct link *l, const struct iovec *iov, int n)
{
	struct rdma_link *r = (struct rdma_link *)l;
	struct cursor c = { iov, n, 0, 0 };
	uint64_t done;

	/* Writes that completed before a failure did arrive: counted first. */
	if (progress(r) == -1 && r->tx_done == r->tx_told)
		return -1;
	cur_skip(&c, r->tx_posted - r->tx_told);	/* on the way already */
	while (!r->failed && cur_left(&c) > 0 && tx_room(r))
		if (post_write(r, &c) == -1 && r->tx_done == r->tx_told)
			return -1;
	r->tx_stalled = !r->failed && cur_left(&c) > 0;
	if ((done = r->tx_done - r->tx_told) == 0) {
		errno = EAGAIN;
		return -1;
	}
	r->tx_told = r->tx_done;
	return (ssize_t)done;
}

/* ---- receiving ---- */

static ssize_t
rdma_recv(struct link *l, const struct iovec *iov, int n)
{
	struct rdma_link *r = (struct rdma_link *)l;
	size_t got = 0;

	/* What arrived before a failure is still the peer's: taken first. */
	if (progress(r) == -1 && r->slots_read == r->slots_in)
		return -1;
	for (int i = 0; i < n; i++) {
		size_t off = 0;

		while (off < iov[i].iov_len && r->slots_read < r->slots_in) {
			uint32_t s = (uint32_t)(r->slots_read % NSLOTS);
			size_t k = r->slot_len[s] - r->slot_off;

			if (k > iov[i].iov_len - off)
				k = iov[i].iov_len - off;
			memcpy((uint8_t *)iov[i].iov_base + off, r->ring +
			    (size_t)s * SLOT_BYTES + r->slot_off, k);
			off += k;
			if ((r->slot_off += (uint32_t)k) == r->slot_len[s]) {
				r->slots_read++;
				r->slot_off = 0;
			}
		}
		got += off;
		if (off < iov[i].iov_len)
			break;
	}
	if (!r->failed && give_credit(r) == -1 && got == 0)
		return -1;
	if (got == 0) {
		errno = EAGAIN;
		return -1;
	}
	return (ssize_t)got;
}

/* ---- sleeping ---- */

/*
 * Whether a call would move now.  A sender that stalled for room can move
 * once a credit came: arm() may be the one that took it from the CQ, and
 * then no event is left on the channel to wake the caller.
 */
static int
can_move(const struct rdma_link *r, short want)
{
	return ((want & POLLIN) && r->slots_read < r->slots_in) ||
	    ((want & POLLOUT) && (r->tx_done > r->tx_told ||
	    (r->tx_stalled && tx_room(r))));
}

static int
rdma_arm(struct link *l, short want, struct pollfd *pfd)
{
	struct rdma_link *r = (struct rdma_link *)l;
	struct ibv_cq *cq;
	void *ctx;
	int events;

	if (progress(r) == -1 || can_move(r, want))
		return 0;
	pfd[0] = (struct pollfd){ l->fd, POLLRDHUP, 0 };
	if (!(want & (POLLIN | POLLOUT)))
		return 1;
	/*
	 * An event since the CQ was last armed: the progress() above may have
	 * taken what it announced for the other direction, which the engine
	 * armed separately and sleeps on too: look again rather than sleep.
	 */
	for (events = 0; ibv_get_cq_event(r->ch, &cq, &ctx) == 0; events++)
		ibv_ack_cq_events(cq, 1);
	if (events > 0)
		return 0;
	if (ibv_req_notify_cq(r->cq, 0) != 0) {
		link_failed(r, "arming the completion queue on %s",
		    r->dev->name);
		return 0;		/* the next call says it */
	}
	/* What came in before the request would wake nobody. */
	if (progress(r) == -1 || can_move(r, want))
		return 0;
	pfd[1] = (struct pollfd){ r->ch->fd, POLLIN, 0 };
	return 2;
}

const struct transport rdma_transport = {
	.name = "rdma",
	.wire = PEER_LINK_RDMA,
	.offer = rdma_offer,
	.join = rdma_join,
	.drop = rdma_drop,
	.send = rdma_send,
	.recv = rdma_recv,
	.arm = rdma_arm,
	.close = rdma_close,
	.mem_add = rdma_mem_add,
	.mem_forget = rdma_mem_forget,
};
