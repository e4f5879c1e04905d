/*
 * test_fakeverbs.c: the in-tree verbs provider (tests/fakeverbs) keeps the
 * semantics the RDMA transport relies on: ordered reliable delivery, RDMA
 * WRITE by address and rkey with bounds and access checks, immediate data,
 * completion queues and channels, and the error state when a peer dies.
 * Written against <infiniband/verbs.h>, as the transport is.
 */
#include <sys/wait.h>

#include <arpa/inet.h>
#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define BUF	(256 * 1024)
#define WAIT_MS	5000

/* One end: a context, a protection domain, a CQ with a channel, a QP and
   a registered buffer. */
struct end {
	struct ibv_context	*ctx;
	struct ibv_pd		*pd;
	struct ibv_comp_channel	*ch;
	struct ibv_cq		*cq;
	struct ibv_qp		*qp;
	struct ibv_mr		*mr;
	uint8_t			*buf;
	union ibv_gid		 gid;
};

static char dir[] = "/tmp/fakeverbs.XXXXXX";

static void
setup(void)
{
	if (mkdtemp(dir) == NULL) {
		perror("test_fakeverbs: mkdtemp");
		exit(1);
	}
	setenv("MCCL_FAKEVERBS_DIR", dir, 1);
}

/* Unchecked: it runs in check's own process, even when a test failed. */
static void
teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_fakeverbs: cannot remove %s\n", dir);
	unsetenv("MCCL_FAKEVERBS_DIR");
}

static void
end_open(struct end *e, unsigned int access)
{
	struct ibv_device **list;
	struct ibv_qp_init_attr qa;
	int n;

	memset(e, 0, sizeof(*e));
	list = ibv_get_device_list(&n);
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_nonnull(e->ctx = ibv_open_device(list[0]));
	ibv_free_device_list(list);
	ck_assert_ptr_nonnull(e->pd = ibv_alloc_pd(e->ctx));
	ck_assert_ptr_nonnull(e->ch = ibv_create_comp_channel(e->ctx));
	ck_assert_ptr_nonnull(e->cq = ibv_create_cq(e->ctx, 1024, e, e->ch, 0));
	ck_assert_ptr_nonnull(e->buf = calloc(1, BUF));
	ck_assert_ptr_nonnull(e->mr = ibv_reg_mr(e->pd, e->buf, BUF, access));
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 512;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
	ck_assert_ptr_nonnull(e->qp = ibv_create_qp(e->pd, &qa));
	ck_assert_int_eq(ibv_query_gid(e->ctx, 1, 0, &e->gid), 0);
}

static void
end_close(struct end *e)
{
	ck_assert_int_eq(ibv_destroy_qp(e->qp), 0);
	ck_assert_int_eq(ibv_dereg_mr(e->mr), 0);
	ck_assert_int_eq(ibv_destroy_cq(e->cq), 0);
	ck_assert_int_eq(ibv_destroy_comp_channel(e->ch), 0);
	ck_assert_int_eq(ibv_dealloc_pd(e->pd), 0);
	ck_assert_int_eq(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

/* INIT, RTR to the peer (its GID and QP number), RTS. */
static void
end_connect(struct end *e, const union ibv_gid *gid, uint32_t qpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ck_assert_int_eq(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PORT |
	    IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = qpn;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.port_num = 1;
	a.path_mtu = IBV_MTU_4096;
	ck_assert_int_eq(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV |
	    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	ck_assert_int_eq(ibv_modify_qp(e->qp, &a, IBV_QP_STATE), 0);
}

static void
pair_open(struct end *a, struct end *b, unsigned int b_access)
{
	end_open(a, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	end_open(b, b_access);
	end_connect(a, &b->gid, b->qp->qp_num);
	end_connect(b, &a->gid, a->qp->qp_num);
}

static void
post_recv(struct end *e, uint64_t id)
{
	struct ibv_sge g = { (uintptr_t)e->buf, BUF, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &g, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	ck_assert_int_eq(ibv_post_recv(e->qp, &wr, &bad), 0);
}

static int
post_write(struct end *e, uint64_t id, size_t off, size_t len,
    uint64_t raddr, uint32_t rkey, uint32_t lkey, int imm)
{
	struct ibv_sge g = { (uintptr_t)e->buf + off, (uint32_t)len, lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &g;
	wr.num_sge = 1;
	wr.opcode = imm >= 0 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl((uint32_t)imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The next completion of e's CQ, within WAIT_MS. */
static struct ibv_wc
next_wc(struct end *e)
{
	uint64_t until = now_ms() + WAIT_MS;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(e->cq, 1, &wc)) == 0 && now_ms() < until)
		usleep(200);
	ck_assert_msg(n == 1, "no completion within %d ms (poll %d)", WAIT_MS,
	    n);
	return wc;
}

START_TEST(test_devices)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct end a, b;
	int n;

	list = ibv_get_device_list(&n);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(ibv_get_device_name(list[0]), "fake0");
	ck_assert_ptr_null(list[1]);
	ibv_free_device_list(list);
	end_open(&a, IBV_ACCESS_LOCAL_WRITE);
	end_open(&b, IBV_ACCESS_LOCAL_WRITE);
	ck_assert_int_eq(ibv_query_port(a.ctx, 1, &pa), 0);
	ck_assert_int_eq(pa.state, IBV_PORT_ACTIVE);
	ck_assert_int_ne(ibv_query_port(a.ctx, 2, &pa), 0);
	ck_assert_int_ne(memcmp(&a.gid, &b.gid, sizeof(a.gid)), 0);
	ck_assert_uint_ne(a.mr->rkey, a.mr->lkey);
	end_close(&a);
	end_close(&b);
}
END_TEST

/* A write of 100 KiB (two fragments) with immediate data lands whole. */
START_TEST(test_write_imm)
{
	struct end a, b;
	struct ibv_wc wc;

	pair_open(&a, &b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	for (size_t i = 0; i < 100 * 1024; i++)
		a.buf[i] = (uint8_t)(i * 7);
	post_recv(&b, 77);
	ck_assert_int_eq(post_write(&a, 5, 0, 100 * 1024,
	    (uintptr_t)b.buf + 4096, b.mr->rkey, a.mr->lkey, 0x1234), 0);
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_uint_eq(wc.wr_id, 5);
	ck_assert_int_eq(wc.opcode, IBV_WC_RDMA_WRITE);
	wc = next_wc(&b);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_uint_eq(wc.wr_id, 77);
	ck_assert_int_eq(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	ck_assert(wc.wc_flags & IBV_WC_WITH_IMM);
	ck_assert_uint_eq(ntohl(wc.imm_data), 0x1234);
	ck_assert_uint_eq(wc.byte_len, 100 * 1024);
	ck_assert_int_eq(memcmp(b.buf + 4096, a.buf, 100 * 1024), 0);
	ck_assert_uint_eq(b.buf[4095], 0);
	end_close(&a);
	end_close(&b);
}
END_TEST

/* Writes arrive in the order they were posted. */
START_TEST(test_order)
{
	enum { N = 300 };
	struct end a, b;
	struct ibv_wc wc;

	pair_open(&a, &b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	for (int i = 0; i < N; i++)
		post_recv(&b, (uint64_t)i);
	for (int i = 0; i < N; i++) {
		a.buf[i] = (uint8_t)i;
		ck_assert_int_eq(post_write(&a, (uint64_t)i, (size_t)i, 1,
		    (uintptr_t)b.buf + (size_t)i, b.mr->rkey, a.mr->lkey, i), 0);
	}
	for (int i = 0; i < N; i++) {
		wc = next_wc(&b);
		ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
		ck_assert_uint_eq(ntohl(wc.imm_data), (uint32_t)i);
		ck_assert_uint_eq(b.buf[i], (uint8_t)i);
	}
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(next_wc(&a).wr_id, (uint64_t)i);
	end_close(&a);
	end_close(&b);
}
END_TEST

/* A bad rkey, range or access: REM_ACCESS_ERR, both QPs in error. */
static void
remote_refused(unsigned int b_access, uint64_t off, uint32_t rkey_delta,
    size_t len)
{
	struct end a, b;
	struct ibv_wc wc;

	pair_open(&a, &b, b_access);
	post_recv(&b, 9);
	ck_assert_int_eq(post_write(&a, 1, 0, len, (uintptr_t)b.buf + off,
	    b.mr->rkey + rkey_delta, a.mr->lkey, 1), 0);
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_REM_ACCESS_ERR);
	ck_assert_int_eq(a.qp->state, IBV_QPS_ERR);
	wc = next_wc(&b);
	ck_assert_int_eq(wc.status, IBV_WC_WR_FLUSH_ERR);
	ck_assert_uint_eq(wc.wr_id, 9);
	/* Nothing was written. */
	for (size_t i = 0; i < BUF; i += 4096)
		ck_assert_uint_eq(b.buf[i], 0);
	/* And a QP in error carries no more: what is posted is flushed. */
	ck_assert_int_eq(post_write(&a, 2, 0, 8, (uintptr_t)b.buf,
	    b.mr->rkey, a.mr->lkey, 1), 0);
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_WR_FLUSH_ERR);
	ck_assert_uint_eq(wc.wr_id, 2);
	ck_assert_uint_eq(b.buf[0], 0);
	end_close(&a);
	end_close(&b);
}

START_TEST(test_bad_rkey)
{
	remote_refused(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, 999,
	    64);
}
END_TEST

START_TEST(test_past_the_region)
{
	remote_refused(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	    BUF - 32, 0, 64);
}
END_TEST

START_TEST(test_no_remote_write)
{
	remote_refused(IBV_ACCESS_LOCAL_WRITE, 0, 0, 64);
}
END_TEST

/* A local key that is not ours: LOC_PROT_ERR; inline needs none. */
START_TEST(test_bad_lkey)
{
	struct ibv_sge g;
	struct ibv_send_wr wr, *bad;
	struct end a, b;
	struct ibv_wc wc;

	pair_open(&a, &b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memcpy(a.buf, "inline!", 8);
	g = (struct ibv_sge){ (uintptr_t)a.buf, 8, 0 };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 3;
	wr.sg_list = &g;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	ck_assert_int_eq(ibv_post_send(a.qp, &wr, &bad), 0);
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_str_eq((char *)b.buf, "inline!");
	ck_assert_int_eq(post_write(&a, 4, 0, 8, (uintptr_t)b.buf, b.mr->rkey,
	    a.mr->lkey + 1000, -1), 0);
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_LOC_PROT_ERR);
	ck_assert_uint_eq(wc.wr_id, 4);
	end_close(&a);
	end_close(&b);
}
END_TEST

/* A send fills the receive posted for it. */
START_TEST(test_send)
{
	struct ibv_sge g;
	struct ibv_send_wr wr, *bad;
	struct end a, b;
	struct ibv_wc wc;

	pair_open(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 3000; i++)
		a.buf[i] = (uint8_t)(i + 1);
	post_recv(&b, 8);
	g = (struct ibv_sge){ (uintptr_t)a.buf, 3000, a.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 6;
	wr.sg_list = &g;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	ck_assert_int_eq(ibv_post_send(a.qp, &wr, &bad), 0);
	ck_assert_int_eq(next_wc(&a).status, IBV_WC_SUCCESS);
	wc = next_wc(&b);
	ck_assert_int_eq(wc.status, IBV_WC_SUCCESS);
	ck_assert_int_eq(wc.opcode, IBV_WC_RECV);
	ck_assert_uint_eq(wc.byte_len, 3000);
	ck_assert_int_eq(memcmp(a.buf, b.buf, 3000), 0);
	end_close(&a);
	end_close(&b);
}
END_TEST

/* An armed CQ writes its channel once a completion comes. */
START_TEST(test_channel)
{
	struct pollfd p;
	struct end a, b;
	struct ibv_cq *cq;
	void *cq_ctx;

	pair_open(&a, &b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	post_recv(&b, 1);
	ck_assert_int_eq(ibv_req_notify_cq(b.cq, 0), 0);
	p = (struct pollfd){ b.ch->fd, POLLIN, 0 };
	ck_assert_int_eq(poll(&p, 1, 100), 0);	/* nothing yet */
	ck_assert_int_eq(post_write(&a, 1, 0, 16, (uintptr_t)b.buf, b.mr->rkey,
	    a.mr->lkey, 7), 0);
	ck_assert_int_eq(poll(&p, 1, WAIT_MS), 1);
	ck_assert_int_eq(ibv_get_cq_event(b.ch, &cq, &cq_ctx), 0);
	ck_assert_ptr_eq(cq, b.cq);
	ck_assert_ptr_eq(cq_ctx, &b);
	ibv_ack_cq_events(cq, 1);
	ck_assert_uint_eq(ntohl(next_wc(&b).imm_data), 7);
	end_close(&a);
	end_close(&b);
}
END_TEST

/*
 * The peer is another process.  A write reaches it; then it stops, a
 * second write waits for its answer, and it is killed: that write
 * completes with RETRY_EXC_ERR, the posted receive is flushed, and the QP
 * is in error.
 */
struct addr {
	union ibv_gid	gid;
	uint32_t	qpn;
	uint32_t	rkey;
	uint64_t	base;
};

static void
peer_child(int up, int down)
{
	struct addr me, peer;
	struct end b;

	end_open(&b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	me = (struct addr){ b.gid, b.qp->qp_num, b.mr->rkey,
	    (uintptr_t)b.buf };
	if (write(up, &me, sizeof(me)) != (ssize_t)sizeof(me) ||
	    read(down, &peer, sizeof(peer)) != (ssize_t)sizeof(peer))
		_exit(1);
	end_connect(&b, &peer.gid, peer.qpn);
	if (write(up, &me, 1) != 1)
		_exit(1);
	/* Until killed, or the test's process is gone (EOF). */
	_exit(read(down, &me, 1) == 0 ? 0 : 1);
}

/* Our end a, connected to a peer_child, its pipes and its address. */
struct peer_proc {
	int		 up[2], down[2];
	pid_t		 pid;
	struct addr	 addr;
};

/*
 * a and a peer in another process, connected; a receive posted (id 11)
 * and a write (id 1) that reached the peer.
 */
static void
peer_start(struct end *a, struct peer_proc *pp)
{
	struct addr me;

	ck_assert_int_eq(pipe(pp->up), 0);
	ck_assert_int_eq(pipe(pp->down), 0);
	if ((pp->pid = fork()) == 0) {
		close(pp->down[1]);	/* so that its EOF means we are gone */
		peer_child(pp->up[1], pp->down[0]);
	}
	end_open(a, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ck_assert_int_eq(read(pp->up[0], &pp->addr, sizeof(pp->addr)),
	    sizeof(pp->addr));
	me = (struct addr){ a->gid, a->qp->qp_num, a->mr->rkey, 0 };
	ck_assert_int_eq(write(pp->down[1], &me, sizeof(me)), sizeof(me));
	end_connect(a, &pp->addr.gid, pp->addr.qpn);
	ck_assert_int_eq(read(pp->up[0], &me, 1), 1);	/* the peer is at RTS */
	post_recv(a, 11);
	ck_assert_int_eq(post_write(a, 1, 0, 8, pp->addr.base, pp->addr.rkey,
	    a->mr->lkey, -1), 0);
	ck_assert_int_eq(next_wc(a).status, IBV_WC_SUCCESS);
}

/* After the peer is gone: a is in error, and everything is closed. */
static void
peer_end(struct end *a, struct peer_proc *pp)
{
	ck_assert_int_eq(a->qp->state, IBV_QPS_ERR);
	end_close(a);
	close(pp->up[0]);
	close(pp->up[1]);
	close(pp->down[0]);
	close(pp->down[1]);
}

#define STOPPED_WRITES	64	/* of BUF: 16 MiB to a stopped peer */

START_TEST(test_peer_dies)
{
	struct peer_proc pp;
	struct end a;
	struct ibv_wc wc;
	int st;

	peer_start(&a, &pp);
	/*
	 * Stopped for sure before the writes: it can't answer them, nor read
	 * them.  Posting still never blocks (the test's timeout would say),
	 * far past what its socket holds.
	 */
	ck_assert_int_eq(kill(pp.pid, SIGSTOP), 0);
	ck_assert_int_eq(waitpid(pp.pid, &st, WUNTRACED), pp.pid);
	ck_assert(WIFSTOPPED(st));
	for (uint64_t id = 2; id < 2 + STOPPED_WRITES; id++)
		ck_assert_int_eq(post_write(&a, id, 0, BUF, pp.addr.base,
		    pp.addr.rkey, a.mr->lkey, -1), 0);
	ck_assert_int_eq(kill(pp.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pp.pid, NULL, 0), pp.pid);
	wc = next_wc(&a);
	ck_assert_uint_eq(wc.wr_id, 2);
	ck_assert_int_eq(wc.status, IBV_WC_RETRY_EXC_ERR);
	for (uint64_t id = 3; id < 2 + STOPPED_WRITES; id++) {
		wc = next_wc(&a);
		ck_assert_uint_eq(wc.wr_id, id);
		ck_assert_int_eq(wc.status, IBV_WC_WR_FLUSH_ERR);
	}
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_WR_FLUSH_ERR);
	ck_assert_uint_eq(wc.wr_id, 11);
	peer_end(&a, &pp);
}
END_TEST

/*
 * As on a device: the peer is killed while nothing of ours awaits its
 * answer.  The posted receive stays posted and
 * the QP ready (a receive learns nothing), until the next write finds the
 * peer gone: RETRY_EXC_ERR, then the receive flushed.
 */
#define SILENT_MS	300

START_TEST(test_peer_dies_silently)
{
	struct peer_proc pp;
	struct end a;
	struct ibv_wc wc;

	peer_start(&a, &pp);
	ck_assert_int_eq(kill(pp.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pp.pid, NULL, 0), pp.pid);
	usleep(SILENT_MS * 1000);
	ck_assert_int_eq(ibv_poll_cq(a.cq, 1, &wc), 0);
	ck_assert_int_eq(a.qp->state, IBV_QPS_RTS);
	ck_assert_int_eq(post_write(&a, 2, 0, 8, pp.addr.base, pp.addr.rkey,
	    a.mr->lkey, -1), 0);
	wc = next_wc(&a);
	ck_assert_uint_eq(wc.wr_id, 2);
	ck_assert_int_eq(wc.status, IBV_WC_RETRY_EXC_ERR);
	wc = next_wc(&a);
	ck_assert_uint_eq(wc.wr_id, 11);
	ck_assert_int_eq(wc.status, IBV_WC_WR_FLUSH_ERR);
	peer_end(&a, &pp);
}
END_TEST

/* No peer QP at that number: the write gives up with RETRY_EXC_ERR. */
START_TEST(test_no_peer)
{
	struct end a;
	struct ibv_wc wc;

	end_open(&a, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	end_connect(&a, &a.gid, a.qp->qp_num + 100);
	ck_assert_int_eq(post_write(&a, 2, 0, 8, 0, 0, a.mr->lkey, -1), 0);
	wc = next_wc(&a);
	ck_assert_int_eq(wc.status, IBV_WC_RETRY_EXC_ERR);
	ck_assert_int_eq(a.qp->state, IBV_QPS_ERR);
	end_close(&a);
}
END_TEST

/* Without MCCL_FAKEVERBS_DIR there is no device, as on a plain machine. */
START_TEST(test_no_device)
{
	struct ibv_device **list;
	int n = -1;

	unsetenv("MCCL_FAKEVERBS_DIR");
	list = ibv_get_device_list(&n);
	ck_assert_ptr_nonnull(list);
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_null(list[0]);
	ibv_free_device_list(list);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fakeverbs");
	TCase *tc = tcase_create("verbs");
	SRunner *sr;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_devices);
	tcase_add_test(tc, test_write_imm);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_bad_rkey);
	tcase_add_test(tc, test_past_the_region);
	tcase_add_test(tc, test_no_remote_write);
	tcase_add_test(tc, test_bad_lkey);
	tcase_add_test(tc, test_send);
	tcase_add_test(tc, test_channel);
	tcase_add_test(tc, test_peer_dies);
	tcase_add_test(tc, test_peer_dies_silently);
	tcase_add_test(tc, test_no_peer);
	suite_add_tcase(s, tc);
	tc = tcase_create("nodevice");
	tcase_add_test(tc, test_no_device);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
