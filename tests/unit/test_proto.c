/*
 * test_proto.c: unit tests of proto/proto.c.  Every message type of both
 * protocols makes a round trip from a filled struct (and trailer) through
 * the encoder and back; the header checks reject each kind of bad frame and
 * say why; the decoder refuses unterminated strings; the encoder refuses
 * what does not fit; integers travel big-endian, byte for byte.
 */
#include <sys/stat.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mccl.h"
#include "ipc.h"
#include "peer.h"
#include "spin.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* The message types this file knows; the tables must hold exactly these. */
static const uint16_t ipc_known[] = {
	IPC_HELLO, IPC_HELLO_OK, IPC_ERROR, IPC_SEG_ADD, IPC_SEG_OK,
	IPC_SEG_DEL, IPC_BELL, IPC_JOIN, IPC_JOINED, IPC_LEAVE, IPC_ABORT,
	IPC_JOB_FAILED, IPC_OP, IPC_OP_DONE, IPC_CTL, IPC_CTL_REPLY,
};
static const uint16_t peer_known[] = {
	PEER_HELLO, PEER_PING, PEER_PONG, PEER_JOIN, PEER_FORMED,
	PEER_JOIN_FAIL, PEER_ABORT, PEER_DATA_HELLO, PEER_DATA_OPHDR, PEER_DATA,
	PEER_P2P, PEER_AUTH_HELLO, PEER_AUTH_CHALLENGE, PEER_AUTH_RESPONSE,
	PEER_JOB_QUERY, PEER_JOB_INFO, PEER_DATA_LINK, PEER_DATA_READY,
	PEER_CHECK_RUN, PEER_CHECK_DONE, PEER_SILENT,
};

static size_t
ntypes_all(void)
{
	return ipc_proto.ntypes + peer_proto.ntypes;
}

/* The i-th type over both tables, for loop tests. */
static const struct wire_type *
type_at(size_t i, const struct wire_proto **protop)
{
	*protop = i < ipc_proto.ntypes ? &ipc_proto : &peer_proto;
	if (i >= ipc_proto.ntypes)
		i -= ipc_proto.ntypes;
	return &(*protop)->types[i];
}

/*
 * Encode msg and trailer, check the header, decode into out and compare the
 * trailer.  Returns the frame (malloc'd) for more checks.
 */
static uint8_t *
roundtrip(const struct wire_proto *proto, uint16_t type, const void *msg,
    const void *trailer, size_t tlen, void *out, size_t *framelen)
{
	const struct wire_type *t, *lt;
	const uint8_t *dtrailer = NULL;
	size_t len, dtlen = 0, cap;
	struct wire_hdr h;
	char err[256] = "";
	uint8_t *frame;

	ck_assert_ptr_nonnull(lt = wire_type_lookup(proto, type));
	cap = WIRE_HDR_LEN + wire_fixed_len(lt) + tlen;
	ck_assert_ptr_nonnull(frame = malloc(cap));
	len = wire_encode(proto, type, msg, trailer, tlen, frame, cap);
	ck_assert_uint_eq(len, cap);
	ck_assert_msg(wire_hdr_check(proto, frame, &h, &t, err,
	    sizeof(err)) == 0, "%s %u: %s", proto->name, type, err);
	ck_assert_ptr_eq(t, lt);
	ck_assert_uint_eq(h.magic, proto->magic);
	ck_assert_uint_eq(h.version, proto->version);
	ck_assert_uint_eq(h.type, type);
	ck_assert_uint_eq(h.len, len - WIRE_HDR_LEN);
	ck_assert_msg(wire_decode(t, frame + WIRE_HDR_LEN, h.len, out,
	    &dtrailer, &dtlen, err, sizeof(err)) == 0, "%s: %s", t->name, err);
	ck_assert_uint_eq(dtlen, tlen);
	if (tlen > 0)
		ck_assert_int_eq(memcmp(dtrailer, trailer, tlen), 0);
	*framelen = len;
	return frame;
}

/* Round trip with no interest in the frame. */
static void
rt(const struct wire_proto *proto, uint16_t type, const void *msg,
    const void *trailer, size_t tlen, void *out)
{
	size_t len;

	free(roundtrip(proto, type, msg, trailer, tlen, out, &len));
}

/* Values with every byte distinct and the top bit set, to catch truncation. */
#define V64	0x8182838485868788ULL
#define V32	0xf1f2f3f4U
#define V32B	0xe1e2e3e4U
#define V8	0xd1

static void
fill_name(char *dst, size_t size, const char *s)
{
	memset(dst, 0, size);
	memcpy(dst, s, strlen(s) + 1);
}

/* ---- table coverage and sanity ---- */

START_TEST(test_tables)
{
	ck_assert_uint_eq(ipc_proto.ntypes, NELEM(ipc_known));
	ck_assert_uint_eq(peer_proto.ntypes, NELEM(peer_known));
	for (size_t i = 0; i < NELEM(ipc_known); i++)
		ck_assert_ptr_nonnull(wire_type_lookup(&ipc_proto, ipc_known[i]));
	for (size_t i = 0; i < NELEM(peer_known); i++)
		ck_assert_ptr_nonnull(wire_type_lookup(&peer_proto,
		    peer_known[i]));
	ck_assert_str_eq(ipc_proto.name, "ipc");
	ck_assert_str_eq(peer_proto.name, "peer");
	ck_assert_uint_ne(ipc_proto.magic, peer_proto.magic);
}
END_TEST

/* Fields lie inside the host struct, do not overlap, have sane sizes. */
START_TEST(test_table_layout)
{
	const struct wire_proto *proto;
	const struct wire_type *t = type_at((size_t)_i, &proto);
	size_t fixed = 0, max;

	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *f = &t->fields[i];

		ck_assert_uint_le(f->offset + f->size, t->host_size);
		if (f->kind == WIRE_INT)
			ck_assert_msg(f->size == 1 || f->size == 2 ||
			    f->size == 4 || f->size == 8, "%s field %zu size %u",
			    t->name, i, f->size);
		for (size_t j = 0; j < i; j++) {
			const struct wire_field *g = &t->fields[j];

			ck_assert_msg(f->offset >= g->offset + g->size ||
			    g->offset >= f->offset + f->size,
			    "%s fields %zu and %zu overlap", t->name, j, i);
		}
		fixed += f->size;
	}
	ck_assert_uint_eq(wire_fixed_len(t), fixed);
	ck_assert_ptr_eq(wire_type_lookup(proto, t->type), t);

	/* A whole frame fits in what the receiver reads at once. */
	if (proto == &ipc_proto)
		max = IPC_MSG_MAX;
	else if (t->type == PEER_DATA)
		max = WIRE_HDR_LEN + PEER_DATA_MAX;
	else
		max = PEER_MSG_MAX;
	ck_assert_uint_le(WIRE_HDR_LEN + fixed + t->trailer_max, max);
}
END_TEST

/* ---- IPC round trips ---- */

START_TEST(test_ipc_hello)
{
	struct ipc_hello m = { V32, V32B, V64, V64 ^ 1 }, d;

	rt(&ipc_proto, IPC_HELLO, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.version, V32);
	ck_assert_uint_eq(d.pid, V32B);
	ck_assert_uint_eq(d.probe_addr, V64);
	ck_assert_uint_eq(d.probe_val, V64 ^ 1);
}
END_TEST

START_TEST(test_ipc_hello_ok)
{
	struct ipc_hello_ok m, d;

	memset(&m, 0, sizeof(m));
	m.version = 1;
	m.node_index = V32;
	m.nnodes = V32B;
	m.xmem = 1;
	fill_name(m.node_name, sizeof(m.node_name), "node-7.example");
	rt(&ipc_proto, IPC_HELLO_OK, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.xmem, 1);
	ck_assert_uint_eq(d.version, 1);
	ck_assert_uint_eq(d.node_index, V32);
	ck_assert_uint_eq(d.nnodes, V32B);
	ck_assert_str_eq(d.node_name, "node-7.example");
}
END_TEST

START_TEST(test_ipc_error)
{
	struct ipc_error m = { MCCL_ERR_TIMEOUT, IPC_JOIN }, d;
	const char *msg = "job \"train\": rank 3 timed out after 30000 ms";

	rt(&ipc_proto, IPC_ERROR, &m, msg, strlen(msg), &d);
	ck_assert_uint_eq(d.code, MCCL_ERR_TIMEOUT);
	ck_assert_uint_eq(d.request, IPC_JOIN);
	rt(&ipc_proto, IPC_ERROR, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.code, MCCL_ERR_TIMEOUT);
}
END_TEST

START_TEST(test_ipc_seg)
{
	struct ipc_seg_add a = { V32, V64 }, da;
	struct ipc_seg_ok o = { V32B }, dok;
	struct ipc_seg_del x = { V32 }, dx;
	struct ipc_bell b = { V32B }, db;

	rt(&ipc_proto, IPC_SEG_ADD, &a, NULL, 0, &da);
	ck_assert_uint_eq(da.seg_id, V32);
	ck_assert_uint_eq(da.size, V64);
	ck_assert_uint_eq(wire_type_lookup(&ipc_proto, IPC_SEG_ADD)->nfds, 1);
	rt(&ipc_proto, IPC_SEG_OK, &o, NULL, 0, &dok);
	ck_assert_uint_eq(dok.seg_id, V32B);
	rt(&ipc_proto, IPC_SEG_DEL, &x, NULL, 0, &dx);
	ck_assert_uint_eq(dx.seg_id, V32);
	rt(&ipc_proto, IPC_BELL, &b, NULL, 0, &db);
	ck_assert_uint_eq(db.seg_id, V32B);
}
END_TEST

START_TEST(test_ipc_join)
{
	struct ipc_join m, d;
	char name[JOB_NAME_MAX];

	memset(&m, 0, sizeof(m));
	m.nranks = V32;
	m.rank = V32B;
	m.timeout_ms = 30000;
	/* The longest name: JOB_NAME_MAX - 1 bytes and the NUL. */
	memset(name, 'j', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memcpy(m.job, name, sizeof(name));
	rt(&ipc_proto, IPC_JOIN, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.nranks, V32);
	ck_assert_uint_eq(d.rank, V32B);
	ck_assert_uint_eq(d.timeout_ms, 30000);
	ck_assert_str_eq(d.job, name);
}
END_TEST

START_TEST(test_ipc_joined)
{
	struct ipc_joined m = { V64, V32, V32B, 0x01020304, 0xa0b0c0d0 }, d;

	rt(&ipc_proto, IPC_JOINED, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.job_id, V64);
	ck_assert_uint_eq(d.nranks, V32);
	ck_assert_uint_eq(d.rank, V32B);
	ck_assert_uint_eq(d.nnodes, 0x01020304);
	ck_assert_uint_eq(d.nlocal, 0xa0b0c0d0);
}
END_TEST

START_TEST(test_ipc_empty)
{
	size_t len;
	uint8_t *f;

	/* Bodiless messages: no struct at all. */
	f = roundtrip(&ipc_proto, IPC_LEAVE, NULL, NULL, 0, NULL, &len);
	ck_assert_uint_eq(len, WIRE_HDR_LEN);
	free(f);
	f = roundtrip(&ipc_proto, IPC_ABORT, NULL, NULL, 0, NULL, &len);
	ck_assert_uint_eq(len, WIRE_HDR_LEN);
	free(f);
}
END_TEST

/* A job's failure: its code, and the reason as the trailer. */
START_TEST(test_ipc_job_failed)
{
	struct ipc_job_failed m = { V32 }, d;

	size_t len;

	free(roundtrip(&ipc_proto, IPC_JOB_FAILED, &m, "why", 3, &d, &len));
	ck_assert_uint_eq(len, WIRE_HDR_LEN + 4 + 3);
	ck_assert_uint_eq(d.code, V32);
}
END_TEST

/*
 * The doorbell page: each side's fields on a cache line of their own (the
 * client's head and wake-up word apart from the daemon's completion and
 * tail), and the whole ring in one page.
 */
START_TEST(test_doorbell_layout)
{
	ck_assert_uint_eq(offsetof(struct ipc_doorbell, word), 0);
	ck_assert_uint_eq(offsetof(struct ipc_doorbell, sq_head), 64);
	ck_assert_uint_eq(offsetof(struct ipc_doorbell, sq_bell), 72);
	ck_assert_uint_eq(offsetof(struct ipc_doorbell, sq_tail), 128);
	ck_assert_uint_eq(offsetof(struct ipc_doorbell, sq_sleeping), 136);
	ck_assert_uint_eq(offsetof(struct ipc_doorbell, sq) % 64, 0);
	ck_assert_uint_le(sizeof(struct ipc_doorbell), 8192);
	ck_assert_uint_eq(IPC_SQ_SLOTS & (IPC_SQ_SLOTS - 1), 0);
}
END_TEST

START_TEST(test_ipc_op)
{
	struct ipc_op m, d;

	memset(&m, 0, sizeof(m));
	m.seq = V64;
	m.coll = COLL_ALLTOALL;
	m.dtype = 0xfe;
	m.redop = V8;
	m.algo = 0x80;
	m.root = V32;
	m.count = 0x0102030405060708ULL;
	m.send_seg = V32B;
	m.recv_seg = 0x11223344;
	m.send_off = 0xfffffffffffffff0ULL;
	m.recv_off = 0x8000000000000001ULL;
	m.timeout_ms = 0xffffffffU;
	m.vec_seg = V32B;
	m.vec_off = 0x8000000000000002ULL;
	m.flags = IPC_OP_XMEM;
	rt(&ipc_proto, IPC_OP, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.flags, IPC_OP_XMEM);
	ck_assert_uint_eq(d.vec_seg, V32B);
	ck_assert_uint_eq(d.vec_off, m.vec_off);
	ck_assert_uint_eq(d.seq, m.seq);
	ck_assert_uint_eq(d.coll, COLL_ALLTOALL);
	ck_assert_uint_eq(d.dtype, 0xfe);
	ck_assert_uint_eq(d.redop, V8);
	ck_assert_uint_eq(d.algo, 0x80);
	ck_assert_uint_eq(d.root, V32);
	ck_assert_uint_eq(d.count, m.count);
	ck_assert_uint_eq(d.send_seg, V32B);
	ck_assert_uint_eq(d.recv_seg, 0x11223344);
	ck_assert_uint_eq(d.send_off, m.send_off);
	ck_assert_uint_eq(d.recv_off, m.recv_off);
	ck_assert_uint_eq(d.timeout_ms, 0xffffffffU);
}
END_TEST

START_TEST(test_ipc_op_done)
{
	struct ipc_op_done m = { V64, MCCL_ERR_PEER_FAILED, V32, V32B }, d;
	const char *msg = "node \"b\" failed: connection reset";

	rt(&ipc_proto, IPC_OP_DONE, &m, msg, strlen(msg), &d);
	ck_assert_uint_eq(d.seq, V64);
	ck_assert_uint_eq(d.code, MCCL_ERR_PEER_FAILED);
	m.code = 0;
	rt(&ipc_proto, IPC_OP_DONE, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.code, 0);
	ck_assert_uint_eq(d.source, V32);
	ck_assert_uint_eq(d.tag, V32B);
}
END_TEST

START_TEST(test_ipc_ctl)
{
	struct ipc_ctl m = { CTL_JOBS }, d;
	struct ipc_ctl_reply r = { V32, 1 }, dr;
	const char *arg = "train", *json = "{\"jobs\": []}";
	char *big;
	size_t bigmax;

	rt(&ipc_proto, IPC_CTL, &m, arg, strlen(arg), &d);
	ck_assert_uint_eq(d.cmd, CTL_JOBS);
	rt(&ipc_proto, IPC_CTL_REPLY, &r, json, strlen(json), &dr);
	ck_assert_uint_eq(dr.code, V32);
	ck_assert_uint_eq(dr.more, 1);

	/* The largest piece: a record of 64 KiB. */
	bigmax = wire_type_lookup(&ipc_proto, IPC_CTL_REPLY)->trailer_max;
	ck_assert_uint_eq(bigmax, CTL_PIECE_MAX);
	ck_assert_ptr_nonnull(big = malloc(bigmax));
	for (size_t i = 0; i < bigmax; i++)
		big[i] = (char)('a' + i % 26);
	rt(&ipc_proto, IPC_CTL_REPLY, &r, big, bigmax, &dr);
	free(big);
}
END_TEST

/* ---- peer round trips ---- */

START_TEST(test_peer_hello)
{
	struct peer_hello m, d;

	memset(&m, 0, sizeof(m));
	m.version = PEER_VERSION;
	m.node_index = V32;
	m.nnodes = V32B;
	m.cluster_hash = V64;
	fill_name(m.node_name, sizeof(m.node_name), "node-a");
	rt(&peer_proto, PEER_HELLO, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.version, PEER_VERSION);
	ck_assert_uint_eq(d.node_index, V32);
	ck_assert_uint_eq(d.nnodes, V32B);
	ck_assert_uint_eq(d.cluster_hash, V64);
	ck_assert_str_eq(d.node_name, "node-a");
}
END_TEST

START_TEST(test_peer_ping)
{
	struct peer_ping m = { V64 }, d;

	rt(&peer_proto, PEER_PING, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.stamp_ns, V64);
	m.stamp_ns = 1;
	rt(&peer_proto, PEER_PONG, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.stamp_ns, 1);
}
END_TEST

START_TEST(test_peer_silent)
{
	struct peer_silent m = { V32, V32B }, d;

	rt(&peer_proto, PEER_SILENT, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.node, V32);
	ck_assert_uint_eq(d.silent_ms, V32B);
}
END_TEST

/* Every field of a link's set-up, at its widest, and no body for READY. */
START_TEST(test_peer_data_link)
{
	struct peer_data_link m, d;
	uint8_t frame[WIRE_HDR_LEN + 128], *f;
	size_t len;

	memset(&m, 0, sizeof(m));
	m.transport = PEER_LINK_RDMA;
	m.need = 1;
	m.qpn = 0xabcdef;
	m.psn = 0x123456;
	m.lid = 0xbeef;
	m.mtu = 5;
	for (size_t i = 0; i < sizeof(m.gid); i++)
		m.gid[i] = (uint8_t)(0xf0 + i);
	m.ring_addr = V64;
	m.ring_rkey = V32;
	m.ring_bytes = 1U << 20;
	f = roundtrip(&peer_proto, PEER_DATA_LINK, &m, NULL, 0, &d, &len);
	ck_assert_uint_eq(len, WIRE_HDR_LEN + 4 * 6 + 16 + 8 + 4 + 4);
	ck_assert_mem_eq(&d, &m, sizeof(m));
	free(f);
	len = wire_encode(&peer_proto, PEER_DATA_READY, NULL, NULL, 0, frame,
	    sizeof(frame));
	ck_assert_uint_eq(len, WIRE_HDR_LEN);
}
END_TEST

START_TEST(test_peer_join)
{
	struct peer_join m, d;
	uint8_t ranks[3 * 4] = { 0, 0, 0, 1, 0, 0, 0, 5, 0xff, 0, 0, 9 };

	memset(&m, 0, sizeof(m));
	m.uid = 1000;
	m.nranks = V32;
	m.node = V32B;
	m.nlocal = 3;
	m.timeout_ms = 0x7fffffff;
	fill_name(m.job, sizeof(m.job), "train");
	rt(&peer_proto, PEER_JOIN, &m, ranks, sizeof(ranks), &d);
	ck_assert_uint_eq(d.uid, 1000);
	ck_assert_uint_eq(d.nranks, V32);
	ck_assert_uint_eq(d.node, V32B);
	ck_assert_uint_eq(d.nlocal, 3);
	ck_assert_uint_eq(d.timeout_ms, 0x7fffffff);
	ck_assert_str_eq(d.job, "train");
	/* Withdrawal: nlocal 0 and no ranks. */
	m.nlocal = 0;
	rt(&peer_proto, PEER_JOIN, &m, NULL, 0, &d);
	ck_assert_uint_eq(d.nlocal, 0);
}
END_TEST

START_TEST(test_peer_formed)
{
	struct peer_formed m, d;
	uint8_t *map;
	size_t maplen = wire_type_lookup(&peer_proto, PEER_FORMED)->trailer_max;

	memset(&m, 0, sizeof(m));
	m.job_id = V64;
	m.uid = 0;
	m.nranks = (uint32_t)(maplen / 4);
	m.lanes = V32;
	fill_name(m.job, sizeof(m.job), "job/with spaces");
	/* The biggest rank map the table allows. */
	ck_assert_ptr_nonnull(map = malloc(maplen));
	for (size_t i = 0; i < maplen; i++)
		map[i] = (uint8_t)(i * 7);
	rt(&peer_proto, PEER_FORMED, &m, map, maplen, &d);
	free(map);
	ck_assert_uint_eq(d.job_id, V64);
	ck_assert_uint_eq(d.uid, 0);
	ck_assert_uint_eq(d.nranks, maplen / 4);
	ck_assert_uint_eq(d.lanes, V32);
	ck_assert_str_eq(d.job, "job/with spaces");
}
END_TEST

START_TEST(test_peer_join_fail)
{
	struct peer_join_fail m, d;
	const char *msg = "job \"x\": nranks 4 disagrees with 8";

	memset(&m, 0, sizeof(m));
	m.uid = V32;
	m.rank = PEER_ALL_RANKS;
	m.code = MCCL_ERR_INVALID_ARGUMENT;
	fill_name(m.job, sizeof(m.job), "x");
	rt(&peer_proto, PEER_JOIN_FAIL, &m, msg, strlen(msg), &d);
	ck_assert_uint_eq(d.uid, V32);
	ck_assert_uint_eq(d.rank, PEER_ALL_RANKS);
	ck_assert_uint_eq(d.code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_str_eq(d.job, "x");
}
END_TEST

START_TEST(test_peer_abort)
{
	struct peer_abort m = { V64, MCCL_ERR_ABORTED, V32 }, d;
	char msg[PEER_TEXT_MAX];

	memset(msg, 'm', sizeof(msg));
	rt(&peer_proto, PEER_ABORT, &m, msg, sizeof(msg), &d);
	ck_assert_uint_eq(d.job_id, V64);
	ck_assert_uint_eq(d.code, MCCL_ERR_ABORTED);
	ck_assert_uint_eq(d.origin, V32);
}
END_TEST

START_TEST(test_peer_data)
{
	struct peer_data_hello h = { V64, V32, V32B }, dh;
	struct peer_ophdr o, dop;
	uint8_t payload[4096];

	rt(&peer_proto, PEER_DATA_HELLO, &h, NULL, 0, &dh);
	ck_assert_uint_eq(dh.job_id, V64);
	ck_assert_uint_eq(dh.node, V32);
	ck_assert_uint_eq(dh.stream, V32B);

	memset(&o, 0, sizeof(o));
	o.seq = V64;
	o.coll = COLL_REDUCE_SCATTER;
	o.dtype = 9;
	o.redop = V8;
	o.algo = 0xee;
	o.root = V32;
	o.count = 0x0102030405060708ULL;
	rt(&peer_proto, PEER_DATA_OPHDR, &o, NULL, 0, &dop);
	ck_assert_uint_eq(dop.seq, V64);
	ck_assert_uint_eq(dop.coll, COLL_REDUCE_SCATTER);
	ck_assert_uint_eq(dop.dtype, 9);
	ck_assert_uint_eq(dop.redop, V8);
	ck_assert_uint_eq(dop.algo, 0xee);
	ck_assert_uint_eq(dop.root, V32);
	ck_assert_uint_eq(dop.count, o.count);

	{
		/* Raw fields (nonces, MACs) need no NUL, unlike strings. */
		struct peer_auth_hello ah, ahd;
		struct peer_auth_challenge ac, acd;
		struct peer_auth_response ar, ard;

		ah.node = V32;
		memset(ah.nonce, 0xab, sizeof(ah.nonce));
		rt(&peer_proto, PEER_AUTH_HELLO, &ah, NULL, 0, &ahd);
		ck_assert_uint_eq(ahd.node, V32);
		ck_assert_mem_eq(ahd.nonce, ah.nonce, sizeof(ah.nonce));
		ac.node = V32B;
		memset(ac.nonce, 0xcd, sizeof(ac.nonce));
		memset(ac.mac, 0xef, sizeof(ac.mac));
		rt(&peer_proto, PEER_AUTH_CHALLENGE, &ac, NULL, 0, &acd);
		ck_assert_uint_eq(acd.node, V32B);
		ck_assert_mem_eq(acd.nonce, ac.nonce, sizeof(ac.nonce));
		ck_assert_mem_eq(acd.mac, ac.mac, sizeof(ac.mac));
		memset(ar.mac, 0x5a, sizeof(ar.mac));
		rt(&peer_proto, PEER_AUTH_RESPONSE, &ar, NULL, 0, &ard);
		ck_assert_mem_eq(ard.mac, ar.mac, sizeof(ar.mac));
	}
	{
		struct peer_p2p pm = { V32, V32B, 0xfffffffeU,
		    0x0102030405060708ULL }, pd;

		rt(&peer_proto, PEER_P2P, &pm, NULL, 0, &pd);
		ck_assert_uint_eq(pd.src, V32);
		ck_assert_uint_eq(pd.dst, V32B);
		ck_assert_uint_eq(pd.tag, 0xfffffffeU);
		ck_assert_uint_eq(pd.bytes, pm.bytes);
	}

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i ^ (i >> 8));
	rt(&peer_proto, PEER_DATA, NULL, payload, sizeof(payload), NULL);
	rt(&peer_proto, PEER_DATA, NULL, NULL, 0, NULL);
}
END_TEST

/* The largest data frame the table allows. */
START_TEST(test_peer_data_max)
{
	uint32_t max = wire_type_lookup(&peer_proto, PEER_DATA)->trailer_max;
	uint8_t *payload, *f;
	size_t len;

	ck_assert_uint_eq(max, PEER_DATA_MAX);
	ck_assert_ptr_nonnull(payload = malloc(max));
	memset(payload, 0x5a, max);
	payload[max - 1] = 0xa5;
	f = roundtrip(&peer_proto, PEER_DATA, NULL, payload, max, NULL, &len);
	ck_assert_uint_eq(len, WIRE_HDR_LEN + (size_t)max);
	free(f);
	free(payload);
}
END_TEST

/*
 * Every type, generically: fill each field with a distinct pattern (strings
 * with a short name), round trip, compare field by field.  Catches a table
 * entry the typed tests above would miss.
 */
static void
fill_fields(const struct wire_type *t, uint8_t *m)
{
	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *f = &t->fields[i];

		if (f->kind == WIRE_BYTES) {
			memset(m + f->offset, 0, f->size);
			snprintf((char *)m + f->offset, f->size, "f%zu", i);
		} else
			for (size_t j = 0; j < f->size; j++)
				m[f->offset + j] = (uint8_t)(0x80 + i * 8 + j);
	}
}

START_TEST(test_generic_roundtrip)
{
	const struct wire_proto *proto;
	const struct wire_type *t = type_at((size_t)_i, &proto);
	uint8_t m[1024], d[1024], trailer[64];
	size_t tlen = t->trailer_max < sizeof(trailer) ? t->trailer_max :
	    sizeof(trailer);

	ck_assert_uint_le(t->host_size, sizeof(m));
	memset(m, 0x77, sizeof(m));
	memset(d, 0x33, sizeof(d));
	fill_fields(t, m);
	for (size_t i = 0; i < tlen; i++)
		trailer[i] = (uint8_t)(0xf0 ^ i);
	rt(proto, t->type, m, trailer, tlen, d);
	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *f = &t->fields[i];

		ck_assert_msg(memcmp(m + f->offset, d + f->offset, f->size) == 0,
		    "%s: field %zu differs", t->name, i);
	}
}
END_TEST

/* ---- exact bytes ---- */

START_TEST(test_bytes_seg_ok)
{
	static const uint8_t want[] = {
		0x4d, 0x43, 0x43, 0x4c,		/* "MCCL" */
		0x00, 0x08,			/* version 8 */
		0x00, 0xc9,			/* IPC_SEG_OK = 201 */
		0x00, 0x00, 0x00, 0x04,		/* body length */
		0x01, 0x02, 0x03, 0x04,		/* seg_id */
	};
	struct ipc_seg_ok m = { 0x01020304 };
	uint8_t out[64];

	memset(out, 0xee, sizeof(out));
	ck_assert_uint_eq(wire_encode(&ipc_proto, IPC_SEG_OK, &m, NULL, 0, out,
	    sizeof(out)), sizeof(want));
	ck_assert_int_eq(memcmp(out, want, sizeof(want)), 0);
	ck_assert_uint_eq(out[sizeof(want)], 0xee);
}
END_TEST

START_TEST(test_bytes_op)
{
	static const uint8_t want[] = {
		0x4d, 0x43, 0x43, 0x4c, 0x00, 0x08, 0x01, 0x90,	/* v8, 400 */
		0x00, 0x00, 0x00, 0x46,				/* 70 */
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,	/* seq */
		0x11, 0x12, 0x13, 0x14,		/* coll dtype redop algo */
		0x21, 0x22, 0x23, 0x24,		/* root */
		0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,	/* count */
		0x41, 0x42, 0x43, 0x44,		/* send_seg */
		0x51, 0x52, 0x53, 0x54,		/* recv_seg */
		0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,	/* send_off */
		0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,	/* recv_off */
		0x81, 0x82, 0x83, 0x84,		/* timeout_ms */
		0x91, 0x92, 0x93, 0x94,		/* tag */
		0xa1, 0xa2, 0xa3, 0xa4,		/* vec_seg */
		0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8,	/* vec_off */
		0xc1,				/* wire */
		0xd1,				/* flags */
	};
	struct ipc_op m;
	uint8_t out[128];

	memset(&m, 0, sizeof(m));
	m.seq = 0x0102030405060708ULL;
	m.coll = 0x11;
	m.dtype = 0x12;
	m.redop = 0x13;
	m.algo = 0x14;
	m.root = 0x21222324;
	m.count = 0x3132333435363738ULL;
	m.send_seg = 0x41424344;
	m.recv_seg = 0x51525354;
	m.send_off = 0x6162636465666768ULL;
	m.recv_off = 0x7172737475767778ULL;
	m.timeout_ms = 0x81828384;
	m.tag = 0x91929394;
	m.vec_seg = 0xa1a2a3a4;
	m.vec_off = 0xb1b2b3b4b5b6b7b8ULL;
	m.wire = 0xc1;
	m.flags = 0xd1;
	ck_assert_uint_eq(wire_encode(&ipc_proto, IPC_OP, &m, NULL, 0, out,
	    sizeof(out)), sizeof(want));
	ck_assert_int_eq(memcmp(out, want, sizeof(want)), 0);
}
END_TEST

START_TEST(test_bytes_peer)
{
	static const uint8_t want[] = {
		0x4d, 0x43, 0x43, 0x50,		/* "MCCP" */
		0x00, 0x0c, 0x00, 0x65,		/* v12, PEER_PING = 101 */
		0x00, 0x00, 0x00, 0x08,
		0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,
		'o', 'k',			/* not part of the frame */
	};
	struct peer_ping m = { 0xa1a2a3a4a5a6a7a8ULL }, d;
	struct wire_hdr h;
	uint8_t out[64];

	ck_assert_uint_eq(wire_encode(&peer_proto, PEER_PING, &m, NULL, 0, out,
	    sizeof(out)), sizeof(want) - 2);
	ck_assert_int_eq(memcmp(out, want, sizeof(want) - 2), 0);

	/* And decoding the reference bytes gives the values back. */
	wire_hdr_decode(want, &h);
	ck_assert_uint_eq(h.magic, PEER_MAGIC);
	ck_assert_uint_eq(h.version, 12);
	ck_assert_uint_eq(h.type, PEER_PING);
	ck_assert_uint_eq(h.len, 8);
	ck_assert_int_eq(wire_decode(wire_type_lookup(&peer_proto, PEER_PING),
	    want + WIRE_HDR_LEN, h.len, &d, NULL, NULL, NULL, 0), 0);
	ck_assert_uint_eq(d.stamp_ns, m.stamp_ns);
}
END_TEST

START_TEST(test_hdr_codec)
{
	struct wire_hdr h = { 0xdeadbeef, 0xfeed, 0xabcd, 0x89abcdef }, d;
	static const uint8_t want[WIRE_HDR_LEN] = {
		0xde, 0xad, 0xbe, 0xef, 0xfe, 0xed, 0xab, 0xcd,
		0x89, 0xab, 0xcd, 0xef,
	};
	uint8_t out[WIRE_HDR_LEN];

	wire_hdr_encode(out, &h);
	ck_assert_int_eq(memcmp(out, want, sizeof(want)), 0);
	wire_hdr_decode(out, &d);
	ck_assert_uint_eq(d.magic, h.magic);
	ck_assert_uint_eq(d.version, h.version);
	ck_assert_uint_eq(d.type, h.type);
	ck_assert_uint_eq(d.len, h.len);
}
END_TEST

/* ---- header checks ---- */

static void
hdr(uint8_t *p, uint32_t magic, uint16_t version, uint16_t type, uint32_t len)
{
	struct wire_hdr h = { magic, version, type, len };

	wire_hdr_encode(p, &h);
}

/* The check must fail and the message must contain every string given. */
static void
hdr_reject(const struct wire_proto *proto, const uint8_t *p, const char *w1,
    const char *w2, const char *w3)
{
	const struct wire_type *t = NULL;
	struct wire_hdr h;
	char err[256] = "";

	ck_assert_int_eq(wire_hdr_check(proto, p, &h, &t, err, sizeof(err)), -1);
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(err, w1) != NULL, "\"%s\" lacks \"%s\"", err, w1);
	if (w2 != NULL)
		ck_assert_msg(strstr(err, w2) != NULL, "\"%s\" lacks \"%s\"",
		    err, w2);
	if (w3 != NULL)
		ck_assert_msg(strstr(err, w3) != NULL, "\"%s\" lacks \"%s\"",
		    err, w3);
}

static void
hdr_accept(const struct wire_proto *proto, const uint8_t *p,
    const struct wire_type *want)
{
	const struct wire_type *t = NULL;
	struct wire_hdr h;
	char err[256] = "";

	ck_assert_msg(wire_hdr_check(proto, p, &h, &t, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_ptr_eq(t, want);
}

static void
check_proto_hdr(const struct wire_proto *proto, const struct wire_proto *other)
{
	uint16_t first = proto->types[0].type;
	uint8_t p[WIRE_HDR_LEN];
	char num[32];
	size_t fixed = wire_fixed_len(&proto->types[0]);

	hdr(p, proto->magic, proto->version, first, (uint32_t)fixed);
	hdr_accept(proto, p, &proto->types[0]);

	/* Magic: wrong, and the other protocol's. */
	hdr(p, proto->magic ^ 1, proto->version, first, (uint32_t)fixed);
	hdr_reject(proto, p, "magic", proto->name, NULL);
	hdr(p, other->magic, proto->version, first, (uint32_t)fixed);
	hdr_reject(proto, p, "magic", proto->name, NULL);

	/* Version: older and newer. */
	hdr(p, proto->magic, 0, first, (uint32_t)fixed);
	hdr_reject(proto, p, "version 0", proto->name, NULL);
	hdr(p, proto->magic, (uint16_t)(proto->version + 1), first,
	    (uint32_t)fixed);
	snprintf(num, sizeof(num), "version %u", proto->version + 1);
	hdr_reject(proto, p, num, proto->name, NULL);

	/* Types not in the table. */
	for (uint32_t ty = 0; ty <= 0xffff; ty++) {
		if (wire_type_lookup(proto, (uint16_t)ty) != NULL)
			continue;
		hdr(p, proto->magic, proto->version, (uint16_t)ty, 0);
		snprintf(num, sizeof(num), "type %u", ty);
		hdr_reject(proto, p, "unknown", proto->name, num);
	}

	/* The checks come in order: magic, version, type, length. */
	hdr(p, 0, 0, 0, 0xffffffffU);
	hdr_reject(proto, p, "magic", NULL, NULL);
	hdr(p, proto->magic, 0, 0, 0xffffffffU);
	hdr_reject(proto, p, "version", NULL, NULL);
	hdr(p, proto->magic, proto->version, 0, 0xffffffffU);
	hdr_reject(proto, p, "unknown", NULL, NULL);
}

START_TEST(test_hdr_ipc)
{
	check_proto_hdr(&ipc_proto, &peer_proto);
}
END_TEST

START_TEST(test_hdr_peer)
{
	check_proto_hdr(&peer_proto, &ipc_proto);
}
END_TEST

/* Per type: the body length must lie in [fixed, fixed + trailer_max]. */
START_TEST(test_hdr_length)
{
	const struct wire_proto *proto;
	const struct wire_type *t = type_at((size_t)_i, &proto);
	uint32_t fixed = (uint32_t)wire_fixed_len(t);
	uint8_t p[WIRE_HDR_LEN];
	char num[32];

	hdr(p, proto->magic, proto->version, t->type, fixed);
	hdr_accept(proto, p, t);
	hdr(p, proto->magic, proto->version, t->type, fixed + t->trailer_max);
	hdr_accept(proto, p, t);

	if (fixed > 0) {
		hdr(p, proto->magic, proto->version, t->type, fixed - 1);
		snprintf(num, sizeof(num), "length %u", fixed - 1);
		hdr_reject(proto, p, t->name, num, proto->name);
		hdr(p, proto->magic, proto->version, t->type, 0);
		hdr_reject(proto, p, t->name, "length 0", NULL);
	}
	hdr(p, proto->magic, proto->version, t->type, fixed + t->trailer_max + 1);
	snprintf(num, sizeof(num), "length %u", fixed + t->trailer_max + 1);
	hdr_reject(proto, p, t->name, num, proto->name);
	hdr(p, proto->magic, proto->version, t->type, 0xffffffffU);
	hdr_reject(proto, p, t->name, "length", NULL);

	/* wire_decode checks the length again on its own. */
	if (fixed > 0) {
		uint8_t body[1024] = { 0 }, m[1024];
		char err[256] = "";

		ck_assert_uint_le(fixed, sizeof(body));
		ck_assert_int_eq(wire_decode(t, body, fixed - 1, m, NULL, NULL,
		    err, sizeof(err)), -1);
		ck_assert_msg(strstr(err, t->name) != NULL, "%s", err);
	}
}
END_TEST

/* ---- the decoder refuses unterminated strings ---- */

START_TEST(test_unterminated)
{
	const struct wire_proto *proto;
	const struct wire_type *t = type_at((size_t)_i, &proto);
	uint8_t m[1024], d[1024], frame[2048];
	size_t pos = WIRE_HDR_LEN, len;
	char err[256];
	int nbytes = 0;

	fill_fields(t, m);
	len = wire_encode(proto, t->type, m, NULL, 0, frame, sizeof(frame));
	ck_assert_uint_gt(len, 0);
	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *f = &t->fields[i];
		uint8_t bad[2048];

		if (f->kind == WIRE_BYTES) {
			/* Every byte of the field set, no NUL anywhere. */
			memcpy(bad, frame, len);
			memset(bad + pos, 'A', f->size);
			err[0] = '\0';
			ck_assert_int_eq(wire_decode(t, bad + WIRE_HDR_LEN,
			    len - WIRE_HDR_LEN, d, NULL, NULL, err,
			    sizeof(err)), -1);
			ck_assert_msg(strstr(err, "unterminated") != NULL &&
			    strstr(err, t->name) != NULL, "%s", err);
			/* A NUL in the last byte is enough. */
			bad[pos + f->size - 1] = '\0';
			ck_assert_int_eq(wire_decode(t, bad + WIRE_HDR_LEN,
			    len - WIRE_HDR_LEN, d, NULL, NULL, err,
			    sizeof(err)), 0);
			nbytes++;
		}
		pos += f->size;
	}
	/* These types carry a name; make sure the loop saw it. */
	if (proto == &ipc_proto && (t->type == IPC_JOIN ||
	    t->type == IPC_HELLO_OK))
		ck_assert_int_eq(nbytes, 1);
	if (proto == &peer_proto && (t->type == PEER_HELLO ||
	    t->type == PEER_JOIN || t->type == PEER_FORMED ||
	    t->type == PEER_JOIN_FAIL))
		ck_assert_int_eq(nbytes, 1);
}
END_TEST

/* The brief's example, spelled out: an IPC_JOIN whose job name has no NUL. */
START_TEST(test_unterminated_job)
{
	const struct wire_type *t;
	struct ipc_join m, d;
	struct wire_hdr h;
	uint8_t frame[512];
	char err[256] = "";
	size_t len;

	memset(&m, 0, sizeof(m));
	m.nranks = 2;
	fill_name(m.job, sizeof(m.job), "train");
	len = wire_encode(&ipc_proto, IPC_JOIN, &m, NULL, 0, frame,
	    sizeof(frame));
	ck_assert_uint_eq(len, WIRE_HDR_LEN + 12 + JOB_NAME_MAX);
	/* The name is the last field: fill it, NUL and padding included. */
	memset(frame + WIRE_HDR_LEN + 12, 'J', JOB_NAME_MAX);
	ck_assert_int_eq(wire_hdr_check(&ipc_proto, frame, &h, &t, err,
	    sizeof(err)), 0);
	ck_assert_int_eq(wire_decode(t, frame + WIRE_HDR_LEN, h.len, &d, NULL,
	    NULL, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "IPC_JOIN") != NULL, "%s", err);
	ck_assert_msg(strstr(err, "unterminated") != NULL, "%s", err);
}
END_TEST

/* ---- the encoder refuses what does not fit ---- */

START_TEST(test_encode_limits)
{
	const struct wire_proto *proto;
	const struct wire_type *t = type_at((size_t)_i, &proto);
	size_t need = WIRE_HDR_LEN + wire_fixed_len(t);
	uint8_t m[1024], *out, *tr;

	fill_fields(t, m);
	/* Exactly the size of the frame: fits; one byte less: 0. */
	ck_assert_ptr_nonnull(out = malloc(need));
	ck_assert_uint_eq(wire_encode(proto, t->type, m, NULL, 0, out, need),
	    need);
	ck_assert_uint_eq(wire_encode(proto, t->type, m, NULL, 0, out,
	    need - 1), 0);
	ck_assert_uint_eq(wire_encode(proto, t->type, m, NULL, 0, out, 0), 0);
	free(out);

	/* A trailer one byte over the type's maximum: 0, whatever the room. */
	ck_assert_ptr_nonnull(tr = calloc(1, (size_t)t->trailer_max + 1));
	ck_assert_ptr_nonnull(out = malloc(need + t->trailer_max + 1));
	ck_assert_uint_eq(wire_encode(proto, t->type, m, tr,
	    (size_t)t->trailer_max + 1, out, need + t->trailer_max + 1), 0);
	if (t->trailer_max > 0) {
		/* Trailer allowed, but out one byte short of it. */
		ck_assert_uint_eq(wire_encode(proto, t->type, m, tr, 1, out,
		    need), 0);
		ck_assert_uint_eq(wire_encode(proto, t->type, m, tr, 1, out,
		    need + 1), need + 1);
	}
	free(out);
	free(tr);
}
END_TEST

START_TEST(test_encode_unknown)
{
	uint8_t out[256] = { 0 }, m[256] = { 0 };

	ck_assert_uint_eq(wire_encode(&ipc_proto, 0, m, NULL, 0, out,
	    sizeof(out)), 0);
	/* Numbers of the other protocol that this one lacks. */
	ck_assert_ptr_null(wire_type_lookup(&ipc_proto, PEER_ABORT));
	ck_assert_uint_eq(wire_encode(&ipc_proto, PEER_ABORT, m, NULL, 0,
	    out, sizeof(out)), 0);
	ck_assert_ptr_null(wire_type_lookup(&peer_proto, IPC_OP));
	ck_assert_uint_eq(wire_encode(&peer_proto, IPC_OP, m, NULL, 0, out,
	    sizeof(out)), 0);
	ck_assert_uint_eq(wire_encode(&peer_proto, 0xffff, m, NULL, 0, out,
	    sizeof(out)), 0);
}
END_TEST

/* ---- string helpers ---- */

START_TEST(test_strings)
{
	char buf[8];

	ck_assert_uint_eq(wire_strlcpy(buf, "abc", sizeof(buf)), 3);
	ck_assert_str_eq(buf, "abc");
	ck_assert_uint_eq(wire_strlcpy(buf, "abcdefghij", sizeof(buf)), 10);
	ck_assert_str_eq(buf, "abcdefg");
	memset(buf, 'x', sizeof(buf));
	ck_assert_uint_eq(wire_strlcpy(buf, "abc", 0), 3);
	ck_assert_int_eq(buf[0], 'x');
	ck_assert_uint_eq(wire_strlcpy(buf, "abc", 1), 3);
	ck_assert_str_eq(buf, "");

	memset(buf, 'a', sizeof(buf));
	ck_assert_int_eq(wire_str_ok(buf, sizeof(buf)), 0);
	buf[7] = '\0';
	ck_assert_int_ne(wire_str_ok(buf, sizeof(buf)), 0);
	ck_assert_int_eq(wire_str_ok(buf, 7), 0);
	buf[0] = '\0';
	ck_assert_int_ne(wire_str_ok(buf, 1), 0);
}
END_TEST

/* ---- names and directories ---- */

START_TEST(test_job_names)
{
	char err[256], longname[JOB_NAME_MAX + 1];

	ck_assert_int_eq(proto_job_name_check("train-7 (é)", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(proto_job_name_check("", err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "1 to 127 bytes"));
	ck_assert_int_eq(proto_job_name_check("a\nb", err, sizeof(err)), -1);
	ck_assert_str_eq(err, "job name has a control character (0x0a) at "
	    "byte 1");
	ck_assert_int_eq(proto_job_name_check("ab\x7f", err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "(0x7f) at byte 2"));
	/* UTF-8 only: invalid bytes, overlong forms, surrogates, too high */
	ck_assert_int_eq(proto_job_name_check("\xf0\x9d\x84\x9e clef", err,
	    sizeof(err)), 0);
	ck_assert_int_eq(proto_job_name_check("x\xff\xfe", err, sizeof(err)),
	    -1);
	ck_assert_str_eq(err, "job name is not UTF-8 (byte 0xff at 1)");
	ck_assert_int_eq(proto_job_name_check("\xc0\xaf", err, sizeof(err)),
	    -1);
	ck_assert_int_eq(proto_job_name_check("\xe0\x80\xaf", err,
	    sizeof(err)), -1);
	ck_assert_int_eq(proto_job_name_check("\xed\xa0\x80", err,
	    sizeof(err)), -1);
	ck_assert_int_eq(proto_job_name_check("\xf4\x90\x80\x80", err,
	    sizeof(err)), -1);
	ck_assert_int_eq(proto_job_name_check("ab\xe2\x82", err, sizeof(err)),
	    -1);
	ck_assert_str_eq(err, "job name is not UTF-8 (byte 0xe2 at 2)");
	ck_assert_int_eq(proto_job_name_check("a\xc2\x9b", err, sizeof(err)),
	    -1);
	ck_assert_str_eq(err, "job name has a control character (0x9b) at "
	    "byte 1");
	ck_assert_int_eq(proto_job_name_check("\xc2\xa0nbsp", err,
	    sizeof(err)), 0);
	memset(longname, 'x', JOB_NAME_MAX);
	longname[JOB_NAME_MAX] = '\0';
	ck_assert_int_eq(proto_job_name_check(longname, err, sizeof(err)), -1);
	longname[JOB_NAME_MAX - 1] = '\0';
	ck_assert_int_eq(proto_job_name_check(longname, err, sizeof(err)), 0);
}
END_TEST

/* A directory is trusted by owner and mode; the file in it need not exist. */
START_TEST(test_dir_check)
{
	char dir[] = "/tmp/mccl-unit.XXXXXX", path[64], err[512];
	uid_t me = geteuid(), other = geteuid() + 1;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/mccld.sock", dir);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(proto_dir_check(path, &me, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(proto_dir_check(path, &other, 1, err, sizeof(err)),
	    -1);
	ck_assert_ptr_nonnull(strstr(err, "belongs to uid"));
	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(proto_dir_check(path, &me, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "writable by other users (mode "
	    "0777)"));
	ck_assert_int_eq(chmod(dir, 01777), 0);	/* sticky, like /tmp */
	ck_assert_int_eq(proto_dir_check(path, &me, 1, err, sizeof(err)), 0);
	ck_assert_int_eq(chmod(dir, 0775), 0);
	ck_assert_int_eq(proto_dir_check(path, &me, 1, err, sizeof(err)), -1);
	ck_assert_int_eq(rmdir(dir), 0);
	ck_assert_int_eq(proto_dir_check(path, &me, 1, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "No such file"));
}
END_TEST

/* spin_parse's forms and bounds; a fixed budget is what was set. */
START_TEST(test_spin)
{
	char err[128];
	int32_t us = 7;
	uint64_t b;

	ck_assert_int_eq(spin_parse("auto", &us, err, sizeof(err)), 0);
	ck_assert_int_eq(us, SPIN_AUTO);
	ck_assert_int_eq(spin_parse("0", &us, err, sizeof(err)), 0);
	ck_assert_int_eq(us, 0);
	ck_assert_int_eq(spin_parse("100000", &us, err, sizeof(err)), 0);
	ck_assert_int_eq(us, 100000);
	us = 7;
	ck_assert_int_eq(spin_parse("100001", &us, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "\"100001\": expected auto or microseconds "
	    "from 0 to 100000");
	ck_assert_int_eq(spin_parse("-3", &us, err, sizeof(err)), -1);
	ck_assert_int_eq(spin_parse("", &us, err, sizeof(err)), -1);
	ck_assert_int_eq(spin_parse("12us", &us, err, sizeof(err)), -1);
	ck_assert_int_eq(us, 7);	/* refused: unchanged */
	ck_assert_uint_eq(spin_budget_ns(0), 0);
	ck_assert_uint_eq(spin_budget_ns(25), 25000);
	b = spin_budget_ns(SPIN_AUTO);
	ck_assert(b == 0 || b == SPIN_AUTO_US * 1000ULL);
}
END_TEST

/* Overlap only in place: the same buffer, or one's own block. */
START_TEST(test_bufs_ok)
{
	/* apart, touching, and empty sides overlap nothing */
	ck_assert(proto_bufs_ok(COLL_ALLREDUCE, 0, 1000, 100, 2000, 100));
	ck_assert(proto_bufs_ok(COLL_ALLREDUCE, 0, 1000, 100, 1100, 100));
	ck_assert(proto_bufs_ok(COLL_ALLREDUCE, 0, 1000, 0, 1000, 100));
	ck_assert(proto_bufs_ok(COLL_REDUCE, 1, 1000, 100, 1000, 0));
	/* the same buffer, in place; shifted by a byte, refused */
	ck_assert(proto_bufs_ok(COLL_ALLREDUCE, 0, 1000, 100, 1000, 100));
	ck_assert(!proto_bufs_ok(COLL_ALLREDUCE, 0, 1000, 100, 1001, 100));
	ck_assert(!proto_bufs_ok(COLL_ALLTOALL, 0, 1008, 400, 1000, 400));
	ck_assert(!proto_bufs_ok(COLL_BROADCAST, 0, 1000, 100, 1050, 100));
	/* allgather: rank 2's send is its block of recv, not another's */
	ck_assert(proto_bufs_ok(COLL_ALLGATHER, 2, 1200, 100, 1000, 400));
	ck_assert(!proto_bufs_ok(COLL_ALLGATHER, 2, 1100, 100, 1000, 400));
	ck_assert(!proto_bufs_ok(COLL_ALLGATHER, 0, 1004, 100, 1000, 400));
	/* reduce_scatter: rank 3's recv is its block of send */
	ck_assert(proto_bufs_ok(COLL_REDUCE_SCATTER, 3, 1000, 400, 1300, 100));
	ck_assert(!proto_bufs_ok(COLL_REDUCE_SCATTER, 3, 1000, 400, 1000,
	    100));
}
END_TEST

static Suite *
proto_suite(void)
{
	Suite *s = suite_create("proto");
	int n = (int)ntypes_all();
	TCase *tc;

	tc = tcase_create("tables");
	tcase_add_test(tc, test_tables);
	tcase_add_loop_test(tc, test_table_layout, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("roundtrip");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ipc_hello);
	tcase_add_test(tc, test_ipc_hello_ok);
	tcase_add_test(tc, test_ipc_error);
	tcase_add_test(tc, test_ipc_seg);
	tcase_add_test(tc, test_ipc_join);
	tcase_add_test(tc, test_ipc_joined);
	tcase_add_test(tc, test_ipc_empty);
	tcase_add_test(tc, test_ipc_op);
	tcase_add_test(tc, test_ipc_job_failed);
	tcase_add_test(tc, test_doorbell_layout);
	tcase_add_test(tc, test_ipc_op_done);
	tcase_add_test(tc, test_ipc_ctl);
	tcase_add_test(tc, test_peer_hello);
	tcase_add_test(tc, test_peer_ping);
	tcase_add_test(tc, test_peer_silent);
	tcase_add_test(tc, test_peer_data_link);
	tcase_add_test(tc, test_peer_join);
	tcase_add_test(tc, test_peer_formed);
	tcase_add_test(tc, test_peer_join_fail);
	tcase_add_test(tc, test_peer_abort);
	tcase_add_test(tc, test_peer_data);
	tcase_add_test(tc, test_peer_data_max);
	tcase_add_loop_test(tc, test_generic_roundtrip, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("bytes");
	tcase_add_test(tc, test_bytes_seg_ok);
	tcase_add_test(tc, test_bytes_op);
	tcase_add_test(tc, test_bytes_peer);
	tcase_add_test(tc, test_hdr_codec);
	tcase_add_test(tc, test_bufs_ok);
	suite_add_tcase(s, tc);

	tc = tcase_create("reject");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hdr_ipc);
	tcase_add_test(tc, test_hdr_peer);
	tcase_add_loop_test(tc, test_hdr_length, 0, n);
	tcase_add_loop_test(tc, test_unterminated, 0, n);
	tcase_add_test(tc, test_unterminated_job);
	tcase_add_loop_test(tc, test_encode_limits, 0, n);
	tcase_add_test(tc, test_encode_unknown);
	tcase_add_test(tc, test_strings);
	tcase_add_test(tc, test_job_names);
	tcase_add_test(tc, test_dir_check);
	tcase_add_test(tc, test_spin);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(proto_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
