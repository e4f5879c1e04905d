/*
 * wire.h: the frame format and the table-driven codec shared by both MCCL
 * wire protocols (local IPC in ipc.h, daemon-to-daemon in peer.h).
 *
 * Every frame is a 12-byte header (magic, version, type, body length, all
 * big-endian) followed by the body.  A body is a fixed part, described field
 * by field in a table, optionally followed by a trailer (strings, rank maps,
 * bulk data) whose bounds the table also gives.  Decoding checks, in this
 * order: magic, version, type known, body length within the type's bounds.
 * Nothing is dispatched that has not passed all four.
 */
#ifndef MCCL_WIRE_H
#define MCCL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_HDR_LEN	12

struct wire_hdr {
	uint32_t	magic;
	uint16_t	version;
	uint16_t	type;
	uint32_t	len;		/* body length, header excluded */
};

/*
 * One field of a fixed body: an unsigned integer of 1/2/4/8 bytes, a string
 * (bytes that must hold a NUL), or raw bytes (nonces, MACs).
 */
enum wire_kind { WIRE_INT, WIRE_BYTES, WIRE_RAW };

struct wire_field {
	uint16_t	offset;		/* in the host struct */
	uint16_t	size;
	uint8_t		kind;
};

struct wire_type {
	uint16_t		 type;
	const char		*name;		/* for logs: "OP_SUBMIT" */
	const struct wire_field	*fields;
	size_t			 nfields;
	size_t			 host_size;	/* sizeof the host struct */
	uint32_t		 trailer_max;	/* 0: the body is exactly the fixed part */
	uint8_t			 nfds;		/* descriptors that must come with it */
};

struct wire_proto {
	const char		*name;		/* "ipc", "peer" */
	uint32_t		 magic;
	uint16_t		 version;
	const struct wire_type	*types;
	size_t			 ntypes;
};

#define WIRE_FIELD(st, m, k) \
	{ offsetof(struct st, m), sizeof(((struct st *)0)->m), (k) }
#define WIRE_TYPE(t, st, flds, tmax, fds) \
	{ (t), #t, (flds), sizeof(flds) / sizeof((flds)[0]), sizeof(struct st), (tmax), (fds) }
#define WIRE_TYPE_EMPTY(t, tmax, fds) \
	{ (t), #t, NULL, 0, 0, (tmax), (fds) }

/* proto.c */
const struct wire_type	*wire_type_lookup(const struct wire_proto *, uint16_t);
size_t			 wire_fixed_len(const struct wire_type *);
void			 wire_hdr_encode(uint8_t *, const struct wire_hdr *);
void			 wire_hdr_decode(const uint8_t *, struct wire_hdr *);
int			 wire_hdr_check(const struct wire_proto *, const uint8_t *,
			    struct wire_hdr *, const struct wire_type **, char *, size_t);
size_t			 wire_encode(const struct wire_proto *, uint16_t,
			    const void *, const void *, size_t, uint8_t *, size_t);
int			 wire_decode(const struct wire_type *, const uint8_t *,
			    size_t, void *, const uint8_t **, size_t *, char *, size_t);
void			 wire_put_u32s(uint8_t *, const uint32_t *, size_t);
void			 wire_get_u32s(uint32_t *, const uint8_t *, size_t);
size_t			 wire_strlcpy(char *, const char *, size_t);
int			 wire_str_ok(const char *, size_t);

#endif
