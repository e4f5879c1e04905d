/*
 * fuzz_peer.c: libFuzzer target for the daemon-to-daemon protocol.  The
 * input is what arrives on a TCP connection, read twice as the daemon
 * reads it (daemon/peer.c):
 *   - as a new inbound connection: one first frame, HELLO or DATA_HELLO
 *     of at most INBOUND_MAX body bytes (inbound_read_cb, inbound_dispatch);
 *   - as a control connection: consecutive frames, each at most
 *     PEER_MSG_MAX, decoded until one fails (peer_read_cb, peer_frame), then
 *     the trailer rules of job.c for JOIN and FORMED and the text of the
 *     others (job_peer_msg, coord_join, job_recv_formed).
 */
#include <limits.h>
#include <string.h>

#include "fuzz.h"
#include "peer.h"

#define INBOUND_MAX	256	/* as in daemon/peer.c */
#define CLUSTER_NODES	3	/* md.conf.nnodes, for job_recv_formed() */

/* What peer_frame() decodes into. */
union peer_daemon_msg {
	struct peer_hello	hello;
	struct peer_ping	ping;
	uint8_t			raw[512];
};

/* What inbound_dispatch() decodes into. */
union peer_inbound_msg {
	struct peer_hello	hello;
	struct peer_data_hello	data;
};

/* inbound_read_cb(): the first frame of a connection; data may follow. */
static void
inbound_first(const uint8_t *buf, size_t n)
{
	union peer_inbound_msg msg;
	struct fuzz_frame f;

	if (n < WIRE_HDR_LEN || fuzz_hdr_check(&peer_proto, buf, &f) == -1)
		return;
	if ((f.hdr.type != PEER_HELLO && f.hdr.type != PEER_DATA_HELLO) ||
	    f.hdr.len > INBOUND_MAX || n - WIRE_HDR_LEN < f.hdr.len)
		return;
	fuzz_decode(&peer_proto, buf, WIRE_HDR_LEN + f.hdr.len, &f, &msg,
	    sizeof(msg));
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

/* A u32 array of n entries from a trailer the daemon found long enough. */
static void
read_u32s(const uint8_t *trailer, size_t tlen, uint32_t n, uint32_t bound)
{
	uint32_t *v;

	FUZZ_CHECK((uint64_t)n * 4 == tlen);
	FUZZ_CHECK(n <= PEER_RANKS_MAX);
	if ((v = calloc((size_t)n + 1, sizeof(*v))) == NULL)
		abort();
	wire_get_u32s(v, trailer, n);
	for (uint32_t i = 0; i < n; i++)
		if (v[i] >= bound)
			break;		/* the daemon refuses the frame */
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
		read_u32s(t, f->trailer_len, j->nlocal, j->nranks);
	else if (f->hdr.type == PEER_FORMED && fm->nranks != 0 &&
	    f->trailer_len == (size_t)fm->nranks * 4)
		read_u32s(t, f->trailer_len, fm->nranks, CLUSTER_NODES);
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
	static int done;

	if (done)
		return;
	done = 1;
	FUZZ_CHECK(fuzz_max_host_size(&peer_proto) <=
	    sizeof(union peer_daemon_msg));
	FUZZ_CHECK(wire_type_lookup(&peer_proto, PEER_HELLO)->host_size <=
	    sizeof(union peer_inbound_msg));
	FUZZ_CHECK(wire_type_lookup(&peer_proto, PEER_DATA_HELLO)->host_size <=
	    sizeof(union peer_inbound_msg));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_tables();
	inbound_first(data, size);
	control_stream(data, size);
	return 0;
}
