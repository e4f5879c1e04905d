/*
 * conn.h: the client side of the local IPC protocol, shared by libmccl and
 * mcclctl: connect to the daemon's SOCK_SEQPACKET socket, send one record
 * (optionally with a descriptor), receive one record with a deadline.
 */
#ifndef MCCL_CONN_H
#define MCCL_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "ipc.h"

struct ipc_msg {
	struct wire_hdr		 hdr;
	const struct wire_type	*type;
	uint8_t			 buf[IPC_MSG_MAX];
	size_t			 len;		/* of buf */
	const uint8_t		*trailer;
	size_t			 trailer_len;
	union {
		struct ipc_hello_ok	hello_ok;
		struct ipc_error	error;
		struct ipc_seg_ok	seg_ok;
		struct ipc_joined	joined;
		struct ipc_op_done	op_done;
		struct ipc_job_failed	job_failed;
		struct ipc_ctl_reply	ctl_reply;
	} u;
};

uint64_t	conn_now_ms(void);
void		conn_socket_path(char *, size_t);
const char	*conn_socket_origin(const char *, int);
int		conn_open(const char *, int, int, struct ipc_hello_ok *, int *,
		    char *, size_t);
int		conn_send(int, uint16_t, const void *, const void *, size_t, int,
		    char *, size_t);
int		conn_recv(int, int, struct ipc_msg *, char *, size_t);
int		conn_recv_doc(int, int, struct ipc_msg *, char **, size_t *,
		    char *, size_t);

#endif
