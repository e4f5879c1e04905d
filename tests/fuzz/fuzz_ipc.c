/*
 * fuzz_ipc.c: libFuzzer target for the local IPC protocol.  The input is
 * one SOCK_SEQPACKET record, as one recvmsg() returns it.  Two readers see
 * it: the daemon, in the order of control.c's client_check() (size, header,
 * exact length, decode), and the library, through libclient/conn.c's own
 * conn_decode(), included below so that its real code is what runs.
 * A decoded IPC_OP also goes through proto_op_bytes(), which sizes its
 * buffers.
 *
 * Build with -DFUZZ_IPC_NO_CONN to fuzz the daemon's side alone.
 */
#include <string.h>

#include "fuzz.h"
#include "ipc.h"

#ifndef FUZZ_IPC_NO_CONN
#include "conn.c"	/* from libclient/: conn_decode() is static */
#endif

/* What control.c's client_read_cb() decodes into. */
union ipc_daemon_msg {
	struct ipc_ctl		ctl;
	struct ipc_op		op;
	struct ipc_join		join;
	struct ipc_seg_add	seg_add;
	struct ipc_hello	hello;
	uint8_t			raw[256];
};

/*
 * proto_op_bytes() on one operation: it sizes the buffers the daemon checks
 * against segments, so it must refuse exactly the sizes that overflow and
 * the collectives it does not size (unknown ones, the v-collectives).
 */
static void
op_bytes_one(const struct ipc_op *op, size_t esize, uint32_t nranks)
{
	uint64_t one = 0, all = 0, send = 1, recv = 1;
	int over, known, rc;

	over = __builtin_mul_overflow(op->count, (uint64_t)esize, &one) ||
	    __builtin_mul_overflow(one, (uint64_t)nranks, &all);
	/* the v-collectives are sized by proto_vec_bytes instead */
	known = op->coll >= 1 && op->coll <= COLL_MAX &&
	    proto_vec_len((int)op->coll, 1) == 0;
	rc = proto_op_bytes(op->coll, op->count, esize, nranks,
	    (uint32_t)op->seq, op->root, &send, &recv);
	FUZZ_CHECK(rc == ((over || !known) ? -1 : 0));
	if (rc == 0) {
		FUZZ_CHECK(send == 0 || send == one || send == all);
		FUZZ_CHECK(recv == 0 || recv == one || recv == all);
	}
}

static void
op_bytes(const struct ipc_op *op)
{
	static const size_t esizes[] = { 0, 1, 2, 4, 8 };
	static const uint32_t nranks[] = { 0, 1, 3, 1024, UINT32_MAX };

	for (size_t i = 0; i < sizeof(esizes) / sizeof(esizes[0]); i++)
		for (size_t j = 0; j < sizeof(nranks) / sizeof(nranks[0]); j++)
			op_bytes_one(op, esizes[i], nranks[j]);
}

/* client_check(), its descriptors matching and HELLO done already. */
static void
daemon_side(const uint8_t *buf, size_t n)
{
	union ipc_daemon_msg msg;
	struct fuzz_frame f;

	if (n < WIRE_HDR_LEN)
		return;
	if (fuzz_hdr_check(&ipc_proto, buf, &f) == -1)
		return;
	if (f.hdr.len != n - WIRE_HDR_LEN)
		return;
	if (fuzz_decode(&ipc_proto, buf, n, &f, &msg, sizeof(msg)) == 0 &&
	    f.hdr.type == IPC_OP)
		op_bytes(&msg.op);
}

#ifndef FUZZ_IPC_NO_CONN
/*
 * The library's receive buffer, allocated to size so that ASan sees any
 * write past it.  Without ASan (standalone.c under gcc, say), a guard
 * after it shows the same.
 */
#if defined(__SANITIZE_ADDRESS__)
#define GUARD_LEN	0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_LEN	0
#endif
#endif
#ifndef GUARD_LEN
#define GUARD_LEN	256
#endif
#define GUARD_BYTE	0xa5

static const size_t guard_len = GUARD_LEN;
static struct ipc_msg *conn_msg;

static struct ipc_msg *
conn_buffer(void)
{
	if (conn_msg == NULL) {
		if ((conn_msg = malloc(sizeof(*conn_msg) + guard_len)) == NULL)
			abort();
		memset((uint8_t *)conn_msg + sizeof(*conn_msg), GUARD_BYTE,
		    guard_len);
	}
	return conn_msg;
}

static void
conn_guard_check(const struct ipc_msg *m)
{
	const uint8_t *g = (const uint8_t *)m + sizeof(*m);

	for (size_t i = 0; i < guard_len; i++)
		if (g[i] != GUARD_BYTE)
			fuzz_fail(__FILE__, __LINE__, "conn_decode wrote past "
			    "the end of struct ipc_msg");
}

/* conn_recv() after its recv(): the record is in m->buf. */
static void
conn_side(const uint8_t *buf, size_t n)
{
	struct ipc_msg *m = conn_buffer();
	struct fuzz_frame f;
	char err[256] = "";
	int rc;

	if (n > sizeof(m->buf))
		return;		/* conn_recv() refuses it before decoding */
	memcpy(m->buf, buf, n);
	rc = conn_decode(m, n, err, sizeof(err));
	conn_guard_check(m);
	if (rc != MCCL_SUCCESS) {
		FUZZ_CHECK(err[0] != '\0');
		return;
	}
	FUZZ_CHECK(m->len == n);
	f.hdr = m->hdr;
	f.type = m->type;
	f.trailer = m->trailer;
	f.trailer_len = m->trailer_len;
	fuzz_check_decoded(&ipc_proto, m->buf, n, &f, &m->u);
}
#endif

static void
check_tables(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	FUZZ_CHECK(fuzz_max_host_size(&ipc_proto) <=
	    sizeof(union ipc_daemon_msg));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_tables();
	if (size > IPC_MSG_MAX)
		return 0;	/* MSG_TRUNC: "record too long" */
	daemon_side(data, size);
#ifndef FUZZ_IPC_NO_CONN
	conn_side(data, size);
#endif
	return 0;
}
