/*
 * mccld.h: the daemon's internal interfaces, grouped by the file that
 * provides them.  Threads: the main thread runs one libevent loop (clients,
 * mcclctl, peer control connections, timers, signals) and owns every
 * structure here except what a job's engine thread owns (marked below).
 */
#ifndef MCCLD_H
#define MCCLD_H

#include <sys/types.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "mccl.h"
#include "ipc.h"
#include "peer.h"

#define MCCLD_VERSION		"0.1.0"
#define MCCLD_DEFAULT_CONF	"/etc/mccl/mccld.conf"
#define MCCLD_DEFAULT_PORT	7470
#define CONF_LISTEN_MAX		8
#define CONF_NODES_MAX		1024
#define CONF_HOST_MAX		256
#define ERR_MAX			256

/* ---- config.c ---- */

struct conf_addr {
	char		host[CONF_HOST_MAX];	/* numeric address or name */
	uint16_t	port;
};

struct conf_node {
	char		 name[NODE_NAME_MAX];
	struct conf_addr addr;
};

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
	uint32_t	 max_clients;		/* connections on the Unix socket */
	uint32_t	 max_segments;		/* per client */
	uint64_t	 max_segment_bytes;	/* per client, all segments together */
};

void		config_defaults(struct config *);
int		config_load(const char *, int, struct config *, char *, size_t);
int		config_parse(const char *, size_t, struct config *, char *, size_t);
void		config_free(struct config *);
uint64_t	config_cluster_hash(const struct config *);
int		config_parse_addr(const char *, struct conf_addr *, char *, size_t);
void		default_socket_path(char *, size_t);

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
void		reduce_scale_avg(void *buf, size_t count, int dtype,
		    uint32_t nranks);
const char	*reduce_isa(void);

/* ---- ring.c: inter-node algorithms over a job's data links (engine thread) ---- */

struct xfer {
	uint32_t	  nnodes;	/* nodes of the job, in ring order */
	uint32_t	  me;		/* this node's position in that order */
	const int	 *fds;		/* data link to each position; -1 at me */
	const char *const *names;	/* node name of each position, for messages */
	int		  abort_fd;	/* readable once the job is aborted */
	uint64_t	  deadline_ns;	/* CLOCK_MONOTONIC; 0: none */
	size_t		  chunk;	/* pipeline chunk in bytes */
	uint8_t		 *scratch;	/* at least 2 * chunk bytes */
	struct peer_ophdr hdr;		/* this operation, checked against the peers' */
	int		  code;		/* mccl_result_t, on failure */
	char		  err[ERR_MAX];
};

uint64_t	now_ns(void);
int		ring_allreduce(struct xfer *, void *, size_t, int, int);
int		ring_broadcast(struct xfer *, void *, size_t, uint32_t);
int		ring_allgather(struct xfer *, void *, const size_t *, const size_t *);
int		ring_barrier(struct xfer *);

#endif
