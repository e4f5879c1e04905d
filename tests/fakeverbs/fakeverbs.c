/*
 * fakeverbs.c: the libibverbs calls an RDMA transport uses, carried between
 * processes on one machine through Unix sockets, so that the tests run on
 * machines with no RDMA device and no Soft-RoCE.  Built only for tests;
 * programs link it instead of -libverbs.
 *
 * What it keeps of the real thing:
 * - devices: MCCL_FAKEVERBS_DEVICES names them ("fake0" when unset), one
 *   port each; without MCCL_FAKEVERBS_DIR (the directory of the queue
 *   pairs' sockets) there are none, as on a machine without RDMA.  Each
 *   opened context has a GID of its own (its process and a counter).
 * - memory registration, up to MCCL_FAKEVERBS_MEMLOCK bytes per context
 *   when set: past it ibv_reg_mr fails with ENOMEM, as past the lock limit.
 * - reliable connected queue pairs, RESET -> INIT -> RTR -> RTS, addressed
 *   by the peer's GID (ah_attr.grh.dgid) and QP number; delivery in order.
 * - RDMA WRITE, with immediate data or not, into a registered region by
 *   address and rkey, checked against the region's bounds and
 *   IBV_ACCESS_REMOTE_WRITE: a bad one completes with
 *   IBV_WC_REM_ACCESS_ERR at the sender, and both queue pairs go to the
 *   error state (where a request posted completes with
 *   IBV_WC_WR_FLUSH_ERR); SEND into posted receives; local keys checked
 *   (IBV_WC_LOC_PROT_ERR) unless the send is inline.
 * - completion queues with completion channels (ibv_req_notify_cq arms,
 *   ibv_get_cq_event reads); a receive of a write with immediate data
 *   completes as IBV_WC_RECV_RDMA_WITH_IMM.
 * - a peer that dies (its sockets close) puts a queue pair with a send
 *   awaiting its answer in the error state: that send completes with
 *   IBV_WC_RETRY_EXC_ERR, the rest and every posted receive with
 *   IBV_WC_WR_FLUSH_ERR.  One with none learns nothing, as a reliable
 *   connection does on a device: its receives stay posted, and its next
 *   send finds the peer gone.
 *
 * Each context runs one progress thread: it accepts the peers' links,
 * carries their requests out (and answers each with an ACK or a NAK), and
 * completes our requests when their answers come.  Requests leave from the
 * thread that posts them, in fragments of FV_FRAG bytes, or from the
 * progress thread when the peer has not read the ones before: posting
 * never blocks, even on a peer that is stopped.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#undef ibv_query_port
#undef ibv_reg_mr

#define FV_FRAG		(64 * 1024)	/* payload bytes per message */
#define FV_DEVICES_MAX	8
#define FV_CONNECT_MS	2000		/* the peer's QP must be listening */

enum fv_kind { FV_HELLO = 1, FV_WRITE, FV_SEND, FV_ACK, FV_NAK };

#define FV_LAST		1u	/* the last fragment of a work request */
#define FV_IMM		2u	/* it carries immediate data */

struct fv_msg {
	uint32_t	kind;
	uint32_t	flags;
	uint64_t	raddr;		/* WRITE: where this fragment goes */
	uint32_t	rkey;
	uint32_t	len;		/* payload bytes after the header */
	uint32_t	total;		/* the whole request's bytes (LAST) */
	uint32_t	imm;		/* network order, as the verbs keep it */
	uint32_t	status;		/* NAK: enum ibv_wc_status */
	uint32_t	qpn;		/* HELLO: the connecting QP's number */
};

struct fv_device {
	struct ibv_device dev;
};

struct fv_mr {
	struct ibv_mr	 mr;
	unsigned int	 access;
	struct fv_mr	*next;
};

struct fv_cq {
	struct ibv_cq	 cq;
	struct ibv_wc	*wc;		/* a ring of cq.cqe entries */
	int		 head, count;
	int		 overrun;
	int		 armed;
};

struct fv_channel {
	struct ibv_comp_channel ch;
	int		 wfd;		/* the pipe's write end */
};

struct fv_swr {				/* a send request awaiting its answer */
	uint64_t	 wr_id;
	int		 signaled;
	enum ibv_wc_opcode opcode;
	uint32_t	 len;
};

/* A request message that did not fit the socket: the thread sends it. */
struct fv_out {
	struct fv_out	*next;
	size_t		 len;
	uint8_t		 msg[];		/* struct fv_msg, then its payload */
};

struct fv_qp {
	struct ibv_qp	 qp;
	struct fv_qp	*next;
	int		 listen_fd;	/* peers connect here */
	int		 in_fd;		/* the peer's requests, our answers */
	int		 out_fd;	/* our requests, the peer's answers */
	char		 path[108];
	union ibv_gid	 dgid;
	uint32_t	 dqpn;
	pthread_mutex_t	 send_mtx;	/* one request at a time on out_fd */
	pthread_mutex_t	 out_mtx;	/* the backlog (taken last of all) */
	struct fv_out	*out_head, *out_tail;	/* to send on out_fd, in order:
					   posting never blocks, as on an HCA */
	struct fv_swr	*sq;		/* awaiting answers, oldest first */
	int		 sq_head, sq_count, sq_cap;
	struct ibv_recv_wr *rq;		/* posted receives, oldest first */
	int		 rq_head, rq_count, rq_cap;
	struct ibv_sge	*rq_sge;	/* their scatter lists, max_recv_sge */
	int		 max_sge;
	uint32_t	 rx_off;	/* bytes of the SEND being received */
	uint8_t		*buf;		/* the progress thread's receive buffer */
	int		 peer_gone;	/* its links closed; no send knew yet */
};

struct fv_ctx {
	struct ibv_context ctx;
	pthread_mutex_t	 mtx;		/* everything below, and the CQs */
	pthread_t	 thread;
	int		 wake[2];	/* a pipe: the thread looks again */
	int		 quit;
	union ibv_gid	 gid;
	uint32_t	 next_qpn, next_key;
	struct fv_mr	*mrs;
	size_t		 locked;	/* bytes registered */
	struct fv_qp	*qps;
};

static struct fv_device	 devices[FV_DEVICES_MAX];
static struct ibv_device *device_list[FV_DEVICES_MAX + 1];
static int		 ndevices = -1;
static pthread_mutex_t	 devices_mtx = PTHREAD_MUTEX_INITIALIZER;
static uint32_t		 next_ctx;

static struct fv_ctx *
ctx_of(struct ibv_context *c)
{
	return (struct fv_ctx *)(void *)c;
}

/* ---- devices ---- */

static void
devices_init(void)
{
	const char *names = getenv("MCCL_FAKEVERBS_DEVICES");
	char buf[256], *save = NULL, *tok;

	ndevices = 0;
	if (getenv("MCCL_FAKEVERBS_DIR") == NULL)
		return;
	snprintf(buf, sizeof(buf), "%s", names != NULL ? names : "fake0");
	for (tok = strtok_r(buf, ",", &save); tok != NULL &&
	    ndevices < FV_DEVICES_MAX; tok = strtok_r(NULL, ",", &save)) {
		struct ibv_device *d = &devices[ndevices].dev;

		d->node_type = IBV_NODE_CA;
		d->transport_type = IBV_TRANSPORT_IB;
		snprintf(d->name, sizeof(d->name), "%s", tok);
		snprintf(d->dev_name, sizeof(d->dev_name), "uverbs%d",
		    ndevices);
		device_list[ndevices++] = d;
	}
	device_list[ndevices] = NULL;
}

struct ibv_device **
ibv_get_device_list(int *num)
{
	struct ibv_device **list;

	pthread_mutex_lock(&devices_mtx);
	if (ndevices == -1)
		devices_init();
	if ((list = calloc((size_t)ndevices + 1, sizeof(*list))) != NULL)
		memcpy(list, device_list, (size_t)ndevices * sizeof(*list));
	if (num != NULL)
		*num = list != NULL ? ndevices : 0;
	pthread_mutex_unlock(&devices_mtx);
	if (list == NULL)
		errno = ENOMEM;
	return list;
}

void
ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *
ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

const char *
ibv_wc_status_str(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS: return "success";
	case IBV_WC_LOC_PROT_ERR: return "local protection error";
	case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
	case IBV_WC_REM_ACCESS_ERR: return "remote access error";
	case IBV_WC_REM_INV_REQ_ERR: return "invalid request error";
	case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
	case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
	case IBV_WC_LOC_LEN_ERR: return "local length error";
	case IBV_WC_GENERAL_ERR: return "general error";
	default: return "unknown";
	}
}

/* ---- completions ---- */

/* The channel's event: the CQ's address, read by ibv_get_cq_event. */
static int
cq_event(struct fv_cq *cq)
{
	struct fv_channel *ch = (struct fv_channel *)(void *)cq->cq.channel;
	struct ibv_cq *p = &cq->cq;

	cq->armed = 0;
	return write(ch->wfd, &p, sizeof(p)) == (ssize_t)sizeof(p) ? 0 : -1;
}

static void
cq_add(struct fv_cq *cq, const struct ibv_wc *wc)
{
	if (cq->count == cq->cq.cqe) {
		cq->overrun = 1;
		return;
	}
	cq->wc[(cq->head + cq->count++) % cq->cq.cqe] = *wc;
	if (cq->armed && cq->cq.channel != NULL && cq_event(cq) == -1)
		cq->overrun = 1;
}

static void
complete(struct fv_qp *q, struct ibv_cq *cq, uint64_t wr_id,
    enum ibv_wc_status status, enum ibv_wc_opcode opcode, uint32_t len,
    const uint32_t *imm)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = status;
	wc.opcode = opcode;
	wc.byte_len = len;
	wc.qp_num = q->qp.qp_num;
	if (imm != NULL) {
		wc.imm_data = *imm;
		wc.wc_flags = IBV_WC_WITH_IMM;
	}
	cq_add((struct fv_cq *)(void *)cq, &wc);
}

/*
 * With the context's lock: the queue pair is in error.  The oldest send
 * awaiting its answer completes with why, the rest and every posted
 * receive are flushed, and its links close (so the peer's goes too).
 */
static void
qp_error(struct fv_qp *q, enum ibv_wc_status why)
{
	if (q->qp.state == IBV_QPS_ERR)
		return;
	q->qp.state = IBV_QPS_ERR;
	for (int first = 1; q->sq_count > 0; first = 0) {
		struct fv_swr *s = &q->sq[q->sq_head];

		complete(q, q->qp.send_cq, s->wr_id, first ? why :
		    IBV_WC_WR_FLUSH_ERR, s->opcode, 0, NULL);
		q->sq_head = (q->sq_head + 1) % q->sq_cap;
		q->sq_count--;
	}
	for (; q->rq_count > 0; q->rq_count--) {
		complete(q, q->qp.recv_cq, q->rq[q->rq_head].wr_id,
		    IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, NULL);
		q->rq_head = (q->rq_head + 1) % q->rq_cap;
	}
	if (q->in_fd != -1)
		shutdown(q->in_fd, SHUT_RDWR);
	if (q->out_fd != -1)
		shutdown(q->out_fd, SHUT_RDWR);
}

/* ---- memory ---- */

static struct fv_mr *
mr_find(struct fv_ctx *c, uint32_t key, int remote)
{
	for (struct fv_mr *m = c->mrs; m != NULL; m = m->next)
		if ((remote ? m->mr.rkey : m->mr.lkey) == key)
			return m;
	return NULL;
}

/* [addr, addr + len) inside m, with every access in want. */
static int
mr_covers(const struct fv_mr *m, uint64_t addr, uint64_t len,
    unsigned int want)
{
	uint64_t base = (uintptr_t)m->mr.addr;

	return (m->access & want) == want && addr >= base &&
	    addr - base <= m->mr.length && len <= m->mr.length - (addr - base);
}

struct ibv_mr *
ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct fv_ctx *c = ctx_of(pd->context);
	const char *limit = getenv("MCCL_FAKEVERBS_MEMLOCK");
	struct fv_mr *m;

	if ((m = calloc(1, sizeof(*m))) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&c->mtx);
	if (limit != NULL && c->locked + length > strtoull(limit, NULL, 10)) {
		pthread_mutex_unlock(&c->mtx);
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	c->locked += length;
	pthread_mutex_unlock(&c->mtx);
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->access = (unsigned int)access;
	pthread_mutex_lock(&c->mtx);
	m->mr.lkey = ++c->next_key;
	m->mr.rkey = ++c->next_key;
	m->mr.handle = m->mr.lkey;
	m->next = c->mrs;
	c->mrs = m;
	pthread_mutex_unlock(&c->mtx);
	return &m->mr;
}

struct ibv_mr *
ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
    unsigned int access)
{
	if (iova != (uintptr_t)addr) {	/* not carried: only addresses */
		errno = EINVAL;
		return NULL;
	}
	return ibv_reg_mr(pd, addr, length, (int)access);
}

int
ibv_dereg_mr(struct ibv_mr *mr)
{
	struct fv_ctx *c = ctx_of(mr->context);
	struct fv_mr **pp;

	pthread_mutex_lock(&c->mtx);
	for (pp = &c->mrs; *pp != NULL && &(*pp)->mr != mr; pp = &(*pp)->next)
		;
	if (*pp != NULL)
		*pp = (*pp)->next;
	c->locked -= mr->length;
	pthread_mutex_unlock(&c->mtx);
	free(mr);
	return 0;
}

struct ibv_pd *
ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd;

	if ((pd = calloc(1, sizeof(*pd))) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = context;
	return pd;
}

int
ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

/* ---- completion queues and channels ---- */

struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context)
{
	struct fv_channel *ch;
	int p[2];

	if ((ch = calloc(1, sizeof(*ch))) == NULL || pipe2(p, O_CLOEXEC) == -1) {
		free(ch);
		return NULL;
	}
	ch->ch.context = context;
	ch->ch.fd = p[0];
	ch->wfd = p[1];
	return &ch->ch;
}

int
ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct fv_channel *ch = (struct fv_channel *)(void *)channel;

	close(ch->ch.fd);
	close(ch->wfd);
	free(ch);
	return 0;
}

static int
fv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct fv_cq *cq = (struct fv_cq *)(void *)ibcq;
	struct fv_ctx *c = ctx_of(ibcq->context);
	int got = 0;

	pthread_mutex_lock(&c->mtx);
	if (cq->overrun)
		got = -1;
	for (; got >= 0 && got < n && cq->count > 0; got++) {
		wc[got] = cq->wc[cq->head];
		cq->head = (cq->head + 1) % cq->cq.cqe;
		cq->count--;
	}
	pthread_mutex_unlock(&c->mtx);
	return got;
}

/* Arm the channel: the next completion writes it (at once, if one waits). */
static int
fv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct fv_cq *cq = (struct fv_cq *)(void *)ibcq;
	struct fv_ctx *c = ctx_of(ibcq->context);
	int rc = 0;

	(void)solicited_only;
	if (ibcq->channel == NULL)
		return EINVAL;
	pthread_mutex_lock(&c->mtx);
	cq->armed = 1;
	if (cq->count > 0 && cq_event(cq) == -1)
		rc = EIO;
	pthread_mutex_unlock(&c->mtx);
	return rc;
}

struct ibv_cq *
ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
    struct ibv_comp_channel *channel, int comp_vector)
{
	struct fv_cq *cq;

	(void)comp_vector;
	if (cqe < 1 || (cq = calloc(1, sizeof(*cq))) == NULL ||
	    (cq->wc = calloc((size_t)cqe, sizeof(*cq->wc))) == NULL) {
		if (cqe >= 1 && cq != NULL)
			free(cq);
		errno = cqe < 1 ? EINVAL : ENOMEM;
		return NULL;
	}
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	return &cq->cq;
}

int
ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct fv_cq *cq = (struct fv_cq *)(void *)ibcq;

	free(cq->wc);
	free(cq);
	return 0;
}

int
ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
    void **cq_context)
{
	struct ibv_cq *p;

	if (read(channel->fd, &p, sizeof(p)) != (ssize_t)sizeof(p))
		return -1;
	*cq = p;
	*cq_context = p->cq_context;
	return 0;
}

void
ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	struct fv_ctx *c = ctx_of(cq->context);

	pthread_mutex_lock(&c->mtx);
	cq->comp_events_completed += nevents;
	pthread_mutex_unlock(&c->mtx);
}

/* ---- queue pairs ---- */

static void
gid_path(char *buf, size_t len, const union ibv_gid *gid, uint32_t qpn)
{
	const char *dir = getenv("MCCL_FAKEVERBS_DIR");
	int n;

	n = snprintf(buf, len, "%s/fv-", dir != NULL ? dir : ".");
	for (int i = 0; i < 16 && n > 0 && (size_t)n + 2 < len; i++)
		n += snprintf(buf + n, len - (size_t)n, "%02x", gid->raw[i]);
	snprintf(buf + n, len - (size_t)n, "-%u", qpn);
}

static void
wake_thread(struct fv_ctx *c)
{
	char one = 1;

	if (write(c->wake[1], &one, 1) == -1 && errno != EAGAIN)
		abort();	/* the pipe of our own thread */
}

struct ibv_qp *
ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct fv_ctx *c = ctx_of(pd->context);
	struct fv_qp *q;

	if (attr->qp_type != IBV_QPT_RC || attr->srq != NULL ||
	    attr->cap.max_send_wr == 0 || attr->cap.max_recv_wr == 0 ||
	    attr->cap.max_recv_sge == 0) {
		errno = EINVAL;
		return NULL;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->sq = calloc(attr->cap.max_send_wr, sizeof(*q->sq))) == NULL ||
	    (q->rq = calloc(attr->cap.max_recv_wr, sizeof(*q->rq))) == NULL ||
	    (q->rq_sge = calloc((size_t)attr->cap.max_recv_wr *
	    attr->cap.max_recv_sge, sizeof(*q->rq_sge))) == NULL ||
	    (q->buf = malloc(sizeof(struct fv_msg) + FV_FRAG)) == NULL) {
		if (q != NULL) {
			free(q->sq);
			free(q->rq);
			free(q->rq_sge);
		}
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->qp.context = pd->context;
	q->qp.qp_context = attr->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = attr->send_cq;
	q->qp.recv_cq = attr->recv_cq;
	q->qp.qp_type = IBV_QPT_RC;
	q->qp.state = IBV_QPS_RESET;
	q->listen_fd = q->in_fd = q->out_fd = -1;
	q->sq_cap = (int)attr->cap.max_send_wr;
	q->rq_cap = (int)attr->cap.max_recv_wr;
	q->max_sge = (int)attr->cap.max_recv_sge;
	pthread_mutex_init(&q->send_mtx, NULL);
	pthread_mutex_init(&q->out_mtx, NULL);
	pthread_mutex_lock(&c->mtx);
	q->qp.qp_num = ++c->next_qpn;
	q->qp.handle = q->qp.qp_num;
	q->next = c->qps;
	c->qps = q;
	pthread_mutex_unlock(&c->mtx);
	return &q->qp;
}

/* INIT: listen where peers find this QP (its GID and number). */
static int
qp_listen(struct fv_ctx *c, struct fv_qp *q)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	gid_path(q->path, sizeof(q->path), &c->gid, q->qp.qp_num);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", q->path);
	/* Non-blocking: a stale poll result must not block the thread. */
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) == -1)
		return errno;
	unlink(q->path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
	    listen(fd, 4) == -1) {
		int e = errno;

		close(fd);
		return e;
	}
	q->listen_fd = fd;
	return 0;
}

int
ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct fv_qp *q = (struct fv_qp *)(void *)ibqp;
	struct fv_ctx *c = ctx_of(ibqp->context);
	int rc = 0;

	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	pthread_mutex_lock(&c->mtx);
	switch (attr->qp_state) {
	case IBV_QPS_INIT:
		if (q->qp.state != IBV_QPS_RESET)
			rc = EINVAL;
		else if ((rc = qp_listen(c, q)) == 0)
			wake_thread(c);
		break;
	case IBV_QPS_RTR:
		if (q->qp.state != IBV_QPS_INIT || !(mask & IBV_QP_AV) ||
		    !(mask & IBV_QP_DEST_QPN) || !attr->ah_attr.is_global)
			rc = EINVAL;
		else {
			q->dgid = attr->ah_attr.grh.dgid;
			q->dqpn = attr->dest_qp_num;
		}
		break;
	case IBV_QPS_RTS:
		if (q->qp.state != IBV_QPS_RTR)
			rc = EINVAL;
		break;
	case IBV_QPS_ERR:
		qp_error(q, IBV_WC_WR_FLUSH_ERR);
		break;
	default:
		rc = EINVAL;
	}
	if (rc == 0)
		q->qp.state = attr->qp_state;
	pthread_mutex_unlock(&c->mtx);
	return rc;
}

/* The requests that never left: the QP is going, or its link broke. */
static void
out_drop(struct fv_qp *q)
{
	while (q->out_head != NULL) {
		struct fv_out *o = q->out_head;

		q->out_head = o->next;
		free(o);
	}
	q->out_tail = NULL;
}

int
ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct fv_qp *q = (struct fv_qp *)(void *)ibqp, **pp;
	struct fv_ctx *c = ctx_of(ibqp->context);

	pthread_mutex_lock(&c->mtx);
	for (pp = &c->qps; *pp != NULL && *pp != q; pp = &(*pp)->next)
		;
	if (*pp != NULL)
		*pp = q->next;
	if (q->listen_fd != -1) {
		close(q->listen_fd);
		unlink(q->path);
	}
	if (q->in_fd != -1)
		close(q->in_fd);
	if (q->out_fd != -1)
		close(q->out_fd);
	wake_thread(c);		/* it must not poll the closed ones */
	pthread_mutex_unlock(&c->mtx);
	pthread_mutex_destroy(&q->send_mtx);
	pthread_mutex_destroy(&q->out_mtx);
	out_drop(q);
	free(q->sq);
	free(q->rq);
	free(q->rq_sge);
	free(q->buf);
	free(q);
	return 0;
}

/* ---- posting ---- */

static int
post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
    struct ibv_recv_wr **bad)
{
	struct fv_qp *q = (struct fv_qp *)(void *)ibqp;
	struct fv_ctx *c = ctx_of(ibqp->context);
	int rc = 0;

	pthread_mutex_lock(&c->mtx);
	for (; wr != NULL; wr = wr->next) {
		int slot = (q->rq_head + q->rq_count) % q->rq_cap;

		if (q->qp.state == IBV_QPS_RESET || q->qp.state == IBV_QPS_ERR ||
		    q->rq_count == q->rq_cap || wr->num_sge > q->max_sge) {
			rc = q->rq_count == q->rq_cap ? ENOMEM : EINVAL;
			*bad = wr;
			break;
		}
		q->rq[slot] = *wr;
		q->rq[slot].next = NULL;
		q->rq[slot].sg_list = q->rq_sge + (size_t)slot * q->max_sge;
		if (wr->num_sge > 0)	/* a write's receive may have none */
			memcpy(q->rq[slot].sg_list, wr->sg_list,
			    (size_t)wr->num_sge * sizeof(*wr->sg_list));
		q->rq_count++;
	}
	pthread_mutex_unlock(&c->mtx);
	return rc;
}

/* Connect to the peer QP and say who we are; its INIT may be late. */
static int
qp_connect(struct fv_qp *q)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct fv_msg hello = { .kind = FV_HELLO, .qpn = q->qp.qp_num };
	struct timespec nap = { 0, 10 * 1000000 };
	int fd;

	gid_path(sa.sun_path, sizeof(sa.sun_path), &q->dgid, q->dqpn);
	for (int ms = 0; ms < FV_CONNECT_MS; ms += 10) {
		if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) ==
		    -1)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) ==
			    (ssize_t)sizeof(hello))
				return fd;
			close(fd);
			return -1;
		}
		close(fd);
		if (errno != ENOENT && errno != ECONNREFUSED)
			return -1;
		nanosleep(&nap, NULL);
	}
	return -1;
}

/* The bytes of wr's gather list; 0 with *status set if a key is bad. */
static int
gather_check(struct fv_ctx *c, const struct ibv_send_wr *wr, uint64_t *len,
    enum ibv_wc_status *status)
{
	*len = 0;
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *g = &wr->sg_list[i];
		struct fv_mr *m = mr_find(c, g->lkey, 0);

		if (!(wr->send_flags & IBV_SEND_INLINE) &&
		    (m == NULL || !mr_covers(m, g->addr, g->length, 0))) {
			*status = IBV_WC_LOC_PROT_ERR;
			return -1;
		}
		*len += g->length;
	}
	if (*len > UINT32_MAX) {
		*status = IBV_WC_LOC_LEN_ERR;
		return -1;
	}
	return 0;
}

/* Send what the backlog holds, in order, until the socket is full. */
static int
out_flush(struct fv_qp *q)
{
	struct fv_out *o;
	ssize_t n;

	while ((o = q->out_head) != NULL) {
		if ((n = send(q->out_fd, o->msg, o->len, MSG_NOSIGNAL |
		    MSG_DONTWAIT)) == -1)
			return errno == EAGAIN ? 0 : -1;
		q->out_head = o->next;
		if (q->out_head == NULL)
			q->out_tail = NULL;
		free(o);
	}
	return 0;
}

/*
 * One request message out, without waiting: behind the backlog, or into it
 * when the peer has not read what came before (it may be stopped).
 */
static int
out_send(struct fv_qp *q, struct msghdr *mh, const struct fv_msg *m,
    const uint8_t *payload, uint32_t n)
{
	struct fv_ctx *c = ctx_of(q->qp.context);
	struct fv_out *o;
	int rc = 0;

	pthread_mutex_lock(&q->out_mtx);
	if (q->out_head == NULL && (rc = (int)sendmsg(q->out_fd, mh,
	    MSG_NOSIGNAL | MSG_DONTWAIT)) != -1) {
		pthread_mutex_unlock(&q->out_mtx);
		return 0;
	}
	if (q->out_head == NULL && errno != EAGAIN)
		rc = -1;
	else if ((o = malloc(sizeof(*o) + sizeof(*m) + n)) == NULL)
		rc = -1;
	else {
		o->next = NULL;
		o->len = sizeof(*m) + n;
		memcpy(o->msg, m, sizeof(*m));
		if (n > 0)
			memcpy(o->msg + sizeof(*m), payload, n);
		if (q->out_tail != NULL)
			q->out_tail->next = o;
		else
			q->out_head = o;
		q->out_tail = o;
		rc = 0;
		wake_thread(c);		/* to watch out_fd for room */
	}
	pthread_mutex_unlock(&q->out_mtx);
	return rc;
}

/* Send wr's data as fragments of FV_FRAG bytes: 0, or -1 if the link broke. */
static int
send_fragments(struct fv_qp *q, const struct ibv_send_wr *wr, uint32_t total)
{
	struct fv_msg m = { .kind = wr->opcode == IBV_WR_SEND ? FV_SEND :
	    FV_WRITE, .raddr = wr->wr.rdma.remote_addr,
	    .rkey = wr->wr.rdma.rkey, .total = total, .imm = wr->imm_data };
	int sge = 0;
	uint32_t sge_off = 0, sent = 0;

	if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		m.flags |= FV_IMM;
	do {
		struct iovec iov[2] = { { &m, sizeof(m) }, { q->buf, 0 } };
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		uint8_t *frag = NULL;
		uint32_t n = 0, want = total - sent < FV_FRAG ? total - sent :
		    FV_FRAG;

		/* q->buf belongs to the thread: gather into our own. */
		if (want > 0 && (frag = malloc(want)) == NULL)
			return -1;
		while (n < want) {
			const struct ibv_sge *g = &wr->sg_list[sge];
			uint32_t k = g->length - sge_off < want - n ?
			    g->length - sge_off : want - n;

			memcpy(frag + n, (const uint8_t *)(uintptr_t)g->addr +
			    sge_off, k);
			n += k;
			if ((sge_off += k) == g->length) {
				sge++;
				sge_off = 0;
			}
		}
		iov[1].iov_base = frag;
		iov[1].iov_len = n;
		m.len = n;
		m.flags = (m.flags & ~FV_LAST) | (sent + n == total ? FV_LAST :
		    0);
		if (out_send(q, &mh, &m, frag, n) == -1) {
			free(frag);
			return -1;
		}
		free(frag);
		if (m.kind == FV_WRITE)
			m.raddr += n;
		sent += n;
	} while (sent < total);
	return 0;
}

/*
 * One send request, with q->send_mtx held (so requests leave in the order
 * they queue) and the context's lock held on entry and on return.
 */
static int
post_one(struct fv_ctx *c, struct fv_qp *q, struct ibv_send_wr *wr)
{
	enum ibv_wc_status status = IBV_WC_SUCCESS;
	struct fv_swr *s;
	uint64_t len;
	int fd = 0;

	if (wr->opcode != IBV_WR_RDMA_WRITE &&
	    wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM &&
	    wr->opcode != IBV_WR_SEND)
		return EINVAL;
	if (q->qp.state == IBV_QPS_ERR) {	/* taken, and flushed */
		complete(q, q->qp.send_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR,
		    wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE,
		    0, NULL);
		return 0;
	}
	if (q->qp.state != IBV_QPS_RTS)
		return EINVAL;
	if (q->sq_count == q->sq_cap)
		return ENOMEM;
	s = &q->sq[(q->sq_head + q->sq_count++) % q->sq_cap];
	*s = (struct fv_swr){ wr->wr_id, (wr->send_flags & IBV_SEND_SIGNALED) !=
	    0, wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, 0 };
	if (q->peer_gone) {		/* this send finds it */
		qp_error(q, IBV_WC_RETRY_EXC_ERR);
		return 0;
	}
	if (gather_check(c, wr, &len, &status) == -1) {
		qp_error(q, status);
		return 0;
	}
	s->len = (uint32_t)len;
	/* The link and the data leave without the context's lock. */
	pthread_mutex_unlock(&c->mtx);
	if (q->out_fd == -1 && (fd = qp_connect(q)) != -1) {
		pthread_mutex_lock(&c->mtx);
		q->out_fd = fd;
		wake_thread(c);
		pthread_mutex_unlock(&c->mtx);
	}
	if (fd != -1 && send_fragments(q, wr, (uint32_t)len) == -1)
		fd = -1;
	pthread_mutex_lock(&c->mtx);
	if (fd == -1 && q->out_fd == -1)	/* never reached the peer */
		qp_error(q, IBV_WC_RETRY_EXC_ERR);
	/* A broken link: the thread completes it as the answer or EOF says. */
	return 0;
}

static int
post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
    struct ibv_send_wr **bad)
{
	struct fv_qp *q = (struct fv_qp *)(void *)ibqp;
	struct fv_ctx *c = ctx_of(ibqp->context);
	int rc = 0;

	pthread_mutex_lock(&q->send_mtx);
	pthread_mutex_lock(&c->mtx);
	for (; wr != NULL && rc == 0; wr = wr->next)
		if ((rc = post_one(c, q, wr)) != 0)
			*bad = wr;
	pthread_mutex_unlock(&c->mtx);
	pthread_mutex_unlock(&q->send_mtx);
	return rc;
}

/* ---- the progress thread: the peers' requests, and their answers ---- */

static void
answer(struct fv_qp *q, uint32_t kind, enum ibv_wc_status status)
{
	struct fv_msg m = { .kind = kind, .status = status };

	/* A peer that left: its side is in error already. */
	(void)send(q->in_fd, &m, sizeof(m), MSG_NOSIGNAL);
}

/* Scatter a SEND's fragment into the head receive, at its offset so far. */
static int
scatter(struct fv_ctx *c, struct fv_qp *q, const uint8_t *p, uint32_t n,
    uint32_t off)
{
	const struct ibv_recv_wr *r = &q->rq[q->rq_head];

	for (int i = 0; i < r->num_sge && n > 0; i++) {
		const struct ibv_sge *g = &r->sg_list[i];
		struct fv_mr *m = mr_find(c, g->lkey, 0);
		uint32_t k;

		if (off >= g->length) {
			off -= g->length;
			continue;
		}
		if (m == NULL || !mr_covers(m, g->addr, g->length,
		    IBV_ACCESS_LOCAL_WRITE))
			return -1;
		k = g->length - off < n ? g->length - off : n;
		memcpy((uint8_t *)(uintptr_t)g->addr + off, p, k);
		p += k;
		n -= k;
		off = 0;
	}
	return n == 0 ? 0 : -1;
}

/* A request fragment from the peer: carry it out, answer the last. */
static void
serve(struct fv_ctx *c, struct fv_qp *q, const struct fv_msg *m,
    const uint8_t *payload)
{
	struct fv_mr *mr;
	uint32_t imm = m->imm;

	if (m->kind == FV_WRITE) {
		mr = mr_find(c, m->rkey, 1);
		if (mr == NULL || !mr_covers(mr, m->raddr, m->len,
		    IBV_ACCESS_REMOTE_WRITE)) {
			answer(q, FV_NAK, IBV_WC_REM_ACCESS_ERR);
			qp_error(q, IBV_WC_WR_FLUSH_ERR);
			return;
		}
		memcpy((void *)(uintptr_t)m->raddr, payload, m->len);
		if (!(m->flags & FV_LAST))
			return;
		if (m->flags & FV_IMM) {
			if (q->rq_count == 0) {
				answer(q, FV_NAK, IBV_WC_RNR_RETRY_EXC_ERR);
				qp_error(q, IBV_WC_WR_FLUSH_ERR);
				return;
			}
			complete(q, q->qp.recv_cq, q->rq[q->rq_head].wr_id,
			    IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			    m->total, &imm);
			q->rq_head = (q->rq_head + 1) % q->rq_cap;
			q->rq_count--;
		}
		answer(q, FV_ACK, IBV_WC_SUCCESS);
		return;
	}
	/* FV_SEND: fragments fill the head receive in order. */
	if (q->rq_count == 0 || scatter(c, q, payload, m->len, q->rx_off) ==
	    -1) {
		answer(q, FV_NAK, q->rq_count == 0 ? IBV_WC_RNR_RETRY_EXC_ERR :
		    IBV_WC_REM_INV_REQ_ERR);
		qp_error(q, IBV_WC_WR_FLUSH_ERR);
		return;
	}
	q->rx_off += m->len;
	if (!(m->flags & FV_LAST))
		return;
	complete(q, q->qp.recv_cq, q->rq[q->rq_head].wr_id, IBV_WC_SUCCESS,
	    IBV_WC_RECV, m->total, (m->flags & FV_IMM) ? &imm : NULL);
	q->rq_head = (q->rq_head + 1) % q->rq_cap;
	q->rq_count--;
	q->rx_off = 0;
	answer(q, FV_ACK, IBV_WC_SUCCESS);
}

/* A peer's answer to our oldest request. */
static void
answered(struct fv_qp *q, const struct fv_msg *m)
{
	struct fv_swr *s;

	if (m->kind != FV_ACK || q->sq_count == 0) {
		qp_error(q, m->kind == FV_NAK ? (enum ibv_wc_status)m->status :
		    IBV_WC_GENERAL_ERR);
		return;
	}
	s = &q->sq[q->sq_head];
	if (s->signaled)
		complete(q, q->qp.send_cq, s->wr_id, IBV_WC_SUCCESS, s->opcode,
		    s->len, NULL);
	q->sq_head = (q->sq_head + 1) % q->sq_cap;
	q->sq_count--;
}

/* A message on one of q's links: a request (in), an answer (out), or EOF. */
static void
link_ready(struct fv_ctx *c, struct fv_qp *q, int fd)
{
	struct fv_msg m;
	ssize_t n;

	/*
	 * ECONNRESET: the peer closed with our requests unread, and the
	 * kernel says so before what is still queued here (answers it sent
	 * first); reading it cleared the error, so the next call reads on.
	 */
	n = recv(fd, q->buf, sizeof(m) + FV_FRAG, MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR ||
	    errno == ECONNRESET))
		return;
	if (n < (ssize_t)sizeof(m)) {	/* the peer is gone */
		/*
		 * Our requests' fate is in their answers, which come on
		 * out_fd ahead of its EOF: only that EOF fails the ones
		 * left.  The peer's requests' link (in_fd) may close first,
		 * with answers still unread on out_fd.
		 */
		if (fd == q->out_fd && q->sq_count > 0)
			qp_error(q, IBV_WC_RETRY_EXC_ERR);
		else if (q->sq_count == 0)
			q->peer_gone = 1;	/* its links are polled no more */
		return;
	}
	memcpy(&m, q->buf, sizeof(m));
	if (m.len != (size_t)n - sizeof(m))
		qp_error(q, IBV_WC_GENERAL_ERR);
	else if (fd == q->out_fd)
		answered(q, &m);
	else if (m.kind == FV_WRITE || m.kind == FV_SEND)
		serve(c, q, &m, q->buf + sizeof(m));
	else
		qp_error(q, IBV_WC_GENERAL_ERR);
}

/* A peer QP connects: its HELLO makes the link our in_fd. */
static void
accept_link(struct fv_qp *q)
{
	struct fv_msg hello;
	struct pollfd p;
	int fd;

	if ((fd = accept4(q->listen_fd, NULL, NULL, SOCK_CLOEXEC)) == -1)
		return;
	p = (struct pollfd){ fd, POLLIN, 0 };
	if (q->in_fd != -1 || poll(&p, 1, FV_CONNECT_MS) != 1 ||
	    recv(fd, &hello, sizeof(hello), MSG_DONTWAIT) !=
	    (ssize_t)sizeof(hello) || hello.kind != FV_HELLO) {
		close(fd);
		return;
	}
	q->in_fd = fd;
}

static int
qp_alive(const struct fv_ctx *c, const struct fv_qp *q)
{
	for (const struct fv_qp *p = c->qps; p != NULL; p = p->next)
		if (p == q)
			return 1;
	return 0;
}

#define FV_POLL_MAX	256

static int
out_pending(struct fv_qp *q)
{
	int pending;

	pthread_mutex_lock(&q->out_mtx);
	pending = q->out_head != NULL;
	pthread_mutex_unlock(&q->out_mtx);
	return pending;
}

static void *
progress(void *arg)
{
	struct fv_ctx *c = arg;
	struct pollfd pfd[FV_POLL_MAX];
	struct fv_qp *owner[FV_POLL_MAX];
	char drain[64];
	int n;

	pthread_mutex_lock(&c->mtx);
	while (!c->quit) {
		n = 1;
		pfd[0] = (struct pollfd){ c->wake[0], POLLIN, 0 };
		for (struct fv_qp *q = c->qps; q != NULL; q = q->next) {
			int fds[3] = { q->listen_fd, q->in_fd, q->out_fd };

			for (int k = 0; k < 3 && n < FV_POLL_MAX; k++)
				if (fds[k] != -1 && (k == 0 ||
				    (q->qp.state != IBV_QPS_ERR &&
				    !q->peer_gone))) {
					owner[n] = q;
					pfd[n++] = (struct pollfd){ fds[k],
					    (short)(POLLIN | (k == 2 &&
					    out_pending(q) ? POLLOUT : 0)), 0 };
				}
		}
		pthread_mutex_unlock(&c->mtx);
		poll(pfd, (nfds_t)n, -1);
		pthread_mutex_lock(&c->mtx);
		if (pfd[0].revents & POLLIN)
			while (read(c->wake[0], drain, sizeof(drain)) > 0)
				;
		for (int i = 1; i < n && !c->quit; i++) {
			struct fv_qp *q = owner[i];

			/* Destroyed meanwhile: its fds may be someone's now. */
			if (pfd[i].revents == 0 || !qp_alive(c, q))
				continue;
			if (pfd[i].fd == q->out_fd &&
			    (pfd[i].revents & POLLOUT)) {
				pthread_mutex_lock(&q->out_mtx);
				if (out_flush(q) == -1)	/* EOF: POLLIN says */
					out_drop(q);
				pthread_mutex_unlock(&q->out_mtx);
			}
			if (pfd[i].fd == q->listen_fd)
				accept_link(q);
			else if ((pfd[i].fd == q->in_fd || pfd[i].fd ==
			    q->out_fd) && q->qp.state != IBV_QPS_ERR)
				link_ready(c, q, pfd[i].fd);
		}
	}
	pthread_mutex_unlock(&c->mtx);
	return NULL;
}

/* ---- contexts ---- */

struct ibv_context *
ibv_open_device(struct ibv_device *device)
{
	struct fv_ctx *c;
	uint32_t pid = (uint32_t)getpid(), k;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	if (pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) == -1) {
		free(c);
		return NULL;
	}
	c->ctx.device = device;
	c->ctx.cmd_fd = c->ctx.async_fd = -1;
	c->ctx.num_comp_vectors = 1;
	c->ctx.ops.poll_cq = fv_poll_cq;
	c->ctx.ops.req_notify_cq = fv_req_notify_cq;
	c->ctx.ops.post_send = post_send;
	c->ctx.ops.post_recv = post_recv;
	pthread_mutex_init(&c->ctx.mutex, NULL);
	pthread_mutex_init(&c->mtx, NULL);
	/* fe80::, then the process and a count: unique on this machine. */
	k = __atomic_add_fetch(&next_ctx, 1, __ATOMIC_RELAXED);
	c->gid.raw[0] = 0xfe;
	c->gid.raw[1] = 0x80;
	memcpy(c->gid.raw + 8, &pid, 4);
	memcpy(c->gid.raw + 12, &k, 4);
	if (pthread_create(&c->thread, NULL, progress, c) != 0) {
		close(c->wake[0]);
		close(c->wake[1]);
		free(c);
		return NULL;
	}
	return &c->ctx;
}

int
ibv_close_device(struct ibv_context *context)
{
	struct fv_ctx *c = ctx_of(context);

	pthread_mutex_lock(&c->mtx);
	c->quit = 1;
	wake_thread(c);
	pthread_mutex_unlock(&c->mtx);
	pthread_join(c->thread, NULL);
	close(c->wake[0]);
	close(c->wake[1]);
	pthread_mutex_destroy(&c->mtx);
	pthread_mutex_destroy(&c->ctx.mutex);
	free(c);
	return 0;
}

int
ibv_query_port(struct ibv_context *context, uint8_t port,
    struct _compat_ibv_port_attr *attr)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)(void *)attr;

	(void)context;
	if (port != 1)
		return EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = 1;
	a->max_msg_sz = UINT32_MAX;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;	/* addressed by GID */
	return 0;
}

int
ibv_query_gid(struct ibv_context *context, uint8_t port, int index,
    union ibv_gid *gid)
{
	if (port != 1 || index != 0)
		return -1;
	*gid = ctx_of(context)->gid;
	return 0;
}
