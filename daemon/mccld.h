/*
 * mccld.h: the daemon's internal interfaces, grouped by the file that
 * provides them.  Threads: the main thread runs one libevent loop (clients,
 * mcclctl, peer control connections, timers, signals) and owns every
 * structure here except what a job's engine thread owns (marked below).
 */
#ifndef MCCLD_H
#define MCCLD_H

#include <sys/queue.h>
#include <sys/types.h>

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "engine/budget.h"
#include "mccl.h"
#include "ipc.h"
#include "peer.h"
#include "spin.h"

#define MCCLD_VERSION		"0.1.0"
#define MCCLD_DEFAULT_CONF	"/etc/mccl/mccld.conf"
#define MCCLD_DEFAULT_PORT	PEER_PORT_DEFAULT
#define CONF_LISTEN_MAX		8
#define CONF_NODES_MAX		1024
#define CONF_HOST_MAX		256
#define ERR_MAX			256
#define NO_POS			UINT32_MAX	/* no node position */

struct link;

/* ---- config.c ---- */

struct conf_addr {
	char		host[CONF_HOST_MAX];	/* numeric address or name */
	uint16_t	port;
};

#define CONF_DEV_MAX		32	/* "mlx5_0" or "mlx5_0:2" */

struct conf_node {
	char		 name[NODE_NAME_MAX];
	struct conf_addr addr;
	char		 rdma_dev[CONF_DEV_MAX];	/* this node's RDMA device
					   (and port) to reach it, from this
					   node's "rdma"; "": any that works */
};

enum conf_transport { CONF_TRANSPORT_AUTO, CONF_TRANSPORT_TCP,
    CONF_TRANSPORT_RDMA };

struct config {
	char		 node_name[NODE_NAME_MAX];
	uint32_t	 node_index;		/* of node_name in nodes[] */
	char		 socket_path[108];	/* sun_path */
	struct conf_addr listen[CONF_LISTEN_MAX];
	size_t		 nlisten;
	struct conf_node *nodes;		/* the cluster, this node included */
	size_t		 nnodes;
	int		 log_level;		/* LOG_ERR .. LOG_DEBUG */
	uint32_t	 init_timeout_ms;	/* job formation, when the client gives none */
	uint32_t	 op_timeout_ms;		/* one operation, when the client gives none */
	uint32_t	 connect_timeout_ms;	/* TCP connect and data-link set-up */
	uint32_t	 heartbeat_interval_ms;
	uint32_t	 heartbeat_timeout_ms;	/* silence after which a peer is dead */
	uint64_t	 chunk_bytes;		/* pipeline chunk */
	int		 algo;			/* enum algo_type for allreduce */
	int		 transport;		/* enum conf_transport */
	int32_t		 spin_us;		/* engine's spin; SPIN_AUTO */
	uint32_t	 streams_per_peer;	/* collective lanes of new jobs */
	uint32_t	 max_clients;		/* connections on the Unix socket */
	uint32_t	 max_segments;		/* per client */
	uint64_t	 max_segment_bytes;	/* per client, all segments together */
	uint32_t	 max_pending_ops;	/* per client: submitted, unanswered */
	uint32_t	 max_connections_per_uid;
	uint32_t	 max_message_bytes;	/* one client record, <= IPC_MSG_MAX */
	uint32_t	 max_fds_per_message;	/* 1 .. CLIENT_FDS_MAX - 1 */
	uint32_t	 max_jobs_per_uid;
	uint32_t	 failed_jobs_kept;	/* per uid, for mcclctl */
	uint64_t	 max_reply_bytes_per_uid;	/* queued, unread */
	uint64_t	 max_unreceived_bytes_per_uid;	/* p2p messages kept */
	uint64_t	 max_unreceived_bytes;		/* the same, all users */
	uint64_t	 max_scratch_bytes_per_uid;	/* engines' buffers */
	uint64_t	 max_scratch_bytes;		/* the same, all users */
	char		 key_file[4096];	/* cluster secret; "" = none */
	struct conf_addr metrics_listen;	/* HTTP /metrics; port 0 = off */
	char		 admin_group[64];	/* may run mcclctl abort, reload */
};

void		config_defaults(struct config *);
int		config_load(const char *, int, struct config *, char *, size_t);
int		config_parse(const char *, size_t, struct config *, char *, size_t);
void		config_free(struct config *);
uint64_t	config_cluster_hash(const struct config *);
int		config_parse_addr(const char *, struct conf_addr *, char *, size_t);
void		default_socket_path(char *, size_t);
void		config_warnings(const struct config *);
void		config_apply(struct config *, const struct config *,
		    void (*)(const char *));
void		config_show(const struct config *, FILE *);
void		config_keys_file(FILE *);
const char	*conf_transport_name(int);

/* ---- auth.c: peer authentication (any thread) ---- */

#define AUTH_NONCE_LEN	32
#define AUTH_MAC_LEN	32

int		auth_init(const char *, const char *, char *, size_t);
int		auth_host_only(void);
void		auth_nonce(uint8_t *);
void		auth_mac(uint8_t *, char, const uint8_t *, const uint8_t *,
		    uint32_t);
int		auth_check(const uint8_t *, char, const uint8_t *,
		    const uint8_t *, uint32_t);

/* ---- log.c ---- */

#define LOG_ERR		3
#define LOG_WARNING	4
#define LOG_INFO	6
#define LOG_DEBUG	7

void		log_init(int, const char *);
void		log_setlevel(int);
int		log_getlevel(void);
int		log_level_parse(const char *);
const char	*log_level_name(int);
void		log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void		log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void		log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void		log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void		fatal(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));
void		fatalx(const char *, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- reduce.c: element-wise kernels (any thread) ---- */

size_t		dtype_size(int);
const char	*dtype_name(int);
const char	*redop_name(int);
int		reduce_supported(int dtype, int op);
void		reduce_into(void *dst, const void *src, size_t count, int dtype,
		    int op);
void		reduce_many(void *dst, const void *const *srcs, size_t nsrcs,
		    size_t count, int dtype, int op);
void		reduce_fan(void *const *dsts, size_t ndsts,
		    const void *const *srcs, size_t nsrcs, size_t count,
		    int dtype, int op, uint32_t avg_div);
void		reduce_scale_avg(void *buf, size_t count, int dtype,
		    uint32_t nranks);
const char	*reduce_isa(void);
int		reduce_force_isa(const char *);	/* tests: NULL = best */

/* ---- ring.c: inter-node algorithms over a job's data links (engine thread) ---- */

struct xfer {
	uint32_t	  nnodes;	/* nodes of the job, in ring order */
	uint32_t	  me;		/* this node's position in that order */
	struct link *const *links;	/* data link to each position, lane by
					   lane (nlanes * nnodes); NULL at me */
	uint32_t	  nlanes;	/* allreduce: rings run side by side */
	const char *const *names;	/* node name of each position, for messages */
	int		  abort_fd;	/* readable once the job is aborted */
	const int	 *aborted;	/* set then too (atomic); or NULL */
	uint64_t	  deadline_ns;	/* CLOCK_MONOTONIC; 0: none */
	size_t		  chunk;	/* pipeline chunk in bytes */
	int		  algo;		/* allreduce: enum algo_type asked for */
	size_t		  small_bytes;	/* up to this, AUTO is latency-bound */
	uint64_t	  spin_ns;	/* spin on the links before sleeping */
	uint8_t		 *scratch;	/* at least 2 * chunk * nlanes bytes */
	struct peer_ophdr hdr;		/* this operation, checked against the peers' */
	int		  pair_bytes;	/* hdr.count: the bytes of each pair, */
	uint64_t	  rx_bytes;	/* expected from the node we receive from */
	const uint32_t	 *node_index;	/* cluster index of each position */
	uint64_t	 *tx_ctr;	/* bytes sent, by cluster index; or NULL */
	uint64_t	 *rx_ctr;	/* bytes received, alike */
	uint32_t	 *waiting;	/* the position waited on, published
					   before each sleep; or NULL */
	uint32_t	  blame;	/* timed out waiting on it; NO_POS */
	uint64_t	  hup_ns;	/* a link we send on hung up then, */
	uint64_t	  abort_ns;	/* the job was aborted then: this op */
	int		  code;		/* mccl_result_t, on failure */
	char		  err[ERR_MAX];
};

uint64_t	now_ns(void);
int		ring_allreduce(struct xfer *, const void *, void *, size_t, int,
		    int);
int		node_allreduce(struct xfer *, const void *, void *, size_t, int,
		    int);
int		ring_broadcast(struct xfer *, void *, size_t, uint32_t);
int		ring_allgather(struct xfer *, void *, const size_t *, const size_t *);
int		ring_barrier(struct xfer *);
int		xfer_exchange(struct xfer *, uint32_t, const void *, size_t,
		    uint32_t, void *, size_t);
int		xfer_exchange_sized(struct xfer *, uint32_t, const void *,
		    size_t, uint32_t, void *, size_t);
int		ring_gather(struct xfer *, void *, const size_t *,
		    const size_t *, uint32_t, void *);
int		ring_scatter(struct xfer *, void *, const size_t *,
		    const size_t *, uint32_t, void *);

/* ---- mccld.c: process-wide state (main thread) ---- */

struct event_base;
struct event;
struct bufferevent;
typedef struct json_t json_t;

TAILQ_HEAD(client_list, client);
TAILQ_HEAD(job_list, job);
TAILQ_HEAD(coord_list, coord);

struct mccld_state {
	struct event_base	*base;
	struct config		 conf;
	const char		*conf_path;
	int			 conf_explicit;
	int			 verbose;	/* -v: debug whatever the config */
	uint64_t		 started_ns;
	struct client_list	 clients;
	uint32_t		 nclients;
	struct job_list		 jobs;		/* this node's jobs */
	struct coord_list	 coords;	/* jobs forming with us as coordinator */
	struct job_list		 dying;		/* freed, waiting for their threads */
	int			 shutting_down;
	uint64_t		*data_tx;	/* bytes on data links, by node; */
	uint64_t		*data_rx;	/* any thread adds (atomically) */
};

extern struct mccld_state md;

void		mccld_status_update(void);
json_t		*mccld_reload(char *, size_t);
void		listener_pause(struct event *, const char *);

/* ---- seg.c: clients' segments (any thread, under one lock) ---- */

struct seg {
	TAILQ_ENTRY(seg) entry;
	uint32_t	 id;
	uint8_t		*base;
	uint64_t	 size;
	int		 refs;		/* its table's, plus one per op using
					   it, plus a doorbell's */
};
TAILQ_HEAD(seg_list, seg);

struct segtab {				/* one connection's segments */
	struct seg_list	 segs;
	uint32_t	 nsegs;		/* main thread */
	uint64_t	 bytes;		/* main thread */
	int		 refs;		/* the connection's, its engine's */
};

struct segtab	*segtab_new(void);
void		segtab_ref(struct segtab *);
void		segtab_unref(struct segtab *);
void		segtab_clear(struct segtab *);
struct seg	*segtab_find(struct segtab *, uint32_t);
int		segtab_add(struct segtab *, uint32_t, uint8_t *, uint64_t);
void		segtab_del(struct segtab *, uint32_t);
void		seg_ref(struct seg *);
void		seg_unref(struct seg *);
struct seg	*seg_resolve(struct segtab *, uint32_t, uint64_t, uint64_t,
		    uint8_t **, char *, size_t);
void		bell_ring(struct seg *, uint64_t);

/* ---- control.c: the Unix socket, clients and mcclctl (main thread) ---- */

struct outmsg;
TAILQ_HEAD(outmsg_list, outmsg);

struct client {
	TAILQ_ENTRY(client) entry;
	int		 fd;
	struct event	*ev_read;
	struct event	*ev_write;
	uid_t		 uid;
	gid_t		 gid;
	pid_t		 pid;
	int		 hello_done;
	struct segtab	*segs;
	struct outmsg_list outq;
	uint32_t	 outq_bytes;
	int		 outq_full;	/* not read from until outq drains */
	int		 monitor;	/* mcclctl monitor: gets events */
	struct seg	*bell;		/* its doorbell (IPC_BELL), or NULL */
	struct job	*job;		/* once it sent JOIN */
	int		 joined;	/* it did: it joins no other */
	uint32_t	 rank;
	uint32_t	 local_index;	/* in job->local_ranks, once formed */
	uint64_t	 last_seq;	/* of its last IPC_OP */
	uint64_t	 inflight;	/* IPC_OPs not yet answered */
	char		 desc[64];	/* "pid 123 uid 1000", for logs */
};

struct op;


/* ---- peer.c: control connections to the other daemons (main thread) ---- */


/* ---- job.c: job formation, operations, failure (main thread) ---- */

enum job_state { JOB_FORMING, JOB_LINKING, JOB_READY, JOB_FAILED };

struct op_part {			/* one local rank's buffers */
	int		 submitted;
	uint64_t	 req;		/* the rank's own seq for this op */
	struct seg	*send_seg;
	struct seg	*recv_seg;
	uint8_t		*send;
	uint8_t		*recv;
	uint64_t	*vec;		/* v-collectives: the rank's vector, a
					   copy (proto_vec_len); freed with op */
};

struct op {
	TAILQ_ENTRY(op)	 entry;
	struct job	*job;
	struct ipc_op	 desc;		/* as the first local rank sent it; for
					   collectives desc.seq is the job's
					   collective number, the same on every
					   rank */
	uint32_t	 p2p_rank;	/* send/recv: the local rank that posted it
					   (its part is parts[its local index]) */
	uint32_t	 p2p_source;	/* a receive that ended well: the */
	uint32_t	 p2p_tag;	/* message's sender and tag */
	uint64_t	 deadline_ns;	/* for the engine */
	uint64_t	 ready_ns;	/* handed to the engine (metrics) */
	uint64_t	 done_ns;	/* the engine ended it */
	uint32_t	 wait_pos;	/* the node position it waits on now
					   (engine, relaxed atomic; NO_POS) */
	uint32_t	 blame_pos;	/* it timed out waiting on this one */
	int		 code;		/* result, set by the engine */
	uint8_t		 algo_run;	/* allreduce between nodes: enum
					   algo_type, set by the engine */
	char		 err[ERR_MAX];
	struct op_part	 parts[];	/* by local index */
};
TAILQ_HEAD(op_list, op);

struct job {
	TAILQ_ENTRY(job) entry;
	uint64_t	 id;		/* 0 until formed */
	uid_t		 uid;
	char		 name[JOB_NAME_MAX];
	uint32_t	 nranks;
	enum job_state	 state;
	uint32_t	 timeout_ms;	/* formation */
	struct event	*ev_timeout;
	struct client	**clients;	/* by rank; NULL if not on this node */
	uint32_t	 nlocal;
	uint32_t	 nleft;		/* local ranks that have gone */
	uint32_t	*local_ranks;	/* sorted, once formed */
	uint32_t	 coordinator;	/* cluster node index */

	/* topology, fixed once formed */
	uint32_t	 nnodes;
	uint32_t	 me;		/* our position in the ring order */
	uint32_t	*node_index;	/* cluster index of each position */
	uint32_t	*rank_pos;	/* position of each rank */
	uint32_t	*rank_slot;	/* of each rank in node order (ranks of
					   position 0 first, each in rank order) */
	uint32_t	*pos_first;	/* first slot of each position */
	uint32_t	*pos_count;	/* ranks of each position */
	int		 slots_are_ranks; /* node order == rank order */
	const char	**names;	/* node name of each position */

	/* operations */
	uint64_t	 ops_completed;
	uint64_t	 op_slow_ns[2];	/* the slowest collective of the last
					   64, and of the 64 before (main
					   thread: mcclctl's "behind") */
	uint32_t	 op_slow_n;	/* collectives in this window */
	uint64_t	 bytes_done;
	int		 code;		/* the job's failure, once failed */
	char		 err[ERR_MAX];
	time_t		 failed_at;
	uint64_t	 fail_seq;	/* the op that failed it here, if one */
	uint8_t		 fail_coll;	/* did (0: none) */

	/* engine: the data plane thread (engine.c); guarded by eng_mtx */
	pthread_t	 eng_thread;
	int		 eng_running;
	pthread_mutex_t	 eng_mtx;
	pthread_cond_t	 eng_cond;
	int		 eng_quit;
	int		 eng_exited;	/* engine_main returned */
	int		 eng_aborted;	/* written atomically: ring.c reads it */
	int		 eng_stopped;	/* aborted, it ended its last op */
	int		 fail_told;	/* the ranks have IPC_JOB_FAILED */
	int		 eng_abort_fd;	/* eventfd: wakes the engine out of poll */
	struct subq	*sq;		/* each local rank's submission ring,
					   by local index (subq.c) */
	uint64_t	 ncoll;		/* collectives assembled (engine) */
	uint64_t	 sq_since_ns;	/* an op has waited for ranks since */
	uint32_t	*eng_wait_word;	/* the ring futex it sleeps on */
	uint32_t	 eng_kicks;	/* bumped by engine_wake and engine_quit
					   (atomic): the sleeping engine's
					   signal from the main thread */
	struct op_list	 eng_out;	/* done, for the main thread */
	int		 eng_out_quiet;	/* it holds ops the main thread was
					   not woken for (engine_idle) */
	uint32_t	 nlanes;	/* collective links per pair of nodes */
	int		*eng_fds;	/* lane k's link from position p at
					   [k * nnodes + p], handed over by
					   the main thread (p < me); row
					   nlanes: the send/recv stream's */
	struct link	**eng_links;	/* the links, alike (engine thread);
					   the last row goes to p2p.c */
	int		 eng_registers;	/* a link sends from registered memory */
	int		 eng_link_state; /* 0 pending, 1 up, -1 failed */
	int		 eng_links_reported;
	int		 eng_link_code;
	char		 eng_link_err[ERR_MAX];
	struct op	*eng_current;	/* running now (for mcclctl) */
	struct scratch	 eng_tmp;	/* the engine's node buffer: grown,
					   given back when idle (budget.h) */

	/* p2p: the send/recv thread and its links (p2p.c) */
	struct p2p	*p2p;
	struct event	*ev_engine;	/* activated by the engine and p2p
					   threads, also when they exit */
	int		 dying;		/* job_free: waiting for its threads */
};


/* ring.c: add n bytes to ctr[node_index[pos]] (the peers' byte counts) */
void		count_bytes(uint64_t *, const uint32_t *, uint32_t, size_t);

/* ---- engine/op.c: an operation's life (any thread) ---- */

struct op	*op_new(struct job *);
void		 op_free(struct op *);
const char	*op_check(uint32_t, const struct ipc_op *, char *, size_t);
int		 op_attach(struct op *, uint32_t, struct segtab *, uint32_t,
		    const struct ipc_op *, char *, size_t);

/* ---- p2p.c: a job's point-to-point messages (their own thread) ---- */

struct p2p;
int		p2p_init(struct job *, char *, size_t);
int		p2p_start(struct job *, char *, size_t);
void		p2p_submit(struct job *, struct op *);
void		p2p_links(struct job *, struct link **, const char *);
void		p2p_quit(struct job *);
int		p2p_exited(struct job *);
void		p2p_finish(struct job *);
void		p2p_limits(uint64_t, uint64_t);
uint64_t	p2p_kept_bytes(void);

/* ---- subq.c: submission rings, the engine's side ---- */

struct subq {				/* a local rank's ring, by local index */
	struct seg	*bell;		/* the doorbell segment (a reference) */
	struct ipc_doorbell *db;	/* in it */
	struct segtab	*segs;		/* its connection's (a reference) */
	uint32_t	 rank;
	uint64_t	 tail;		/* descriptors taken (engine) */
	uint64_t	 last_seq;	/* of the last one (engine) */
	uint64_t	 completed;	/* descriptors whose op ended (atomic) */
	int		 left;		/* the rank has left the job (atomic) */
};

int		subq_attach(struct job *, char *, size_t);
void		subq_detach(struct job *);
struct op	*subq_take(struct job *, uint64_t *);
int		subq_ready(struct job *);
void		subq_sleep(struct job *, uint32_t, uint64_t);
void		subq_wake(struct job *);
void		subq_completed(struct job *);
uint64_t	subq_submitted(const struct job *, uint32_t);
uint64_t	subq_waiting_since(const struct job *, uint64_t *);
int		subq_pending(const struct job *, uint32_t);

/* ---- engine.c: a job's data plane thread ---- */

int		engine_start(struct job *, char *, size_t);
int		engine_adopt_link(struct job *, uint32_t, uint32_t, int);
void		engine_wake(struct job *);
void		engine_notify(struct job *);
void		engine_op_done(struct job *, struct op *);
void		engine_quit(struct job *);
int		engine_exited(struct job *);
void		engine_finish(struct job *);
void		engine_shutdown(void);

#endif
