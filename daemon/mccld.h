/*
 * mccld.h: the process's settings (config.c), which mccld.c keeps and the
 * control plane reads (control_init); the log is log.h's.
 * Each layer has its own header: control/control.h (the main thread's
 * control plane), engine/engine.h (a job's data plane), transport/
 * transport.h (the links under it); each includes the ones below it.
 */
#ifndef MCCLD_H
#define MCCLD_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "mccl.h"
#include "ipc.h"
#include "peer.h"
#include "log.h"
#include "transport/transport.h"	/* conf_node, link_choice */

#define MCCLD_VERSION		"0.1.0"
#define MCCLD_DEFAULT_CONF	"/etc/mccl/mccld.conf"
#define MCCLD_DEFAULT_PORT	PEER_PORT_DEFAULT
#define CONF_LISTEN_MAX		8
#define CONF_NODES_MAX		LINK_NODES_MAX

/* ---- config.c ---- */

struct config {
	char		 node_name[NODE_NAME_MAX];
	uint32_t	 node_index;		/* of node_name in nodes[] */
	uint64_t	 cluster_hash;		/* of nodes (config_cluster_hash),
						   which peers must share */
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
	uint32_t	 heartbeat_mesh_max_nodes; /* larger: the sparse overlay */
	uint64_t	 chunk_bytes;		/* pipeline chunk */
	int		 algo;			/* enum algo_type for allreduce */
	int		 transport;		/* enum link_choice */
	int32_t		 spin_us;		/* engine's spin; SPIN_AUTO */
	uint32_t	 streams_per_peer;	/* collective lanes of new jobs;
						   STREAMS_AUTO: conf_lanes */
	uint32_t	 max_clients;		/* connections on the Unix socket */
	uint32_t	 max_segments;		/* per client */
	uint64_t	 max_segment_bytes;	/* per client, all segments together */
	uint32_t	 max_pending_ops;	/* per client: submitted, unanswered */
	uint32_t	 max_connections_per_uid;
	uint32_t	 max_message_bytes;	/* one client record, <= IPC_MSG_MAX */
	uint32_t	 max_fds_per_message;	/* 1 .. CLIENT_FDS_MAX - 1 */
	uint32_t	 max_jobs_per_uid;
	uint32_t	 max_ranks_per_job;
	uint32_t	 max_forming_jobs_per_peer;
	uint32_t	 max_init_timeout_ms;
	uint32_t	 failed_jobs_kept;	/* per uid, for mcclctl */
	uint64_t	 max_reply_bytes_per_uid;	/* queued, unread */
	uint64_t	 max_unreceived_bytes_per_uid;	/* p2p messages kept */
	uint64_t	 max_unreceived_bytes;		/* the same, all users */
	uint64_t	 max_scratch_bytes_per_uid;	/* engines' buffers */
	uint64_t	 max_scratch_bytes;		/* the same, all users */
	char		 key_file[4096];	/* cluster secret; "" = none */
	struct conf_addr metrics_listen;	/* HTTP /metrics; port 0 = off */
	char		 metrics_token_file[4096];	/* "" = no token */
	uint32_t	 metrics_max_connections;
	uint32_t	 metrics_timeout_ms;
	char		 admin_group[64];	/* may run mcclctl abort, reload */
	char		 tcp_congestion[16];	/* "" (auto), "system", a name */
	char		 data_cc[16];		/* the data links'; "" = system's */
};

void		config_defaults(struct config *);
int		config_load(const char *, int, struct config *, char *, size_t);
int		config_parse(const char *, size_t, struct config *, char *, size_t);
void		config_free(struct config *);
uint64_t	config_cluster_hash(const struct config *);
int		config_parse_addr(const char *, struct conf_addr *, char *, size_t);
void		default_socket_path(char *, size_t);
void		config_warnings(const struct config *);
/* What else a reload does when a key changed (the key's row names it;
 * mccld.c runs it once per reload). */
enum conf_hook {
	CONF_HOOK_NONE,
	CONF_HOOK_LOG_LEVEL,		/* the log's level */
	CONF_HOOK_HEARTBEAT,		/* the peers' heartbeat timers */
	CONF_HOOK_P2P_LIMITS,		/* send/recv's memory caps */
	CONF_HOOK_SCRATCH_LIMITS,	/* the engines' scratch caps */
	CONF_HOOK_ENGINES,		/* running jobs' engine settings */
	CONF_HOOK_MAX
};
unsigned	config_apply(struct config *, const struct config *,
		    void (*)(const char *));
/* reload.c */
int		config_reload(struct config *, const char *, int,
		    void (*const [CONF_HOOK_MAX])(void), void (*)(uint32_t),
		    char *, size_t);
void		config_show(const struct config *, FILE *);
void		config_keys_file(FILE *);
const char	*conf_transport_name(int);
#define STREAMS_AUTO	0		/* streams_per_peer: by the cores */

#endif
