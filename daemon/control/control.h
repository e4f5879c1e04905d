/*
 * control.h: the control plane (control/: clients, peers, jobs, metrics),
 * run by the main thread.  For the main thread's code alone: the process
 * (mccld.c) and control/ include it; the data plane below (engine/,
 * transport/) may not call up into it, and does not see it (a test checks
 * the objects' symbols too).  What the engine must tell the control plane
 * goes up as an event (job->ev_engine) with the op on the job's eng_out.
 */
#ifndef MCCL_CONTROL_H
#define MCCL_CONTROL_H

#include "mccld.h"		/* struct config */
#include "engine/engine.h"

struct event_base;
struct event;
typedef struct json_t json_t;

/* ---- loop.c: what control/ runs on, given by the process ---- */

struct control_hooks {		/* the process's calls, made by control/ */
	void	 (*status_changed)(void);	/* peers, jobs or clients */
	json_t	*(*reload)(char *, size_t);	/* mcclctl reload */
};

extern const struct config *conf;	/* the settings (control_init) */
extern struct event_base *ctl_base;	/* the main thread's loop */
extern uint64_t	 ctl_started_ns;
extern int	 ctl_stopping;		/* control_shutdown was called */

void		control_init(struct event_base *, const struct config *,
		    const struct control_hooks *);
void		control_status_changed(void);
json_t		*control_reload(char *, size_t);
void		listener_pause(struct event *, const char *);

/*
 * The clients as the parts of control/ below control.c reach them
 * (loop.c's calls, through the port control.c gives at control_listen):
 * the jobs, the check and the peers answer and tell clients this way.
 */
struct client;
struct client_port {
	int	 (*send)(struct client *, uint16_t, const void *, const void *,
		    size_t);
	int	 (*reply)(struct client *, const char *);
	void	 (*error)(struct client *, uint32_t, uint16_t, const char *);
	void	 (*op_done)(struct client *, const struct op *, uint64_t, int,
		    const char *);
	int	 (*sees)(const struct client *, uid_t);	/* may see uid's */
	void	 (*event)(const char *, const uid_t *, json_t *);
};

void		client_port_set(const struct client_port *);
int		client_send(struct client *, uint16_t, const void *, const void *,
		    size_t);
int		client_reply(struct client *, const char *);
void		client_error(struct client *, uint32_t, uint16_t, const char *);
void		client_op_done(struct client *, const struct op *, uint64_t,
		    int, const char *);
int		client_sees(const struct client *, uid_t);
void		monitor_event(const char *, const uid_t *, json_t *);

/* ---- control.c: the Unix socket, clients and mcclctl ---- */

TAILQ_HEAD(client_list, client);

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

int		control_listen(const char *, char *, size_t);
void		control_close(void);
void		control_shutdown(const char *);
uint32_t	client_count(void);
int		client_privileged(const struct client *);
json_t		*control_status(const struct client *);

/* ---- command.c: mcclctl's commands, one row each ---- */

void		control_command(struct client *, const struct ipc_ctl *,
		    const uint8_t *, size_t);

/* ---- peer.c: control connections to the other daemons ---- */

/* A control frame of a part above (jobs, the check): -1 ends the
 * connection as the peer's fault. */
typedef int	(*peer_frame_fn)(uint32_t, uint16_t, const void *,
		    const uint8_t *, size_t);
struct peer_watcher {		/* what the jobs hear of the peers */
	void	 (*up)(uint32_t);
	void	 (*down)(uint32_t, const char *);
	void	 (*data_link)(int, const struct peer_data_hello *);
	void	 (*mark_nodes)(uint8_t *, uint32_t);	/* nodes jobs span */
};

void		peer_handle(uint16_t, peer_frame_fn);
void		peer_watch(const struct peer_watcher *);
int		peer_init(char *, size_t);
int		peer_add_nodes(uint32_t, char *, size_t);
void		peer_heartbeat_reset(void);
void		peer_close(void);
int		peer_send(uint32_t, uint16_t, const void *, const void *, size_t);
int		peer_is_up(uint32_t);
const char	*peer_name(uint32_t);
json_t		*peer_ctl_list(void);
uint64_t	 peer_rtt_median_ns(void);

struct peer_stats {		/* a peer, for the metrics */
	const char	*name;
	int		 up;		/* its control connection */
	uint64_t	 rtt_ns;	/* the last heartbeat's round trip */
	char		 transport[16];	/* its latest data links'; "": none */
	char		 device[LINK_DEV_MAX];
	uint64_t	 ctl_tx, ctl_rx;	/* bytes, control connection */
	uint64_t	 data_tx, data_rx;	/* bytes, data links */
};
int		peer_stats(uint32_t, struct peer_stats *);

/* ---- liveness.c: whom a node heartbeats, and when one is dead ---- */

enum liveness {
	LIVE_QUIET,		/* neither watched nor suspected: no ping */
	LIVE_PING,		/* ping it */
	LIVE_SILENT,		/* watched, and silent past the timeout */
	LIVE_UNANSWERED		/* reported silent, and no answer to us */
};

/* A peer's clocks (ns): last heard, watched since, reported silent. */
struct liveness_clock {
	uint64_t	 heard_ns;
	uint64_t	 watched_ns;	/* when this node began to watch it */
	uint64_t	 suspect_ns;	/* 0: no report since it was heard */
};

int		liveness_watches(uint32_t, uint32_t, uint32_t, uint32_t);
int		liveness_sparse(uint32_t, uint32_t);
enum liveness	liveness_verdict(const struct liveness_clock *, int, uint64_t,
		    uint64_t);

/* ---- job.c: job formation, operations, failure ---- */

int		job_count(const struct client *);
void		job_client_join(struct client *, const struct ipc_join *);
void		job_client_op(struct client *, const struct ipc_op *);
void		job_client_gone(struct client *, int);
void		job_client_abort(struct client *);
void		job_init(void);
void		job_tunables(struct engine_tunables *);
void		job_retune_all(void);
void		job_collect(struct job *);
void		job_collect_all(void);
void		job_shutdown(const char *);
int		job_all_told(void);
int		job_reap_all(void);
json_t		*job_ctl_list(const struct client *);
json_t		*job_ctl_abort(const struct client *, const char *, char *,
		    size_t);
int		job_ctl_query(struct client *, const char *, char *, size_t);
void		job_ctl_forget(const struct client *);
json_t		*job_ctl_failed(const struct client *);
json_t		*job_ctl_ended(const struct client *, const char *, char *,
		    size_t);
void		job_ctl_close(void);
void		job_ctl_restore(void);

/* ---- check.c: mcclctl check ---- */

int		check_ctl_start(struct client *, const char *, char *, size_t);
void		check_ctl_forget(const struct client *);
void		check_init(void);
void		check_close(void);
void		utc_time(time_t, char *, size_t);

/* ---- linkcost.c: this node's estimate of its links' cost ---- */

void		linkcost_init(void);
void		linkcost_mine(uid_t, struct link_cost *);
void		linkcost_worst(struct link_cost *, const struct link_cost *);
void		linkcost_observe(uid_t, int, uint32_t, size_t, uint64_t,
		    const struct link_cost *);
json_t		*linkcost_ctl(void);

/* ---- counters.c: what operations did, counted as they end ---- */

void		metrics_op_done(int, int, int, uint64_t);
void		metrics_wire(int, uint64_t);
void		metrics_xmem(uint64_t);
void		metrics_overlapped(void);
void		metrics_lanes(uint64_t, uint64_t);
void		metrics_add(json_t *, const char *, json_t *, double);
void		counters_samples(json_t *);

/* ---- metrics.c: every part's samples, and their one rendering ---- */

struct evbuffer;
json_t		*metrics_samples(void);
void		metrics_text(struct evbuffer *, const json_t *);
json_t		*metrics_ctl(void);

/* ---- scrape.c: the metrics port ---- */

int		scrape_init(char *, size_t);
int		scrape_token_load(const char *, char *, size_t);
void		scrape_close(void);

#endif
