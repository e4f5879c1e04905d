/*
 * test_rdma.c: the RDMA transport (daemon/transport/rdma.c) on the tests'
 * verbs provider: two ends of a link in one process, driven as the engine
 * drives them (send, recv, arm and poll), through the transport's table.
 */
#include <sys/socket.h>

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "transport/transport.h"

#define WAIT_MS		10000
#define RING		((size_t)1 << 20)	/* the peer's ring: 16 slots */
#define BIG		(3 * RING)

static char dir[] = "/tmp/test_rdma.XXXXXX";
static struct conf_node nodes[2] = { { .name = "a" }, { .name = "b" } };

/* What node 1 - node's link to node asks of the transport. */
static const struct link_want *
want_to(uint32_t node)
{
	static struct link_want w[2];

	w[node] = (struct link_want){ nodes[1 - node].name, nodes[node].name,
	    nodes[node].rdma_dev, LINK_ANY };
	return &w[node];
}

static void
setup(void)
{
	if (mkdtemp(dir) == NULL) {
		perror("test_rdma: mkdtemp");
		exit(1);
	}
	setenv("MCCL_FAKEVERBS_DIR", dir, 1);
	log_init(LOG_ERR, "test_rdma");
}

/* Unchecked: it runs in check's own process, even when a test failed. */
static void
teardown(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_rdma: cannot remove %s\n", dir);
	unsetenv("MCCL_FAKEVERBS_DIR");
}

static uint64_t
ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Both ends of one link: end 0 is node a's (to b), end 1 node b's. */
static void
pair_open(struct link *l[2])
{
	const struct transport *tp = &rdma_transport;
	struct peer_data_link m[2];
	char why[LINK_WHY_MAX] = "";
	void *half[2];
	int fds[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    fds), 0);
	for (int i = 0; i < 2; i++) {
		half[i] = tp->offer(want_to((uint32_t)(1 - i)), &m[i], why, sizeof(why));
		ck_assert_msg(half[i] != NULL, "offer: %s", why);
		ck_assert_uint_eq(m[i].transport, PEER_LINK_RDMA);
	}
	for (int i = 0; i < 2; i++) {
		l[i] = tp->join(half[i], fds[i], &m[1 - i], why, sizeof(why));
		ck_assert_msg(l[i] != NULL, "join: %s", why);
		l[i]->node = (uint32_t)(1 - i);
		ck_assert_str_eq(l[i]->device, "fake0:1");
	}
}

/* One direction of a transfer: what is left to send or to receive. */
struct flow {
	struct link	*l;
	const uint8_t	*src;		/* sending */
	uint8_t		*dst;		/* receiving */
	size_t		 len, done;
	size_t		 piece;		/* the sender cuts its iov at this */
	uint8_t		 hdr[16];	/* unregistered, in front of each piece */
};

/* Send: a header copy, then the next piece, again and again, as ring.c. */
static int
flow_send(struct flow *f)
{
	struct iovec iov[8];
	size_t off = f->done;
	int n = 0;
	ssize_t k;

	while (n < 8 && off < f->len) {
		size_t in = off % (f->piece + sizeof(f->hdr));

		if (in < sizeof(f->hdr)) {
			iov[n++] = (struct iovec){ f->hdr + in,
			    sizeof(f->hdr) - in };
			off += sizeof(f->hdr) - in;
		} else {
			size_t p = off / (f->piece + sizeof(f->hdr)), at =
			    p * f->piece + in - sizeof(f->hdr), left = f->piece -
			    (in - sizeof(f->hdr));

			if (left > f->len - off)
				left = f->len - off;
			iov[n++] = (struct iovec){ (void *)(uintptr_t)(f->src +
			    at), left };
			off += left;
		}
	}
	if (n == 0)
		return 0;
	if ((k = link_send(f->l, iov, n)) < 0)
		return errno == EAGAIN ? 0 : -1;
	f->done += (size_t)k;
	return 1;
}

static int
flow_recv(struct flow *f)
{
	ssize_t k;

	if (f->done == f->len)
		return 0;
	if ((k = link_recv(f->l, &(struct iovec){ f->dst + f->done,
	    f->len - f->done }, 1)) < 0)
		return errno == EAGAIN ? 0 : -1;
	f->done += (size_t)k;
	return 1;
}

/* Drive the flows until done, sleeping as the engine does; -1 on error. */
static int
pump(struct flow *tx, struct flow *rx, int n)
{
	uint64_t deadline = ms_now() + WAIT_MS;

	for (;;) {
		struct pollfd pfd[16];
		int moved = 0, done = 1, np = 0, k;

		for (int i = 0; i < n; i++) {
			if ((k = flow_send(&tx[i])) == -1 ||
			    flow_recv(&rx[i]) == -1)
				return -1;
			moved |= k;
			done &= tx[i].done == tx[i].len &&
			    rx[i].done == rx[i].len;
		}
		if (done)
			return 0;
		if (ms_now() > deadline)
			ck_abort_msg("transfer stalled");
		if (moved)
			continue;
		for (int i = 0; i < n; i++) {
			if (tx[i].done < tx[i].len) {
				if ((k = link_arm(tx[i].l, POLLOUT, pfd + np)) == 0)
					goto again;
				np += k;
			}
			if (rx[i].done < rx[i].len) {
				if ((k = link_arm(rx[i].l, POLLIN, pfd + np)) == 0)
					goto again;
				np += k;
			}
		}
		ck_assert_int_ge(poll(pfd, (nfds_t)np, 1000), 0);
again:
		;
	}
}

static uint8_t *
pattern(size_t len, unsigned seed)
{
	uint8_t *p = malloc(len);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)((i * 131 + seed * 7 + i / 4099) & 0xff);
	return p;
}

/* The stream a flow carries: its headers and pieces, in order. */
static uint8_t *
expected(const struct flow *f, size_t payload)
{
	uint8_t *e = malloc(f->len);
	size_t off = 0, at = 0;

	ck_assert_ptr_nonnull(e);
	while (off < f->len) {
		size_t k = sizeof(f->hdr);

		memcpy(e + off, f->hdr, k);
		off += k;
		k = f->piece < payload - at ? f->piece : payload - at;
		memcpy(e + off, f->src + at, k);
		off += k;
		at += k;
	}
	return e;
}

static size_t
stream_len(size_t payload, size_t piece)
{
	return payload + 16 * ((payload + piece - 1) / piece);
}

/*
 * Both directions at once, 3 MiB each way: registered memory goes as it
 * is, the unregistered headers staged or inline; credits come back as the
 * receiver reads; every byte arrives, in order.
 */
static void
transfer(size_t piece, int registered)
{
	struct link *l[2];
	struct flow tx[2], rx[2];
	uint8_t *src[2], *want[2];

	pair_open(l);
	for (int i = 0; i < 2; i++) {
		src[i] = pattern(BIG, (unsigned)i);
		if (registered)
			rdma_transport.mem_add(src[i], src[i], BIG);
		tx[i] = (struct flow){ .l = l[i], .src = src[i], .piece = piece,
		    .len = stream_len(BIG, piece) };
		memset(tx[i].hdr, 0xa0 + i, sizeof(tx[i].hdr));
		rx[i] = (struct flow){ .l = l[1 - i], .len = tx[i].len };
		ck_assert_ptr_nonnull(rx[i].dst = malloc(rx[i].len));
		want[i] = expected(&tx[i], BIG);
	}
	ck_assert_int_eq(pump(tx, rx, 2), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(memcmp(rx[i].dst, want[i], rx[i].len), 0);
		rdma_transport.mem_forget(src[i]);
		free(src[i]);
		free(want[i]);
		free(rx[i].dst);
	}
	link_close(l[0]);
	link_close(l[1]);
}

START_TEST(test_stream_registered)
{
	transfer(100000, 1);
}
END_TEST

START_TEST(test_stream_staged)
{
	transfer(100000, 0);
}
END_TEST

/* Pieces smaller than the inline limit: many writes, many credits. */
START_TEST(test_stream_small_pieces)
{
	struct link *l[2];
	struct flow tx, rx;
	uint8_t *src = pattern(65536, 3), *want;

	pair_open(l);
	tx = (struct flow){ .l = l[0], .src = src, .piece = 40,
	    .len = stream_len(65536, 40) };
	rx = (struct flow){ .l = l[1], .len = tx.len };
	ck_assert_ptr_nonnull(rx.dst = malloc(rx.len));
	want = expected(&tx, 65536);
	ck_assert_int_eq(pump(&tx, &rx, 1), 0);
	ck_assert_int_eq(memcmp(rx.dst, want, rx.len), 0);
	free(src);
	free(want);
	free(rx.dst);
	link_close(l[0]);
	link_close(l[1]);
}
END_TEST

/*
 * Memory that will not register (past the lock limit) is staged: the data
 * arrives all the same, and the log warns once, not per registration.
 */
START_TEST(test_registration_fails)
{
	char path[64], line[512];
	int warned = 0;
	FILE *f;

	/* Both ends' rings (4 MiB) fit; no 3 MiB source does. */
	setenv("MCCL_FAKEVERBS_MEMLOCK", "5242880", 1);
	snprintf(path, sizeof(path), "%s/log", dir);
	ck_assert_ptr_nonnull(freopen(path, "w", stderr));
	log_setlevel(LOG_WARNING);
	transfer(100000, 1);
	transfer(100000, 1);
	fflush(stderr);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		warned += strstr(line, "cannot register 3145728 bytes on "
		    "fake0:1 (Cannot allocate memory): data from there is "
		    "copied through staging slots instead") != NULL;
	fclose(f);
	ck_assert_int_eq(warned, 1);
}
END_TEST

/* Idle, arm() asks to sleep; data from the peer wakes the channel. */
START_TEST(test_arm_and_wake)
{
	struct link *l[2];
	struct pollfd pfd[2];
	uint8_t b[4] = { 1, 2, 3, 4 }, got[4];
	int n;

	pair_open(l);
	ck_assert_int_eq(n = link_arm(l[1], POLLIN, pfd), 2);
	ck_assert_int_eq(poll(pfd, (nfds_t)n, 0), 0);
	ck_assert_int_eq(link_recv(l[1], &(struct iovec){ got, 4 }, 1), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(link_send(l[0], &(struct iovec){ b, 4 }, 1), -1);
	ck_assert_int_eq(errno, EAGAIN);	/* posted: not done yet */
	ck_assert_int_eq(poll(pfd, (nfds_t)n, WAIT_MS), 1);
	ck_assert(pfd[1].revents & POLLIN);
	ck_assert_int_eq(link_recv(l[1], &(struct iovec){ got, 4 }, 1), 4);
	ck_assert_int_eq(memcmp(got, b, 4), 0);
	link_close(l[0]);
	link_close(l[1]);
}
END_TEST

/* Send buf until *done reaches upto, sleeping as the engine does. */
static void
send_until(struct link *l, const uint8_t *buf, size_t len, size_t *done,
    size_t upto)
{
	uint64_t deadline = ms_now() + WAIT_MS;
	struct pollfd pfd[2];
	ssize_t k;
	int n;

	while (*done < upto) {
		k = link_send(l, &(struct iovec){ (void *)(uintptr_t)(buf +
		    *done), len - *done }, 1);
		if (k > 0) {
			*done += (size_t)k;
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		ck_assert_msg(ms_now() < deadline, "send stalled at %zu", *done);
		if ((n = link_arm(l, POLLOUT, pfd)) > 0)
			ck_assert_int_ge(poll(pfd, (nfds_t)n, 100), 0);
	}
}

static void
recv_until(struct link *l, uint8_t *buf, size_t *done, size_t upto)
{
	uint64_t deadline = ms_now() + WAIT_MS;
	struct pollfd pfd[2];
	ssize_t k;
	int n;

	while (*done < upto) {
		k = link_recv(l, &(struct iovec){ buf + *done, upto - *done },
		    1);
		if (k > 0) {
			*done += (size_t)k;
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		ck_assert_msg(ms_now() < deadline, "recv stalled at %zu", *done);
		if ((n = link_arm(l, POLLIN, pfd)) > 0)
			ck_assert_int_ge(poll(pfd, (nfds_t)n, 100), 0);
	}
}

/*
 * Arm until arm() says to sleep, as the engine does: a 0 (look again) comes
 * once for the events of what went before.
 */
static int
arm_to_sleep(struct link *l, short want, struct pollfd *pfd)
{
	int n = 0;

	for (int tries = 0; tries < 4 && n == 0; tries++)
		n = link_arm(l, want, pfd);
	return n;
}

/* Two rings' worth from l[0] to l[1], the sender stalled for credits. */
struct stalled {
	struct link	*l[2];
	struct pollfd	 pfd[4];
	int		 n;		/* the sender's sleep, in pfd */
	uint8_t		*src, *dst;
	size_t		 len, sent, got;
};

/*
 * The sender fills every slot of the peer's ring and sleeps; the receiver
 * reads them all and gives them back; the credit's event wakes the sender.
 */
static void
stall_and_credit(struct stalled *t)
{
	t->len = 2 * RING;
	t->sent = t->got = 0;
	t->src = pattern(t->len, 3);
	ck_assert_ptr_nonnull(t->dst = malloc(t->len));
	pair_open(t->l);
	send_until(t->l[0], t->src, t->len, &t->sent, RING);
	ck_assert_int_eq(link_send(t->l[0], &(struct iovec){ t->src + t->sent,
	    t->len - t->sent }, 1), -1);
	ck_assert_int_eq(errno, EAGAIN);	/* every slot is the peer's */
	ck_assert_int_eq(t->n = arm_to_sleep(t->l[0], POLLOUT, t->pfd), 2);
	recv_until(t->l[1], t->dst, &t->got, RING);
	ck_assert_int_eq(poll(t->pfd, (nfds_t)t->n, WAIT_MS), 1);
	ck_assert(t->pfd[1].revents & POLLIN);
}

/* The rest goes through, every byte in order. */
static void
stalled_finish(struct stalled *t)
{
	send_until(t->l[0], t->src, t->len, &t->sent, t->len);
	recv_until(t->l[1], t->dst, &t->got, t->len);
	ck_assert_int_eq(memcmp(t->dst, t->src, t->len), 0);
	free(t->src);
	free(t->dst);
	link_close(t->l[0]);
	link_close(t->l[1]);
}

/*
 * Once the credit came, arm() says the sender can move, though arm()
 * itself took the credit from the queue and with it the channel's only
 * event.
 */
START_TEST(test_credit_wakes_sender)
{
	struct stalled t;

	stall_and_credit(&t);
	ck_assert_int_eq(link_arm(t.l[0], POLLOUT, t.pfd), 0);
	stalled_finish(&t);
}
END_TEST

/*
 * The engine arms a link's two directions one after the other.  A credit
 * that comes between them is taken by the second (POLLIN), which must then
 * not put the caller to sleep on a channel whose event it drained: either
 * it says "move", or the poll over both wakes.
 */
START_TEST(test_credit_between_arms)
{
	struct stalled t;
	int k;

	stall_and_credit(&t);
	k = link_arm(t.l[0], POLLIN, t.pfd + t.n);
	ck_assert_msg(k == 0 || poll(t.pfd, (nfds_t)(t.n + k), 1000) > 0,
	    "the second arm took the credit and drained its event: the "
	    "sender sleeps with room to send");
	stalled_finish(&t);
}
END_TEST

/* The peer's connection hangs up: arm's watch says so. */
START_TEST(test_hangup_watch)
{
	struct link *l[2];
	struct pollfd pfd[2];
	int n;

	pair_open(l);
	link_close(l[1]);
	ck_assert_int_ge(n = link_arm(l[0], POLLRDHUP, pfd), 1);
	ck_assert_int_eq(poll(pfd, (nfds_t)n, WAIT_MS), 1);
	ck_assert(pfd[0].events & POLLRDHUP);
	ck_assert(pfd[0].revents & (POLLRDHUP | POLLHUP));
	link_close(l[0]);
}
END_TEST

/* Writes to a peer that is gone fail the link, in the verbs' words. */
START_TEST(test_peer_gone)
{
	struct link *l[2];
	uint8_t *b = pattern(1 << 20, 5);
	struct flow tx;
	char why[LINK_WHY_MAX + 32];
	uint64_t deadline = ms_now() + WAIT_MS;
	int rc;

	pair_open(l);
	link_close(l[1]);
	tx = (struct flow){ .l = l[0], .src = b, .piece = 1 << 20,
	    .len = stream_len(1 << 20, 1 << 20) };
	while ((rc = flow_send(&tx)) >= 0 && ms_now() < deadline)
		usleep(1000);
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(errno, EIO);
	link_strerror(l[0], errno, why, sizeof(why));
	ck_assert_msg(strstr(why, "fake0:1") != NULL &&
	    strstr(why, "verbs status") != NULL, "%s", why);
	/* And every call after says the same. */
	ck_assert_int_eq(link_send(l[0], &(struct iovec){ b, 1 }, 1), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(link_arm(l[0], POLLIN, (struct pollfd[2]){ 0 }), 0);
	free(b);
	link_close(l[0]);
}
END_TEST

/* A set-up from a peer that is not ours is refused, and nothing leaks. */
START_TEST(test_join_refuses)
{
	struct peer_data_link m, bad;
	char why[LINK_WHY_MAX] = "";
	void *half;
	int fds[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	ck_assert_ptr_nonnull(half = rdma_transport.offer(want_to(1), &m, why,
	    sizeof(why)));
	bad = m;
	bad.ring_bytes = 4096;
	ck_assert_ptr_null(rdma_transport.join(half, fds[0], &bad, why,
	    sizeof(why)));
	ck_assert_msg(strstr(why, "not ours") != NULL, "%s", why);
	ck_assert_int_eq(close(fds[0]), -1);	/* the link took it */
	close(fds[1]);
}
END_TEST

/* No device: the offer says why; a named device that is not there too. */
START_TEST(test_no_device)
{
	struct peer_data_link m;
	char why[LINK_WHY_MAX] = "";

	strcpy(nodes[1].rdma_dev, "mlx5_7");
	ck_assert_ptr_null(rdma_transport.offer(want_to(1), &m, why, sizeof(why)));
	ck_assert_str_eq(why, "no RDMA device \"mlx5_7\" on this node");
	strcpy(nodes[1].rdma_dev, "fake0:2");
	ck_assert_ptr_null(rdma_transport.offer(want_to(1), &m, why, sizeof(why)));
	ck_assert_msg(strstr(why, "port 2") != NULL, "%s", why);
	nodes[1].rdma_dev[0] = '\0';
}
END_TEST

/* A machine without RDMA (the device list is read once, as libibverbs). */
START_TEST(test_no_device_at_all)
{
	struct peer_data_link m;
	char why[LINK_WHY_MAX] = "";

	unsetenv("MCCL_FAKEVERBS_DIR");
	ck_assert_ptr_null(rdma_transport.offer(want_to(1), &m, why, sizeof(why)));
	ck_assert_str_eq(why, "no RDMA device on this node");
}
END_TEST

static Suite *
rdma_suite(void)
{
	Suite *s = suite_create("rdma");
	TCase *tc = tcase_create("link");

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_stream_registered);
	tcase_add_test(tc, test_stream_staged);
	tcase_add_test(tc, test_stream_small_pieces);
	tcase_add_test(tc, test_registration_fails);
	tcase_add_test(tc, test_arm_and_wake);
	tcase_add_test(tc, test_credit_wakes_sender);
	tcase_add_test(tc, test_credit_between_arms);
	tcase_add_test(tc, test_hangup_watch);
	tcase_add_test(tc, test_peer_gone);
	tcase_add_test(tc, test_join_refuses);
	tcase_add_test(tc, test_no_device);
	tcase_add_test(tc, test_no_device_at_all);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(rdma_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
