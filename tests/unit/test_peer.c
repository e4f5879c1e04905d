/*
 * test_peer.c: the control connections between daemons (control/peer.c),
 * from node 0's side, in the test's event loop.  Node 1 is the test: it
 * listens where the settings say, answers node 0's connection as a daemon
 * would (the acceptor's half of authentication, HELLO), and then speaks
 * frames.  Checked: the handshake brings the peer up and tells the
 * watcher; a HELLO of another cluster is refused; frames of a registered
 * type reach their handler, others end the connection, and the watcher
 * hears it go down; heartbeats are sent and timed; a silent peer is
 * declared down within the heartbeat timeout; peer_send reaches node 1.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "ctltest.h"
#include "testlib.h"

#define WAIT_MS		5000	/* anything the test waits for, at most */
#define HASH		0x5eed5eedULL

/* ---- the parts around peer.c, faked ---- */

uint64_t data_bytes(uint32_t node, int way) { (void)node; (void)way; return 0; }

void
link_peer_info(uint32_t node, char *tp, size_t tplen, char *dev,
    size_t devlen)
{
	(void)node;
	snprintf(tp, tplen, "%s", "");
	snprintf(dev, devlen, "%s", "");
}

static int ups, downs, frames_in;
static char down_why[ERR_MAX];
static uint16_t frame_type;
static uint32_t frame_from;

static void watch_up(uint32_t node) { ck_assert_uint_eq(node, 1); ups++; }

static void
watch_down(uint32_t node, const char *why)
{
	ck_assert_uint_eq(node, 1);
	snprintf(down_why, sizeof(down_why), "%s", why);
	downs++;
}

static int
take_frame(uint32_t from, uint16_t type, const void *msg,
    const uint8_t *trailer, size_t tlen)
{
	(void)msg; (void)trailer; (void)tlen;
	frame_from = from;
	frame_type = type;
	frames_in++;
	return 0;
}

/* ---- node 0: peer.c, on settings of two nodes ---- */

static struct config settings;
static struct conf_node nodes[2] = { { .name = "n0" }, { .name = "n1" } };
static int listen1 = -1;	/* node 1's peer port: the test's */

static int
listen_on(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, 4) == -1) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

/* peer_init as node 0 of n0 (listening) and n1 (the test's port). */
static void
node0_up(uint32_t heartbeat_ms, uint32_t timeout_ms)
{
	char err[ERR_MAX] = "", sock[128];
	int rc = -1;

	snprintf(settings.node_name, sizeof(settings.node_name), "n0");
	settings.node_index = 0;
	settings.nodes = nodes;
	settings.nnodes = 2;
	settings.cluster_hash = HASH;
	settings.connect_timeout_ms = 3000;
	settings.heartbeat_interval_ms = heartbeat_ms;
	settings.heartbeat_timeout_ms = timeout_ms;
	settings.heartbeat_mesh_max_nodes = 64;
	settings.nlisten = 1;
	snprintf(sock, sizeof(sock), "%s/mccld.sock", test_dir);
	ck_assert_msg(auth_init("", sock, err, sizeof(err)) == 0, "%s", err);
	ctltest_init(&settings, NULL);
	peer_handle(PEER_JOB_QUERY, take_frame);
	peer_watch(&(struct peer_watcher){ watch_up, watch_down, NULL,
	    NULL });
	for (int i = 0; i < 50 && listen1 == -1; i++) {
		uint16_t p1 = test_port(2 * i);

		if ((listen1 = listen_on(p1)) == -1)
			continue;
		for (int k = 0; k < 2; k++)
			snprintf(nodes[k].addr.host, sizeof(nodes[k].addr.host),
			    "127.0.0.1");
		nodes[0].addr.port = test_port(2 * i + 1);
		nodes[1].addr.port = p1;
		settings.listen[0] = nodes[0].addr;
		if ((rc = peer_init(err, sizeof(err))) == -1) {
			peer_close();
			close(listen1);
			listen1 = -1;
		}
	}
	ck_assert_msg(rc == 0, "%s", err);
}

static void
node0_down(void)
{
	peer_close();
	close(listen1);
	listen1 = -1;
	ctltest_end();
}

/* Turn node 0's loop until *flag reaches want, for up to ms. */
static int
turn_until(const int *flag, int want, int ms)
{
	uint64_t until = ms_from_now((uint64_t)ms);

	while (*flag < want && now_ns() < until) {
		event_base_loop(ctl_base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	return *flag >= want;
}

/* Turn the loop until fd has something to read (or its peer closed). */
static int
turn_until_readable(int fd, int ms)
{
	uint64_t until = ms_from_now((uint64_t)ms);
	struct pollfd pfd = { fd, POLLIN, 0 };

	while (now_ns() < until) {
		event_base_loop(ctl_base, EVLOOP_NONBLOCK);
		if (poll(&pfd, 1, 1) == 1)
			return 1;
	}
	return 0;
}

/* ---- node 1: the test, as a daemon's acceptor ---- */

/* Read one frame of type (fixed length) once the loop has sent it. */
static void
read_frame(int fd, uint16_t type, void *msg)
{
	char err[ERR_MAX];

	ck_assert_msg(turn_until_readable(fd, WAIT_MS), "no frame %u", type);
	ck_assert_msg(dial_frame_read(fd, type, msg, -1, ms_from_now(WAIT_MS),
	    err, sizeof(err)) == 0, "frame %u: %s", type, err);
}

/* Accept node 0's connection and greet it as node 1 with hash; the fd. */
static int
accept_node0(uint64_t hash)
{
	struct peer_auth_hello ah;
	struct peer_auth_challenge c = { 1, { 0 }, { 0 } };
	struct peer_auth_response r;
	struct peer_hello theirs, ours = { PEER_VERSION, 1, 2, hash, "n1" };
	int fd;

	ck_assert(turn_until_readable(listen1, WAIT_MS));
	fd = accept4(listen1, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	read_frame(fd, PEER_AUTH_HELLO, &ah);
	ck_assert_uint_eq(ah.node, 0);
	auth_nonce(c.nonce);
	auth_mac(c.mac, 'A', ah.nonce, c.nonce, 1);
	ck_assert_int_eq(dial_frame_send(fd, PEER_AUTH_CHALLENGE, &c), 0);
	read_frame(fd, PEER_AUTH_RESPONSE, &r);
	ck_assert_int_eq(auth_check(r.mac, 'C', c.nonce, ah.nonce, 0), 0);
	read_frame(fd, PEER_HELLO, &theirs);
	ck_assert_uint_eq(theirs.node_index, 0);
	ck_assert_uint_eq(theirs.cluster_hash, HASH);
	ck_assert_str_eq(theirs.node_name, "n0");
	ck_assert_int_eq(dial_frame_send(fd, PEER_HELLO, &ours), 0);
	return fd;
}

/* ---- the cases ---- */

START_TEST(the_handshake_brings_the_peer_up)
{
	int fd;

	node0_up(300, 60000);	/* never silent within the test */
	ck_assert_int_eq(peer_is_up(1), 0);
	fd = accept_node0(HASH);
	ck_assert(turn_until(&ups, 1, WAIT_MS));
	ck_assert_int_eq(peer_is_up(1), 1);
	ck_assert_int_ge(ctltest_status_changes, 1);
	ck_assert_str_eq(peer_name(1), "n1");
	close(fd);
	ck_assert(turn_until(&downs, 1, WAIT_MS));	/* and it went */
	ck_assert_msg(strstr(down_why, "closed") != NULL, "%s", down_why);
	ck_assert_int_eq(peer_is_up(1), 0);
	node0_down();
}
END_TEST

START_TEST(another_clusters_hello_is_refused)
{
	int fd;
	char buf[64];

	node0_up(300, 3000);
	fd = accept_node0(HASH + 1);
	/* node 0 hangs up on it, and never calls it up */
	ck_assert(turn_until_readable(fd, WAIT_MS));
	ck_assert_int_le(read(fd, buf, sizeof(buf)), 0);
	ck_assert_int_eq(ups, 0);
	ck_assert_int_eq(peer_is_up(1), 0);
	close(fd);
	node0_down();
}
END_TEST

START_TEST(frames_reach_their_handler_others_end_the_link)
{
	struct peer_job_query q;
	struct peer_check_done cd;
	int fd;

	node0_up(300, 60000);	/* never silent within the test */
	fd = accept_node0(HASH);
	ck_assert(turn_until(&ups, 1, WAIT_MS));
	memset(&q, 0, sizeof(q));
	ck_assert_int_eq(dial_frame_send(fd, PEER_JOB_QUERY, &q), 0);
	ck_assert(turn_until(&frames_in, 1, WAIT_MS));
	ck_assert_uint_eq(frame_from, 1);
	ck_assert_uint_eq(frame_type, PEER_JOB_QUERY);
	/* a type no part registered: the connection ends, the watcher hears */
	memset(&cd, 0, sizeof(cd));
	ck_assert_int_eq(dial_frame_send(fd, PEER_CHECK_DONE, &cd), 0);
	ck_assert(turn_until(&downs, 1, WAIT_MS));
	ck_assert_str_eq(down_why, "protocol error (see the log)");
	ck_assert_int_eq(frames_in, 1);
	ck_assert_int_eq(peer_is_up(1), 0);
	close(fd);
	node0_down();
}
END_TEST

/* Node 0 pings; the answer times the round trip; peer_send reaches us. */
START_TEST(heartbeats_are_sent_and_timed)
{
	struct peer_ping ping;
	struct peer_stats st;
	struct peer_job_query q = { 0 };
	int fd;

	node0_up(100, 3000);
	fd = accept_node0(HASH);
	ck_assert(turn_until(&ups, 1, WAIT_MS));
	read_frame(fd, PEER_PING, &ping);
	ck_assert_int_eq(dial_frame_send(fd, PEER_PONG, &ping), 0);
	for (int i = 0; i < WAIT_MS && (peer_stats(1, &st), st.rtt_ns == 0);
	    i++) {
		event_base_loop(ctl_base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	ck_assert_uint_gt(st.rtt_ns, 0);
	ck_assert_uint_lt(st.rtt_ns, (uint64_t)WAIT_MS * 1000000);
	ck_assert_int_eq(st.up, 1);
	ck_assert_uint_gt(st.ctl_tx, 0);
	ck_assert_uint_gt(st.ctl_rx, 0);
	ck_assert_int_eq(peer_stats(0, &st), -1);	/* not of itself */
	ck_assert_int_eq(peer_send(1, PEER_JOB_QUERY, &q, NULL, 0), 0);
	for (int n = 0; n < 20; n++) {	/* past the pings, our query */
		uint8_t hdr[WIRE_HDR_LEN];
		struct wire_hdr h;
		const struct wire_type *t;
		uint8_t body[512];
		char err[ERR_MAX];

		ck_assert(turn_until_readable(fd, WAIT_MS));
		ck_assert_int_eq(read(fd, hdr, sizeof(hdr)), sizeof(hdr));
		ck_assert_msg(wire_hdr_check(&peer_proto, hdr, &h, &t, err,
		    sizeof(err)) == 0, "%s", err);
		ck_assert_uint_le(h.len, sizeof(body));
		ck_assert_int_eq(read(fd, body, h.len), (ssize_t)h.len);
		if (h.type == PEER_JOB_QUERY)
			break;
		ck_assert_uint_eq(h.type, PEER_PING);
		ck_assert_int_lt(n, 19);
	}
	close(fd);
	node0_down();
}
END_TEST

/* A peer that says nothing past heartbeat_timeout_ms is down. */
START_TEST(a_silent_peer_is_declared_down)
{
	int fd;
	uint64_t up_ns;

	node0_up(100, 600);
	fd = accept_node0(HASH);
	ck_assert(turn_until(&ups, 1, WAIT_MS));
	up_ns = now_ns();
	ck_assert(turn_until(&downs, 1, WAIT_MS));
	ck_assert_uint_ge(now_ns() - up_ns, 500ULL * 1000000);
	ck_assert_msg(strstr(down_why, "silent") != NULL ||
	    strstr(down_why, "heartbeat") != NULL, "%s", down_why);
	close(fd);
	node0_down();
}
END_TEST

static void
setup(void)
{
	memset(&settings, 0, sizeof(settings));
	ups = downs = frames_in = 0;
	down_why[0] = '\0';
}

int
main(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("peer");

	log_init(LOG_ERR, "test_peer");
	tcase_set_timeout(tc, 60);
	test_dir_fixture(tc, "test_peer");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, the_handshake_brings_the_peer_up);
	tcase_add_test(tc, another_clusters_hello_is_refused);
	tcase_add_test(tc, frames_reach_their_handler_others_end_the_link);
	tcase_add_test(tc, heartbeats_are_sent_and_timed);
	tcase_add_test(tc, a_silent_peer_is_declared_down);
	suite_add_tcase(s, tc);
	return test_run(s);
}
