/*
 * test_check.c: mcclctl check's data path (engine/check.c) between two
 * nodes in one process.  Node "a" measures with check_measure_start; node
 * "b" is a peer port on loopback that authenticates the links as peer.c
 * does, reads DATA_HELLO and hands each link to check_serve.  Over TCP and
 * over RDMA (the tests' verbs provider): round trips and both directions
 * measured on several links, a busy peer's refusal, a peer not there, an
 * abort, the servers stopped under a running measurement.
 */
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/check.h"
#include "log.h"
#include "transport/transport.h"
#include "mccl.h"
#include "testlib.h"

#define NODE_A		0
#define NODE_B		1
#define WAIT_MS		30000	/* a measurement's end, at the latest */

static char dir[64];		/* the host key; the fake verbs' files */
static int over_rdma;

/* ---- node b's peer port ---- */

static int listen_fd = -1;
static uint16_t listen_port;
static uint32_t served_busy;	/* what check_serve is told */
static pthread_t acceptor;
static int acceptor_quit_fd = -1;

/* The acceptor's half of authentication (peer.c's), then DATA_HELLO. */
static int
accept_link(int fd, char *err, size_t errlen)
{
	uint64_t deadline = ms_from_now(5000);
	struct peer_auth_hello h;
	struct peer_auth_challenge c = { NODE_B, { 0 }, { 0 } };
	struct peer_auth_response r;
	struct peer_data_hello dh;

	if (dial_frame_read(fd, PEER_AUTH_HELLO, &h, -1, deadline, err,
	    errlen) == -1)
		return -1;
	auth_nonce(c.nonce);
	auth_mac(c.mac, 'A', h.nonce, c.nonce, NODE_B);
	if (dial_frame_send(fd, PEER_AUTH_CHALLENGE, &c) == -1 ||
	    dial_frame_read(fd, PEER_AUTH_RESPONSE, &r, -1, deadline, err,
	    errlen) == -1)
		return -1;
	if (auth_check(r.mac, 'C', c.nonce, h.nonce, h.node) == -1) {
		snprintf(err, errlen, "authentication failed");
		return -1;
	}
	if (dial_frame_read(fd, PEER_DATA_HELLO, &dh, -1, deadline, err,
	    errlen) == -1)
		return -1;
	if ((dh.job_id & PEER_CHECK_JOB) == 0 || dh.node != NODE_A) {
		snprintf(err, errlen, "DATA_HELLO of job %llx from node %u",
		    (unsigned long long)dh.job_id, dh.node);
		return -1;
	}
	return 0;
}

/* What b knows of a: the check_peer control/check.c would fill in. */
static struct check_peer
peer_a(void)
{
	struct check_peer p = { .node = NODE_A, .me_index = NODE_B,
	    .choice = over_rdma ? LINK_RDMA : LINK_TCP,
	    .connect_timeout_ms = 5000 };

	snprintf(p.name, sizeof(p.name), "a");
	snprintf(p.me, sizeof(p.me), "b");
	return p;
}

static void *
acceptor_main(void *arg)
{
	struct pollfd pfd[2] = { { listen_fd, POLLIN, 0 },
	    { acceptor_quit_fd, POLLIN, 0 } };
	struct check_peer a = peer_a();
	char err[ERR_MAX];
	int fd;

	(void)arg;
	while (poll(pfd, 2, -1) >= 0 && !(pfd[1].revents & POLLIN)) {
		if ((fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK |
		    SOCK_CLOEXEC)) == -1)
			continue;
		if (accept_link(fd, err, sizeof(err)) == -1) {
			fprintf(stderr, "test_check: a link: %s\n", err);
			close(fd);
		} else if (check_serve(fd, &a, served_busy, err,
		    sizeof(err)) == -1)
			fprintf(stderr, "test_check: check_serve: %s\n", err);
	}
	return NULL;
}

static void
peer_port_open(uint32_t busy)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	served_busy = busy;
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(listen_fd, 0);
	/* Port 0: the kernel's free one, which no other test can hold. */
	ck_assert_int_eq(bind(listen_fd, (struct sockaddr *)&sin,
	    sizeof(sin)), 0);
	ck_assert_int_eq(listen(listen_fd, 16), 0);
	ck_assert_int_eq(getsockname(listen_fd, (struct sockaddr *)&sin,
	    &len), 0);
	listen_port = ntohs(sin.sin_port);
	acceptor_quit_fd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(acceptor_quit_fd, 0);
	ck_assert_int_eq(pthread_create(&acceptor, NULL, acceptor_main,
	    NULL), 0);
}

static void
peer_port_close(void)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(acceptor_quit_fd, &one, sizeof(one)),
	    sizeof(one));
	pthread_join(acceptor, NULL);
	close(acceptor_quit_fd);
	close(listen_fd);
	listen_fd = acceptor_quit_fd = -1;
	check_shutdown();
}

/* ---- node a's measurement ---- */

static void
measure_init(struct check_measure *m, uint16_t port, uint32_t lanes,
    uint32_t ms)
{
	memset(m, 0, sizeof(*m));
	m->peer = (struct check_peer){ .node = NODE_B, .me_index = NODE_A,
	    .choice = over_rdma ? LINK_RDMA : LINK_TCP,
	    .connect_timeout_ms = 5000 };
	snprintf(m->peer.name, sizeof(m->peer.name), "b");
	snprintf(m->peer.me, sizeof(m->peer.me), "a");
	snprintf(m->peer.addr.host, sizeof(m->peer.addr.host), "127.0.0.1");
	m->peer.addr.port = port;
	m->link_id = PEER_CHECK_JOB | 1;
	m->lanes = lanes;
	m->ms = ms;
	m->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(m->done_fd, 0);
}

/* Whether the measurement said it ended within ms. */
static int
ended_within(struct check_measure *m, int ms)
{
	struct pollfd pfd = { m->done_fd, POLLIN, 0 };

	return poll(&pfd, 1, ms) == 1;
}

/* Start m, wait for its end (at most WAIT_MS), and join it. */
static void
measure_run(struct check_measure *m)
{
	char err[ERR_MAX];

	ck_assert_msg(check_measure_start(m, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert_msg(ended_within(m, WAIT_MS), "no end within %d ms",
	    WAIT_MS);
	check_measure_end(m);
	close(m->done_fd);
}

/* Start a measurement as long as a check may be, still running 300 ms on. */
static void
measure_long(struct check_measure *m)
{
	char err[ERR_MAX];

	peer_port_open(0);
	measure_init(m, listen_port, 2, PEER_CHECK_MS_MAX);
	ck_assert_msg(check_measure_start(m, err, sizeof(err)) == 0, "%s",
	    err);
	ck_assert(!ended_within(m, 300));
}

/* ---- the cases ---- */

START_TEST(test_measures_both_ways)
{
	struct check_measure m;
	const uint32_t ms = 200;

	peer_port_open(0);
	measure_init(&m, listen_port, 3, ms);
	measure_run(&m);
	ck_assert_msg(m.code == 0, "code %d: %s", m.code, m.err);
	ck_assert_uint_gt(m.rtt_ns, 0);
	ck_assert_uint_lt(m.rtt_ns, 1000000000ULL);
	/* Each way streamed for about ms, and carried records. */
	ck_assert_uint_gt(m.tx_bytes, 0);
	ck_assert_uint_gt(m.rx_bytes, 0);
	ck_assert_uint_ge(m.tx_ns, ms * 1000000ULL / 2);
	ck_assert_uint_ge(m.rx_ns, ms * 1000000ULL / 2);
	ck_assert_uint_lt(m.tx_ns, 10ULL * ms * 1000000);
	ck_assert_uint_lt(m.rx_ns, 10ULL * ms * 1000000);
	peer_port_close();
}
END_TEST

START_TEST(test_busy_peer_refuses)
{
	struct check_measure m;

	peer_port_open(2);
	measure_init(&m, listen_port, 1, 100);
	measure_run(&m);
	ck_assert_int_eq(m.code, MCCL_ERR_PERMISSION);
	ck_assert_msg(strstr(m.err, "node b runs 2 jobs: not measured") !=
	    NULL, "%s", m.err);
	ck_assert_uint_eq(m.tx_bytes, 0);
	peer_port_close();
}
END_TEST

START_TEST(test_no_peer)
{
	struct check_measure m;
	uint16_t port;

	/* A port that was free a moment ago and has no listener now. */
	peer_port_open(0);
	port = listen_port;
	peer_port_close();
	measure_init(&m, port, 2, 100);
	measure_run(&m);
	ck_assert_int_eq(m.code, MCCL_ERR_CONNECT);
	ck_assert_msg(strncmp(m.err, "data link 0: ", 13) == 0, "%s", m.err);
}
END_TEST

/* check_measure_end under a running measurement stops it at once. */
START_TEST(test_abort)
{
	struct check_measure m;

	measure_long(&m);
	check_measure_end(&m);
	ck_assert(ended_within(&m, 0));
	ck_assert_int_ne(m.code, 0);
	ck_assert_str_ne(m.err, "");
	close(m.done_fd);
	peer_port_close();
}
END_TEST

/* check_shutdown at b (its daemon exits) ends a's measurement with why. */
START_TEST(test_servers_stop)
{
	struct check_measure m;

	measure_long(&m);
	peer_port_close();		/* check_shutdown joins b's servers */
	ck_assert_msg(ended_within(&m, WAIT_MS), "no end within %d ms",
	    WAIT_MS);
	check_measure_end(&m);
	close(m.done_fd);
	ck_assert_int_eq(m.code, MCCL_ERR_PEER_FAILED);
	ck_assert_msg(strstr(m.err, "link") != NULL, "%s", m.err);
}
END_TEST

static void
setup(void)
{
	char err[ERR_MAX], sock[128];

	test_dir_make(dir, sizeof(dir), "test_check");
	/* No key file: the host key beside a socket path in dir. */
	snprintf(sock, sizeof(sock), "%s/mccld.sock", dir);
	if (auth_init("", sock, err, sizeof(err)) == -1) {
		fprintf(stderr, "test_check: %s\n", err);
		exit(1);
	}
	setenv("MCCL_FAKEVERBS_DIR", dir, 1);
}

static void
teardown(void)
{
	unsetenv("MCCL_FAKEVERBS_DIR");
	test_dir_remove(dir);
}

static void rdma_on(void) { setup(); over_rdma = 1; }
static void rdma_off(void) { over_rdma = 0; teardown(); }

static void
add_cases(TCase *tc)
{
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_measures_both_ways);
	tcase_add_test(tc, test_busy_peer_refuses);
	tcase_add_test(tc, test_no_peer);
	tcase_add_test(tc, test_abort);
	tcase_add_test(tc, test_servers_stop);
}

int
main(void)
{
	Suite *s = suite_create("check");
	TCase *tcp = tcase_create("tcp"), *rdma = tcase_create("rdma");

	log_init(LOG_ERR, "test_check");
	tcase_add_unchecked_fixture(tcp, setup, teardown);
	add_cases(tcp);
	suite_add_tcase(s, tcp);
	tcase_add_unchecked_fixture(rdma, rdma_on, rdma_off);
	add_cases(rdma);
	suite_add_tcase(s, rdma);
	return test_run(s);
}
