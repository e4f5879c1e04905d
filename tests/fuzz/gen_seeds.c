/*
 * gen_seeds.c: writes the seed corpora of fuzz_ipc and fuzz_peer: one valid
 * frame of every message type, with plausible trailers, encoded by
 * wire_encode(), then a few malformed frames and, for the peer protocol,
 * streams of several frames.  The output is committed under
 * tests/fuzz/corpus/; run this again when a message layout changes:
 *
 *	gen_seeds tests/fuzz/corpus	(writes corpus/ipc/ and corpus/peer/)
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mccl.h"
#include "ipc.h"
#include "peer.h"

#define SEED_MAX	4096
#define JOB_ID		0x0000000100000007ULL

struct seed {
	uint8_t	buf[SEED_MAX];
	size_t	len;
};

static const char *outdir;

static void
seed_write(const char *proto, const char *name, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", outdir, proto, name);
	if ((f = fopen(path, "wb")) == NULL ||
	    fwrite(s->buf, 1, s->len, f) != s->len || fclose(f) != 0) {
		fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* Append one encoded frame to s. */
static void
seed_add(struct seed *s, const struct wire_proto *proto, uint16_t type,
    const void *msg, const void *trailer, size_t tlen)
{
	size_t n;

	n = wire_encode(proto, type, msg, trailer, tlen, s->buf + s->len,
	    sizeof(s->buf) - s->len);
	if (n == 0) {
		fprintf(stderr, "gen_seeds: cannot encode %s type %u\n",
		    proto->name, type);
		exit(1);
	}
	s->len += n;
}

/* One frame, written as its own seed. */
static void
seed_one(const struct wire_proto *proto, const char *name, uint16_t type,
    const void *msg, const void *trailer, size_t tlen)
{
	struct seed s = { .len = 0 };

	seed_add(&s, proto, type, msg, trailer, tlen);
	seed_write(proto->name, name, &s);
}

/* Overwrite a big-endian integer of a frame (to break it on purpose). */
static void
seed_poke(struct seed *s, size_t off, uint64_t v, size_t size)
{
	for (size_t i = 0; i < size; i++)
		s->buf[off + i] = (uint8_t)(v >> (8 * (size - 1 - i)));
}

static void
ipc_valid(void)
{
	const char *text = "job demo: rank 5 is out of range (nranks 4)";
	const char *json = "{\"node\":\"node1\",\"node_index\":0,\"jobs\":1}";
	struct ipc_hello hello = { IPC_VERSION, 4242, 0, 0 };
	struct ipc_hello_ok ok = { .version = IPC_VERSION, .nnodes = 3,
	    .init_timeout_ms = 30000, .op_timeout_ms = 60000, .xmem = 1,
	    .node_name = "node1" };
	struct ipc_error error = { MCCL_ERR_INVALID_ARGUMENT, IPC_JOIN };
	struct ipc_seg_add add = { 1, 1 << 20 };
	struct ipc_seg_ok sok = { 1 };
	struct ipc_seg_del del = { 1 };
	struct ipc_bell bell = { 1 };
	struct ipc_join join = { 4, 0, 30000, "demo" };
	struct ipc_joined joined = { JOB_ID, 4, 0, 2, 2 };
	struct ipc_op op = { .seq = 1, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .redop = MCCL_SUM, .count = 1024,
	    .send_seg = 1, .recv_seg = 2, .recv_off = 4096 };
	struct ipc_op send = { .seq = 2, .coll = COLL_SEND, .dtype = MCCL_INT8,
	    .root = 3, .count = 100, .send_seg = 1, .timeout_ms = 500,
	    .tag = 7 };
	struct ipc_op_done done = { 1, MCCL_SUCCESS, 3, 7 };
	struct ipc_op_done failed = { 2, MCCL_ERR_TIMEOUT, 0, 0 };
	struct ipc_ctl status = { CTL_STATUS }, jobs = { CTL_JOBS };
	struct ipc_ctl_reply reply = { 0 };

	seed_one(&ipc_proto, "hello", IPC_HELLO, &hello, NULL, 0);
	seed_one(&ipc_proto, "hello_ok", IPC_HELLO_OK, &ok, NULL, 0);
	seed_one(&ipc_proto, "error", IPC_ERROR, &error, text, strlen(text));
	seed_one(&ipc_proto, "seg_add", IPC_SEG_ADD, &add, NULL, 0);
	seed_one(&ipc_proto, "seg_ok", IPC_SEG_OK, &sok, NULL, 0);
	seed_one(&ipc_proto, "seg_del", IPC_SEG_DEL, &del, NULL, 0);
	seed_one(&ipc_proto, "bell", IPC_BELL, &bell, NULL, 0);
	seed_one(&ipc_proto, "join", IPC_JOIN, &join, NULL, 0);
	seed_one(&ipc_proto, "joined", IPC_JOINED, &joined, NULL, 0);
	seed_one(&ipc_proto, "leave", IPC_LEAVE, NULL, NULL, 0);
	seed_one(&ipc_proto, "abort", IPC_ABORT, NULL, NULL, 0);
	seed_one(&ipc_proto, "op", IPC_OP, &op, NULL, 0);
	seed_one(&ipc_proto, "op_send", IPC_OP, &send, NULL, 0);
	seed_one(&ipc_proto, "op_done", IPC_OP_DONE, &done, NULL, 0);
	seed_one(&ipc_proto, "op_done_error", IPC_OP_DONE, &failed,
	    "operation 2 timed out", 21);
	seed_one(&ipc_proto, "ctl_status", IPC_CTL, &status, NULL, 0);
	seed_one(&ipc_proto, "ctl_jobs", IPC_CTL, &jobs, "demo", 4);
	seed_one(&ipc_proto, "ctl_reply", IPC_CTL_REPLY, &reply, json,
	    strlen(json));
}

static void
ipc_malformed(void)
{
	struct ipc_hello hello = { IPC_VERSION, 4242, 0, 0 };
	struct ipc_join join = { 4, 0, 30000, "" };
	struct ipc_error error = { MCCL_ERR_INTERNAL, IPC_OP };
	uint8_t text[IPC_TEXT_MAX];
	struct seed s = { .len = 0 };

	seed_add(&s, &ipc_proto, IPC_HELLO, &hello, NULL, 0);
	s.len = 5;
	seed_write("ipc", "bad_short_header", &s);
	s.len = 0;
	seed_add(&s, &ipc_proto, IPC_HELLO, &hello, NULL, 0);
	seed_poke(&s, 0, 0x4d43434dU, 4);
	seed_write("ipc", "bad_magic", &s);
	seed_poke(&s, 0, IPC_MAGIC, 4);
	seed_poke(&s, 4, IPC_VERSION + 1, 2);
	seed_write("ipc", "bad_version", &s);
	seed_poke(&s, 4, IPC_VERSION, 2);
	seed_poke(&s, 6, 999, 2);
	seed_write("ipc", "bad_type", &s);
	seed_poke(&s, 6, IPC_HELLO, 2);
	seed_poke(&s, 8, 4, 4);
	seed_write("ipc", "bad_short_body", &s);
	seed_poke(&s, 8, 8, 4);
	seed_add(&s, &ipc_proto, IPC_HELLO, &hello, NULL, 0);
	seed_write("ipc", "bad_two_records", &s);

	memset(join.job, 'A', sizeof(join.job));
	s.len = 0;
	seed_add(&s, &ipc_proto, IPC_JOIN, &join, NULL, 0);
	seed_write("ipc", "bad_unterminated_job", &s);

	memset(text, 'x', sizeof(text));
	s.len = 0;
	seed_add(&s, &ipc_proto, IPC_ERROR, &error, text, sizeof(text));
	s.buf[s.len++] = 'x';
	seed_poke(&s, 8, s.len - WIRE_HDR_LEN, 4);
	seed_write("ipc", "bad_error_too_long", &s);
}

static void
peer_valid(void)
{
	struct peer_hello hello = { PEER_VERSION, 0, 3, 0x9e3779b97f4a7c15ULL,
	    "node1" };
	struct peer_ping ping = { 123456789 };
	struct peer_silent silent = { 2, 5003 };
	struct peer_join join = { .uid = 1000, .nranks = 4, .node = 1,
	    .nlocal = 2, .timeout_ms = 30000, .job = "demo", .alpha_ns = 40000,
	    .beta_ps = 800, .gamma_ps = 150, .beta_pair_ps = 900 };
	struct peer_formed formed = { .job_id = JOB_ID, .uid = 1000,
	    .nranks = 4, .job = "demo", .lanes = 2, .alpha_ns = 40000,
	    .beta_ps = 800, .gamma_ps = 150, .beta_pair_ps = 900 };
	struct peer_join_fail fail = { 1000, PEER_ALL_RANKS,
	    MCCL_ERR_INVALID_ARGUMENT, "demo" };
	struct peer_abort abrt = { JOB_ID, MCCL_ERR_PEER_FAILED, 1 };
	struct peer_data_hello dh = { JOB_ID, 1, 0 };
	struct peer_ophdr oh = { .seq = 1, .coll = COLL_ALLREDUCE,
	    .dtype = MCCL_FLOAT32, .redop = MCCL_SUM, .count = 16 };
	struct peer_p2p p2p = { .src = 0, .dst = 3, .tag = 42, .bytes = 4096 };
	static const uint32_t r[] = { 2, 3 }, m[] = { 0, 0, 1, 1 };
	uint8_t ranks[sizeof(r)], map[sizeof(m)], data[64];

	wire_put_u32s(ranks, r, 2);
	wire_put_u32s(map, m, 4);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)i;
	seed_one(&peer_proto, "hello", PEER_HELLO, &hello, NULL, 0);
	seed_one(&peer_proto, "ping", PEER_PING, &ping, NULL, 0);
	seed_one(&peer_proto, "pong", PEER_PONG, &ping, NULL, 0);
	seed_one(&peer_proto, "silent", PEER_SILENT, &silent, NULL, 0);
	seed_one(&peer_proto, "join", PEER_JOIN, &join, ranks, sizeof(ranks));
	seed_one(&peer_proto, "formed", PEER_FORMED, &formed, map,
	    sizeof(map));
	seed_one(&peer_proto, "join_fail", PEER_JOIN_FAIL, &fail,
	    "job demo: nranks 4, but node2 says 8", 36);
	seed_one(&peer_proto, "abort", PEER_ABORT, &abrt,
	    "node node2 went down", 20);
	seed_one(&peer_proto, "data_hello", PEER_DATA_HELLO, &dh, NULL, 0);
	seed_one(&peer_proto, "data_ophdr", PEER_DATA_OPHDR, &oh, NULL, 0);
	seed_one(&peer_proto, "data", PEER_DATA, NULL, data, sizeof(data));
	join.nlocal = 0;
	seed_one(&peer_proto, "join_withdraw", PEER_JOIN, &join, NULL, 0);
	seed_one(&peer_proto, "p2p", PEER_P2P, &p2p, NULL, 0);
}

/* Nonces and MACs: any 32 bytes. */
static void
fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + 37 * i);
}

/* The handshake of an accepted connection with a cluster key. */
static void
peer_auth(void)
{
	struct peer_auth_hello ah = { 1, { 0 } };
	struct peer_auth_challenge ac = { 0, { 0 }, { 0 } };
	struct peer_auth_response ar = { { 0 } };
	struct peer_hello hello = { PEER_VERSION, 1, 3, 0x9e3779b97f4a7c15ULL,
	    "node2" };
	struct peer_data_hello dh = { JOB_ID, 1, PEER_STREAM_P2P };
	struct seed s = { .len = 0 };

	fill(ah.nonce, sizeof(ah.nonce), 1);
	fill(ac.nonce, sizeof(ac.nonce), 2);
	fill(ac.mac, sizeof(ac.mac), 3);
	fill(ar.mac, sizeof(ar.mac), 4);
	seed_one(&peer_proto, "auth_hello", PEER_AUTH_HELLO, &ah, NULL, 0);
	seed_one(&peer_proto, "auth_challenge", PEER_AUTH_CHALLENGE, &ac, NULL,
	    0);
	seed_one(&peer_proto, "auth_response", PEER_AUTH_RESPONSE, &ar, NULL,
	    0);
	seed_add(&s, &peer_proto, PEER_AUTH_HELLO, &ah, NULL, 0);
	seed_add(&s, &peer_proto, PEER_AUTH_RESPONSE, &ar, NULL, 0);
	seed_add(&s, &peer_proto, PEER_HELLO, &hello, NULL, 0);
	seed_write("peer", "stream_inbound_auth", &s);
	s.len = 0;
	seed_add(&s, &peer_proto, PEER_AUTH_HELLO, &ah, NULL, 0);
	seed_add(&s, &peer_proto, PEER_AUTH_RESPONSE, &ar, NULL, 0);
	seed_add(&s, &peer_proto, PEER_DATA_HELLO, &dh, NULL, 0);
	seed_write("peer", "stream_inbound_auth_data", &s);
}

/* A control connection's life, and a data link's first frames. */
static void
peer_streams(void)
{
	struct peer_hello hello = { PEER_VERSION, 1, 3, 0x9e3779b97f4a7c15ULL,
	    "node2" };
	struct peer_ping ping = { 987654321 };
	struct peer_join join = { .uid = 1000, .nranks = 2, .node = 1,
	    .nlocal = 1, .job = "pair" };
	struct peer_formed formed = { .job_id = JOB_ID, .uid = 1000,
	    .nranks = 2, .job = "pair", .lanes = 2 };
	struct peer_abort abrt = { JOB_ID, MCCL_ERR_ABORTED, 1 };
	struct peer_data_hello dh = { JOB_ID, 2, 1 };
	struct peer_ophdr oh = { .seq = 7, .coll = COLL_BROADCAST,
	    .dtype = MCCL_INT32, .root = 1, .count = 4 };
	static const uint32_t r[] = { 1 }, m[] = { 0, 1 };
	uint8_t rank[sizeof(r)], map[sizeof(m)];
	struct seed s = { .len = 0 };

	wire_put_u32s(rank, r, 1);
	wire_put_u32s(map, m, 2);
	seed_add(&s, &peer_proto, PEER_HELLO, &hello, NULL, 0);
	seed_add(&s, &peer_proto, PEER_PING, &ping, NULL, 0);
	seed_add(&s, &peer_proto, PEER_JOIN, &join, rank, sizeof(rank));
	seed_add(&s, &peer_proto, PEER_FORMED, &formed, map, sizeof(map));
	seed_add(&s, &peer_proto, PEER_ABORT, &abrt, "user abort", 10);
	seed_write("peer", "stream_control", &s);
	s.len -= 10;
	seed_write("peer", "stream_truncated", &s);

	s.len = 0;
	seed_add(&s, &peer_proto, PEER_DATA_HELLO, &dh, NULL, 0);
	seed_add(&s, &peer_proto, PEER_DATA_OPHDR, &oh, NULL, 0);
	seed_add(&s, &peer_proto, PEER_DATA, NULL, "\0\0\0\52", 4);
	seed_write("peer", "stream_data_link", &s);
}

static void
peer_malformed(void)
{
	struct peer_hello hello = { PEER_VERSION, 0, 3, 1, "node1" };
	struct peer_join join = { .uid = 1000, .nranks = 4, .node = 1,
	    .nlocal = 3, .timeout_ms = 30000, .job = "demo" };
	struct peer_formed formed = { .job_id = JOB_ID, .uid = 1000,
	    .nranks = 5, .job = "demo", .lanes = 2 };
	struct peer_ping ping = { 1 };
	static const uint32_t r[] = { 2, 9 };
	uint8_t ranks[sizeof(r)];
	struct seed s = { .len = 0 };

	wire_put_u32s(ranks, r, 2);
	seed_one(&peer_proto, "bad_join_nlocal", PEER_JOIN, &join, ranks,
	    sizeof(ranks));
	seed_one(&peer_proto, "bad_formed_nranks", PEER_FORMED, &formed, ranks,
	    sizeof(ranks));
	memset(hello.node_name, 'n', sizeof(hello.node_name));
	seed_one(&peer_proto, "bad_unterminated_name", PEER_HELLO, &hello,
	    NULL, 0);

	seed_add(&s, &peer_proto, PEER_PING, &ping, NULL, 0);
	seed_poke(&s, 0, IPC_MAGIC, 4);
	seed_write("peer", "bad_magic", &s);
	seed_poke(&s, 0, PEER_MAGIC, 4);
	seed_poke(&s, 6, 299, 2);
	seed_write("peer", "bad_type", &s);
	seed_poke(&s, 6, PEER_DATA, 2);
	seed_poke(&s, 8, PEER_MSG_MAX, 4);
	seed_write("peer", "bad_too_long", &s);
	seed_poke(&s, 6, PEER_PING, 2);
	seed_poke(&s, 8, 8, 4);
	seed_add(&s, &peer_proto, PEER_PING, &ping, NULL, 0);
	seed_poke(&s, 20 + 8, 7, 4);
	seed_add(&s, &peer_proto, PEER_PING, &ping, NULL, 0);
	seed_write("peer", "bad_second_frame", &s);
}

static void
make_dir(const char *sub)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s%s%s", outdir, sub[0] ? "/" : "", sub);
	if (mkdir(path, 0755) == -1 && errno != EEXIST) {
		fprintf(stderr, "gen_seeds: mkdir %s: %s\n", path,
		    strerror(errno));
		exit(1);
	}
}

int
main(int argc, char *argv[])
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_seeds corpus-directory\n");
		return 2;
	}
	outdir = argv[1];
	make_dir("");
	make_dir("ipc");
	make_dir("peer");
	ipc_valid();
	ipc_malformed();
	peer_valid();
	peer_auth();
	peer_streams();
	peer_malformed();
	return 0;
}
