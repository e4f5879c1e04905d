/*
 * peer.h: the protocol between daemons over TCP.  A connection is either a
 * control connection (starts with PEER_HELLO: job formation, aborts,
 * heartbeats) or a data link of one job (starts with PEER_DATA_HELLO:
 * operation headers and bulk data, read straight into their destination).
 * Integers are big-endian on the wire.  With a cluster key, every
 * connection starts with a mutual challenge-response before anything else:
 * connector AUTH_HELLO (its nonce), acceptor AUTH_CHALLENGE (its nonce and
 * HMAC over both), connector AUTH_RESPONSE (HMAC over both, other role).
 *
 * Version history:
 *   1  first version.
 *   2  peer_ophdr.algo (was pad, always 0): the allreduce algorithm run;
 *      peer_formed.lanes and the data streams of lanes past the first.
 *   3  ALGO_DIRECT in peer_ophdr.algo: the one-round small allreduce.
 *   4  PEER_DATA_LINK and PEER_DATA_READY after PEER_DATA_HELLO: every
 *      data link picks its transport (TCP, or the RDMA mesh).
 *   5  PEER_CHECK_RUN and PEER_CHECK_DONE: mcclctl check.
 *   6  peer_ophdr.wire: the operation's float32 data crosses as bfloat16
 *      or float16.
 *   7  a ring allreduce takes another lane for each 256 KiB (was 1 MiB),
 *      and one on a 16-bit wire is cut into parts per lane too: nodes of
 *      6 would cut the same op differently.
 *   8  peer_join and peer_formed carry the link cost (alpha, two betas, gamma)
 *      AUTO predicts from: each node's own, then the job's worst of them;
 *      ALGO_TREE in peer_ophdr.algo, and a broadcast's header names its
 *      algorithm (was 0); a job's lanes past the first link ring
 *      neighbours only (they carry the ring allreduce's other rings).
 *   9  PEER_SILENT: a node that heartbeats only some of its peers (the
 *      sparse overlay of clusters past heartbeat_mesh_max_nodes) tells
 *      every node of one it found silent; each pings it before it calls
 *      it down.
 *  10  send/recv links are made on a pair's first message, one each way:
 *      the sender dials (whichever node is first), the receiver only
 *      reads it.  A job's start makes the lanes' links alone.
 *  11  a large ring allreduce balances its lanes: the last quarter of the
 *      buffer goes in pieces that node 0 hands to its lanes as they
 *      finish, each announced down the lane's ring as a 4-byte index
 *      (allreduce.c).
 *  12  peer_ophdr.wire is the wire the ranks asked for, whatever runs (was
 *      the one the data crossed on): nodes that disagree fail every
 *      operation, not only those the ring narrows.  A check link's job id
 *      has PEER_CHECK_FORCE for mcclctl check --force; without it, a node
 *      that runs jobs answers the link's first command with CK_BUSY.
 */
#ifndef MCCL_PEER_H
#define MCCL_PEER_H

#include <stdint.h>
#include "wire.h"
#include "ipc.h"

#define PEER_MAGIC		0x4d434350U	/* "MCCP" */
#define PEER_VERSION		12
#define PEER_PORT_DEFAULT	7470		/* a node's address without a port */
#define PEER_MSG_MAX		(1024 * 1024)	/* control frames */
#define PEER_DATA_MAX		(64U * 1024 * 1024) /* one data frame's payload */
#define PEER_TEXT_MAX		1024
#define PEER_RANKS_MAX		((PEER_MSG_MAX - 512) / 4) /* ranks in a job */

enum peer_type {
	/* 100: session */
	PEER_HELLO = 100,
	PEER_PING = 101,
	PEER_PONG = 102,
	PEER_AUTH_HELLO = 103,	/* first on every connection, with a key */
	PEER_AUTH_CHALLENGE = 104,
	PEER_AUTH_RESPONSE = 105,
	PEER_SILENT = 106,	/* a node its watcher no longer hears */
	/* 200: job formation and failure */
	PEER_JOIN = 200,	/* node -> coordinator; trailer: u32 ranks */
	PEER_FORMED = 201,	/* coordinator -> nodes; trailer: u32 node per rank */
	PEER_JOIN_FAIL = 202,	/* coordinator -> node; trailer: message */
	PEER_ABORT = 203,	/* node -> nodes of the job; trailer: message */
	PEER_JOB_QUERY = 204,	/* mcclctl job: what do your ranks do? */
	PEER_JOB_INFO = 205,	/* the answer; trailer: a JSON document */
	PEER_CHECK_RUN = 206,	/* mcclctl check: measure a pair of nodes */
	PEER_CHECK_DONE = 207,	/* what was measured; trailer: why it failed */
	/* 300: data links */
	PEER_DATA_HELLO = 300,
	PEER_DATA_OPHDR = 301,	/* first frame of every operation on a link */
	PEER_DATA = 302,	/* trailer: payload */
	PEER_P2P = 303,		/* a message on a send/recv link, from its
				   dialler: exactly peer_p2p.bytes of
				   payload follow */
	PEER_DATA_LINK = 304,	/* each way after DATA_HELLO: the transport
				   offered, and how to reach this end */
	PEER_DATA_READY = 305,	/* each way after both LINK: this end can
				   take data; no body */
};

/*
 * Data link streams: each job has, per pair of nodes, a link per lane for
 * collectives, dialled by the node before, made at the job's start (lanes
 * past the first between ring neighbours only); and, once messages flow, a
 * send/recv link each way, dialled by the sender.  Lanes split large
 * allreduces, each a ring of its own, alternately in either direction.
 */
#define PEER_STREAM_COLL	0	/* collectives' lane 0, run by the engine */
#define PEER_STREAM_P2P		1	/* send/recv, run by the p2p thread */
#define PEER_LANES_MAX		8
#define PEER_STREAM_LANE(k)	((k) == 0 ? PEER_STREAM_COLL : (k) + 1)
#define PEER_LANE_OF(s)		((s) == PEER_STREAM_COLL ? 0 : (s) - 1)

struct peer_hello {
	uint32_t	version;
	uint32_t	node_index;
	uint32_t	nnodes;
	uint64_t	cluster_hash;	/* of the node list: both sides must agree */
	char		node_name[NODE_NAME_MAX];
};

struct peer_auth_hello {
	uint32_t	node;		/* the connector's node index */
	uint8_t		nonce[32];
};

struct peer_auth_challenge {
	uint32_t	node;		/* the acceptor's node index */
	uint8_t		nonce[32];
	uint8_t		mac[32];	/* HMAC(key, 'A', connector's nonce,
					   acceptor's nonce, acceptor's index) */
};

struct peer_auth_response {
	uint8_t		mac[32];	/* HMAC(key, 'C', acceptor's nonce,
					   connector's nonce, connector's index) */
};

struct peer_ping {
	uint64_t	stamp_ns;	/* echoed by PONG: round-trip time */
};

struct peer_silent {
	uint32_t	node;		/* the node index not heard from */
	uint32_t	silent_ms;	/* for how long, at the sender */
};

struct peer_join {
	uint32_t	uid;
	uint32_t	nranks;
	uint32_t	node;		/* the sender's node index */
	uint32_t	nlocal;		/* ranks in the trailer; 0 withdraws */
	uint32_t	timeout_ms;
	char		job[JOB_NAME_MAX];
	uint32_t	alpha_ns;	/* the sender's link cost (engine/algo.h) */
	uint32_t	beta_ps;
	uint32_t	gamma_ps;
	uint32_t	beta_pair_ps;
};

struct peer_formed {
	uint64_t	job_id;
	uint32_t	uid;
	uint32_t	nranks;
	char		job[JOB_NAME_MAX];
	uint32_t	lanes;		/* collective links per pair of nodes,
					   1..PEER_LANES_MAX: the coordinator's
					   streams_per_peer */
	uint32_t	alpha_ns;	/* the job's link cost: the worst of */
	uint32_t	beta_ps;	/* its nodes' (engine/algo.h), from */
	uint32_t	gamma_ps;	/* which every node's AUTO predicts */
	uint32_t	beta_pair_ps;
};

#define PEER_ALL_RANKS	0xffffffffU

struct peer_join_fail {
	uint32_t	uid;
	uint32_t	rank;		/* PEER_ALL_RANKS: every local rank */
	uint32_t	code;
	char		job[JOB_NAME_MAX];
};

struct peer_abort {
	uint64_t	job_id;
	uint32_t	code;
	uint32_t	origin;		/* node that saw the failure */
};

struct peer_job_query {
	uint64_t	job_id;
	uint32_t	qid;		/* the asker's query, echoed */
};

/*
 * mcclctl check: the checking node asks node `from` (the lower index of a
 * pair) to measure its data path to node `to`: lanes data links, each way
 * for ms.  Those links carry this job id in DATA_HELLO, which no job has.
 */
#define PEER_CHECK_JOB	(1ULL << 63)
#define PEER_CHECK_FORCE (1ULL << 62)	/* its node measures even while jobs
					   run at either end */

struct peer_check_run {
	uint64_t	check_id;	/* the checking node's, echoed */
	uint32_t	pair;		/* echoed */
	uint32_t	to;		/* cluster index, above the receiver's */
	uint32_t	lanes;		/* 1..PEER_LANES_MAX */
	uint32_t	ms;		/* each way, 1..PEER_CHECK_MS_MAX */
	uint32_t	force;		/* 1: even while jobs run there */
};

#define PEER_CHECK_MS_MAX	10000

struct peer_check_done {
	uint64_t	check_id;
	uint32_t	pair;
	uint32_t	code;		/* 0, or why it failed (trailer) */
	uint64_t	rtt_ns;		/* median round trip of a small frame */
	uint64_t	tx_bytes;	/* from -> to, as `to` received them, */
	uint64_t	tx_ns;		/* in this long */
	uint64_t	rx_bytes;	/* to -> from */
	uint64_t	rx_ns;
};

struct peer_data_hello {
	uint64_t	job_id;
	uint32_t	node;		/* the connecting node's cluster index */
	uint32_t	stream;
};

/*
 * A data link's set-up, sent by both ends at once.  The link runs over RDMA
 * if both offer it, else over TCP.  An end set to one transport ("rdma" or
 * "tcp") says so in `need`, and offers that one or, if it has none to
 * offer, UINT32_MAX; if the two ends cannot agree, both fail the link.  The
 * fields after `need` describe an RDMA end: its reliable-connected queue
 * pair (RoCE or InfiniBand addressing) and the ring of slots the peer
 * writes into, with immediate data (rdma.c).
 */
#define PEER_LINK_TCP	0
#define PEER_LINK_RDMA	1

struct peer_data_link {
	uint32_t	transport;	/* PEER_LINK_*: what this end offers */
	uint32_t	need;		/* PEER_LINK_* + 1: the transport this
					   end is set to, and takes or none;
					   0: any (auto) */
	uint32_t	qpn;		/* queue pair number (24 bits) */
	uint32_t	psn;		/* first packet sequence number (24 bits) */
	uint32_t	lid;		/* InfiniBand local id; 0 on RoCE */
	uint32_t	mtu;		/* enum ibv_mtu of the port */
	uint8_t		gid[16];	/* the port's GID */
	uint64_t	ring_addr;	/* the ring, in this end's memory */
	uint32_t	ring_rkey;
	uint32_t	ring_bytes;	/* a power of two */
};

struct peer_ophdr {
	uint64_t	seq;
	uint8_t		coll;
	uint8_t		dtype;
	uint8_t		redop;
	uint8_t		algo;		/* enum algo_type, resolved; else 0 */
	uint32_t	root;
	uint64_t	count;
	uint8_t		wire;		/* the 16-bit wire its ranks asked for
					   (MCCL_BFLOAT16 or MCCL_FLOAT16;
					   float32 crosses on it where the ring
					   runs a float32 sum), 0: none */
};

struct peer_p2p {
	uint32_t	src;		/* sending rank */
	uint32_t	dst;		/* receiving rank */
	uint32_t	tag;
	uint64_t	bytes;		/* payload, in PEER_DATA frames */
};

extern const struct wire_proto peer_proto;

#endif
