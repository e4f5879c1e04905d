/*
 * fuzz_peer.c: libFuzzer target for the daemon-to-daemon protocol.  The
 * input is what arrives on a TCP connection, read as the daemon reads it
 * (daemon/control/peer.c):
 *   - by the acceptor of a connection, before it knows what it is: one
 *     frame at a time, at most INBOUND_MAX body bytes, each of a type the
 *     state allows: AUTH_HELLO, AUTH_RESPONSE (with a cluster key), then
 *     HELLO or DATA_HELLO (inbound_read_cb, inbound_dispatch); with and
 *     without a key, taking every MAC as good;
 *   - by the connector of a data link, expecting the AUTH_CHALLENGE in
 *     exactly its size (data_auth);
 *   - as a control connection: consecutive frames, each at most
 *     PEER_MSG_MAX, decoded until one fails (peer_read_cb, peer_frame), then
 *     the trailer rules of job.c for JOIN and FORMED and the text of the
 *     others (job_peer_msg, coord_join, job_recv_formed).
 */
#include <limits.h>
#include <string.h>

#include "fuzz.h"
#include "peer.h"

#define INBOUND_MAX	256	/* as in daemon/control/peer.c */

/* What peer_frame() decodes into. */
union peer_daemon_msg {
	struct peer_hello		hello;
	struct peer_ping		ping;
	struct peer_auth_challenge	challenge;
	uint8_t				raw[512];
};

/* What inbound_dispatch() decodes into. */
union peer_inbound_msg {
	struct peer_hello		hello;
	struct peer_data_hello		data;
	struct peer_auth_hello		auth_hello;
	struct peer_auth_response	auth_response;
};

/* Where an accepted connection is: peer.c's enum inbound_state. */
enum inbound_state { IN_AUTH_HELLO, IN_AUTH_RESPONSE, IN_FIRST, IN_DONE };

/* inbound_expects(): the frame types each state accepts. */
static int
inbound_expects(enum inbound_state state, uint16_t type)
{
	switch (state) {
	case IN_AUTH_HELLO: return type == PEER_AUTH_HELLO;
	case IN_AUTH_RESPONSE: return type == PEER_AUTH_RESPONSE;
	case IN_FIRST: return type == PEER_HELLO || type == PEER_DATA_HELLO;
	case IN_DONE: break;
	}
	return 0;
}

/* One frame of an accepted connection at buf; its length, or 0 to close. */
static size_t
inbound_frame(enum inbound_state state, const uint8_t *buf, size_t n)
{
	union peer_inbound_msg msg;
	struct fuzz_frame f;

	if (n < WIRE_HDR_LEN || fuzz_hdr_check(&peer_proto, buf, &f) == -1 ||
	    !inbound_expects(state, f.hdr.type) || f.hdr.len > INBOUND_MAX ||
	    n - WIRE_HDR_LEN < f.hdr.len)
		return 0;
	if (fuzz_decode(&peer_proto, buf, WIRE_HDR_LEN + f.hdr.len, &f, &msg,
	    sizeof(msg)) == -1)
		return 0;
	return WIRE_HDR_LEN + f.hdr.len;
}

/* An accepted connection, from state, until it is handed over or closed. */
static void
inbound(enum inbound_state state, const uint8_t *buf, size_t n)
{
	size_t off = 0, len;

	while (state != IN_DONE &&
	    (len = inbound_frame(state, buf + off, n - off)) > 0) {
		off += len;
		state = (enum inbound_state)(state + 1);
	}
}

/* data_auth(): exactly one AUTH_CHALLENGE frame's bytes, then decode. */
static void
data_auth(const uint8_t *buf, size_t n)
{
	struct peer_auth_challenge *c;
	struct fuzz_frame f;
	size_t want = WIRE_HDR_LEN + wire_fixed_len(wire_type_lookup(
	    &peer_proto, PEER_AUTH_CHALLENGE));

	if (n < want || fuzz_hdr_check(&peer_proto, buf, &f) == -1 ||
	    f.hdr.type != PEER_AUTH_CHALLENGE)
		return;
	FUZZ_CHECK(WIRE_HDR_LEN + f.hdr.len == want);
	if ((c = malloc(sizeof(*c))) == NULL)
		abort();
	fuzz_decode(&peer_proto, buf, want, &f, c, sizeof(*c));
	free(c);
}

/* The trailer, copied to exactly its size so that overreads show. */
static uint8_t *
trailer_copy(const struct fuzz_frame *f)
{
	uint8_t *copy;

	if ((copy = malloc(f->trailer_len > 0 ? f->trailer_len : 1)) == NULL)
		abort();
	if (f->trailer_len > 0)
		memcpy(copy, f->trailer, f->trailer_len);
	return copy;
}

/*
 * Read n u32s from a trailer the daemon found long enough, as coord_join()
 * and job_recv_formed() do; the trailer is an exact-size copy, so reading
 * past it shows.
 */
static void
read_u32s(const uint8_t *trailer, size_t tlen, uint32_t n)
{
	uint32_t *v;

	FUZZ_CHECK((uint64_t)n * 4 == tlen);
	FUZZ_CHECK(n <= PEER_RANKS_MAX);
	if ((v = calloc((size_t)n + 1, sizeof(*v))) == NULL)
		abort();
	wire_get_u32s(v, trailer, n);
	free(v);
}

/* coord_join() and job_recv_formed(): the lengths they accept. */
static void
job_trailer(const struct fuzz_frame *f, const void *msg, const uint8_t *t)
{
	const struct peer_join *j = msg;
	const struct peer_formed *fm = msg;

	if (f->hdr.type == PEER_JOIN && f->trailer_len ==
	    (size_t)j->nlocal * 4 && j->nranks != 0 &&
	    j->nranks <= PEER_RANKS_MAX)
		read_u32s(t, f->trailer_len, j->nlocal);
	else if (f->hdr.type == PEER_FORMED && fm->nranks != 0 &&
	    f->trailer_len == (size_t)fm->nranks * 4)
		read_u32s(t, f->trailer_len, fm->nranks);
}

/* job_peer_msg(): every job message's trailer is also printed as text. */
static void
job_msg(const struct fuzz_frame *f, const void *msg)
{
	char text[PEER_TEXT_MAX + 1];
	uint8_t *t;

	if (f->hdr.type != PEER_JOIN && f->hdr.type != PEER_FORMED &&
	    f->hdr.type != PEER_JOIN_FAIL && f->hdr.type != PEER_ABORT)
		return;
	FUZZ_CHECK(f->trailer_len <= INT_MAX);
	t = trailer_copy(f);
	snprintf(text, sizeof(text), "%.*s", (int)f->trailer_len,
	    (const char *)t);
	FUZZ_CHECK(strlen(text) <= f->trailer_len);
	job_trailer(f, msg, t);
	free(t);
}

/* peer_frame(): -1 when the daemon would drop the connection. */
static int
control_frame(const uint8_t *buf, size_t len)
{
	union peer_daemon_msg msg;
	struct fuzz_frame f;

	if (fuzz_hdr_check(&peer_proto, buf, &f) == -1 ||
	    fuzz_decode(&peer_proto, buf, len, &f, &msg, sizeof(msg)) == -1)
		return -1;
	job_msg(&f, &msg);
	return 0;
}

/* peer_read_cb(): split the stream into frames, stop at the first bad one. */
static void
control_stream(const uint8_t *buf, size_t n)
{
	struct wire_hdr h;
	size_t off = 0;

	while (n - off >= WIRE_HDR_LEN) {
		wire_hdr_decode(buf + off, &h);
		if (h.len > PEER_MSG_MAX - WIRE_HDR_LEN)
			return;		/* "frame longer than the limit" */
		if (n - off < WIRE_HDR_LEN + (size_t)h.len)
			return;		/* wait for more */
		if (control_frame(buf + off, WIRE_HDR_LEN + h.len) == -1)
			return;		/* "protocol error" */
		off += WIRE_HDR_LEN + h.len;
	}
}

static void
check_tables(void)
{
	static const uint16_t inbound_types[] = { PEER_AUTH_HELLO,
	    PEER_AUTH_RESPONSE, PEER_HELLO, PEER_DATA_HELLO };
	static int done;

	if (done)
		return;
	done = 1;
	FUZZ_CHECK(fuzz_max_host_size(&peer_proto) <=
	    sizeof(union peer_daemon_msg));
	for (size_t i = 0; i < sizeof(inbound_types) / sizeof(inbound_types[0]);
	    i++)
		FUZZ_CHECK(wire_type_lookup(&peer_proto,
		    inbound_types[i])->host_size <=
		    sizeof(union peer_inbound_msg));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_tables();
	inbound(IN_AUTH_HELLO, data, size);
	inbound(IN_FIRST, data, size);
	data_auth(data, size);
	control_stream(data, size);
	return 0;
}
