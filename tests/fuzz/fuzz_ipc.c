/*
 * fuzz_ipc.c: libFuzzer target for the local IPC protocol.  The input is
 * one SOCK_SEQPACKET record, as one recvmsg() returns it.  Two readers see
 * it: the daemon, in the order of control.c's client_check() (size, header,
 * exact length, decode), and the library, through libclient/conn.c's own
 * conn_decode(), included below so that its real code is what runs.
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

/* client_check(), minus the descriptor count and the HELLO-first rule. */
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
	fuzz_decode(&ipc_proto, buf, n, &f, &msg, sizeof(msg));
}

#ifndef FUZZ_IPC_NO_CONN
/* The library's receive buffer, allocated to size so overruns show. */
static struct ipc_msg *conn_msg;

static void
conn_side(const uint8_t *buf, size_t n)
{
	struct ipc_msg *m;
	struct fuzz_frame f;
	char err[256] = "";

	if (conn_msg == NULL && (conn_msg = malloc(sizeof(*conn_msg))) == NULL)
		abort();
	m = conn_msg;
	if (n > sizeof(m->buf))
		return;		/* conn_recv() refuses it before decoding */
	memcpy(m->buf, buf, n);
	if (conn_decode(m, n, err, sizeof(err)) != MCCL_SUCCESS) {
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
