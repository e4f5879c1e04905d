/*
 * check.h: "mcclctl check", the data plane's part (check.c): measure the
 * data path from this node to one other over real data links, and serve
 * the links another node measures over.  The control plane (control/
 * check.c) decides what to measure and gathers the results; nothing here
 * calls up into it: a measurement says it ended by writing done_fd.
 */
#ifndef MCCL_ENGINE_CHECK_H
#define MCCL_ENGINE_CHECK_H

#include <pthread.h>
#include <stdint.h>

#include "log.h"
#include "transport/transport.h"

/* One measurement, this node to `peer`; filled in by its own thread. */
/* The node at a check link's other end, as the control plane knows it. */
struct check_peer {
	uint32_t	 node;		/* its cluster index */
	char		 name[NODE_NAME_MAX];
	struct conf_addr addr;		/* where it listens */
	char		 rdma_dev[LINK_DEV_MAX];	/* this node's device to it */
	char		 me[NODE_NAME_MAX];	/* this node's name */
	uint32_t	 me_index;	/* and its cluster index */
	int		 choice;	/* enum link_choice */
	uint32_t	 connect_timeout_ms;
};

struct check_measure {
	/* in */
	struct check_peer peer;		/* above ours */
	uint64_t	 link_id;	/* DATA_HELLO job id: PEER_CHECK_JOB | n */
	uint32_t	 lanes;		/* data links, 1..PEER_LANES_MAX */
	uint32_t	 ms;		/* each way */
	int		 done_fd;	/* an eventfd, written once it ended */
	/* out, once done_fd is written */
	int		 code;		/* 0, or mccl_result_t */
	char		 err[ERR_MAX];
	uint64_t	 rtt_ns;	/* median round trip of 16 bytes */
	uint64_t	 tx_bytes, tx_ns;	/* to the peer, as it counted */
	uint64_t	 rx_bytes, rx_ns;	/* from the peer, as we counted */
	/* the thread's */
	pthread_t	 thread;
	int		 abort_fd;
};

int	check_measure_start(struct check_measure *, char *, size_t);
void	check_measure_end(struct check_measure *);
int	check_serve(int, const struct check_peer *, uint32_t, char *, size_t);
void	check_shutdown(void);

#endif
