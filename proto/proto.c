/*
 * proto.c: the one encode/decode module of both wire protocols, compiled
 * into mccld, libmccl and mcclctl.  Message layouts live in the tables at
 * the bottom; the codec below knows nothing about any particular message.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc.h"
#include "peer.h"

static void
put_uint(uint8_t *p, uint64_t v, size_t size)
{
	for (size_t i = 0; i < size; i++)
		p[i] = (uint8_t)(v >> (8 * (size - 1 - i)));
}

static uint64_t
get_uint(const uint8_t *p, size_t size)
{
	uint64_t v = 0;

	for (size_t i = 0; i < size; i++)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t
load_host(const uint8_t *p, size_t size)
{
	switch (size) {
	case 1: return *p;
	case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
	case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
	default: { uint64_t v; memcpy(&v, p, 8); return v; }
	}
}

static void
store_host(uint8_t *p, uint64_t v, size_t size)
{
	switch (size) {
	case 1: *p = (uint8_t)v; break;
	case 2: { uint16_t t = (uint16_t)v; memcpy(p, &t, 2); break; }
	case 4: { uint32_t t = (uint32_t)v; memcpy(p, &t, 4); break; }
	default: memcpy(p, &v, 8); break;
	}
}

const struct wire_type *
wire_type_lookup(const struct wire_proto *proto, uint16_t type)
{
	for (size_t i = 0; i < proto->ntypes; i++)
		if (proto->types[i].type == type)
			return &proto->types[i];
	return NULL;
}

size_t
wire_fixed_len(const struct wire_type *t)
{
	size_t len = 0;

	for (size_t i = 0; i < t->nfields; i++)
		len += t->fields[i].size;
	return len;
}

void
wire_hdr_encode(uint8_t *p, const struct wire_hdr *h)
{
	put_uint(p, h->magic, 4);
	put_uint(p + 4, h->version, 2);
	put_uint(p + 6, h->type, 2);
	put_uint(p + 8, h->len, 4);
}

void
wire_hdr_decode(const uint8_t *p, struct wire_hdr *h)
{
	h->magic = (uint32_t)get_uint(p, 4);
	h->version = (uint16_t)get_uint(p + 4, 2);
	h->type = (uint16_t)get_uint(p + 6, 2);
	h->len = (uint32_t)get_uint(p + 8, 4);
}

/*
 * Check a frame header in the fixed order: magic, version, type, length.
 * On success *typep is the type's table entry.
 */
int
wire_hdr_check(const struct wire_proto *proto, const uint8_t *p,
    struct wire_hdr *h, const struct wire_type **typep, char *err, size_t errlen)
{
	const struct wire_type *t;
	size_t fixed;

	wire_hdr_decode(p, h);
	if (h->magic != proto->magic) {
		snprintf(err, errlen, "bad %s magic 0x%08x", proto->name, h->magic);
		return -1;
	}
	if (h->version != proto->version) {
		snprintf(err, errlen, "%s version %u, expected %u", proto->name,
		    h->version, proto->version);
		return -1;
	}
	if ((t = wire_type_lookup(proto, h->type)) == NULL) {
		snprintf(err, errlen, "unknown %s message type %u", proto->name,
		    h->type);
		return -1;
	}
	fixed = wire_fixed_len(t);
	if (h->len < fixed || h->len - fixed > t->trailer_max) {
		if (t->trailer_max > 0)
			snprintf(err, errlen, "%s %s: length %u, expected %zu "
			    "plus at most %u", proto->name, t->name, h->len,
			    fixed, t->trailer_max);
		else
			snprintf(err, errlen, "%s %s: length %u, expected %zu",
			    proto->name, t->name, h->len, fixed);
		return -1;
	}
	*typep = t;
	return 0;
}

/*
 * Encode header, fixed body from the host struct, and trailer into out.
 * Returns the frame length, or 0 if out is too small or the type unknown.
 */
size_t
wire_encode(const struct wire_proto *proto, uint16_t type, const void *msg,
    const void *trailer, size_t trailer_len, uint8_t *out, size_t outlen)
{
	const struct wire_type *t;
	const uint8_t *src = msg;
	struct wire_hdr h;
	size_t fixed, pos = WIRE_HDR_LEN;

	if ((t = wire_type_lookup(proto, type)) == NULL)
		return 0;
	fixed = wire_fixed_len(t);
	if (trailer_len > t->trailer_max ||
	    WIRE_HDR_LEN + fixed + trailer_len > outlen)
		return 0;
	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *f = &t->fields[i];

		if (f->kind != WIRE_INT)
			memcpy(out + pos, src + f->offset, f->size);
		else
			put_uint(out + pos, load_host(src + f->offset, f->size),
			    f->size);
		pos += f->size;
	}
	if (trailer_len > 0)
		memcpy(out + pos, trailer, trailer_len);
	h.magic = proto->magic;
	h.version = proto->version;
	h.type = type;
	h.len = (uint32_t)(fixed + trailer_len);
	wire_hdr_encode(out, &h);
	return WIRE_HDR_LEN + fixed + trailer_len;
}

/*
 * Decode a body whose header already passed wire_hdr_check.  Byte-array
 * fields that hold strings must be NUL-terminated: the decoder refuses them
 * otherwise, so no handler ever reads past one.
 */
int
wire_decode(const struct wire_type *t, const uint8_t *body, size_t len,
    void *msg, const uint8_t **trailer, size_t *trailer_len, char *err,
    size_t errlen)
{
	uint8_t *dst = msg;
	size_t fixed = wire_fixed_len(t), pos = 0;

	if (len < fixed || len - fixed > t->trailer_max) {
		snprintf(err, errlen, "%s: length %zu, expected %zu", t->name,
		    len, fixed);
		return -1;
	}
	if (t->host_size > 0)
		memset(dst, 0, t->host_size);
	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *f = &t->fields[i];

		if (f->kind == WIRE_RAW)
			memcpy(dst + f->offset, body + pos, f->size);
		else if (f->kind == WIRE_BYTES) {
			memcpy(dst + f->offset, body + pos, f->size);
			if (!wire_str_ok((const char *)body + pos, f->size)) {
				snprintf(err, errlen, "%s: unterminated string "
				    "field", t->name);
				return -1;
			}
		} else
			store_host(dst + f->offset, get_uint(body + pos,
			    f->size), f->size);
		pos += f->size;
	}
	if (trailer != NULL) {
		*trailer = body + fixed;
		*trailer_len = len - fixed;
	}
	return 0;
}

/*
 * The bytes one rank reads (send) and writes (recv) in an operation: the
 * library places its buffers by them and the daemon checks them against
 * the rank's segments, so both sides use this one function.  -1 when the
 * sizes overflow or the collective is unknown.
 */
int
proto_op_bytes(int coll, uint64_t count, size_t esize, uint32_t nranks,
    uint32_t rank, uint32_t root, uint64_t *send, uint64_t *recv)
{
	uint64_t one, all;

	if (esize != 0 && count > UINT64_MAX / esize / (nranks ? nranks : 1))
		return -1;
	one = count * esize;
	all = one * nranks;
	switch (coll) {
	case COLL_ALLREDUCE: case COLL_BROADCAST:
		*send = *recv = one; break;
	case COLL_BARRIER:
		*send = *recv = 0; break;
	case COLL_REDUCE:
		*send = one; *recv = rank == root ? one : 0; break;
	case COLL_ALLGATHER:
		*send = one; *recv = all; break;
	case COLL_REDUCE_SCATTER:
		*send = all; *recv = one; break;
	case COLL_ALLTOALL:
		*send = *recv = all; break;
	case COLL_SEND:
		*send = one; *recv = 0; break;
	case COLL_RECV:
		*send = 0; *recv = one; break;
	case COLL_GATHER:
		*send = one; *recv = rank == root ? all : 0; break;
	case COLL_SCATTER:
		*send = rank == root ? all : 0; *recv = one; break;
	default:		/* the v-collectives: proto_vec_bytes */
		return -1;
	}
	return 0;
}

/* uint64s in a v-collective's vector: nranks per array; 0 for the others. */
size_t
proto_vec_len(int coll, uint32_t nranks)
{
	return coll == COLL_ALLGATHERV ? 2 * (size_t)nranks :
	    coll == COLL_ALLTOALLV ? 4 * (size_t)nranks : 0;
}

/* A v-collective vector's receive counts and displacements. */
void
proto_vec_recv_blocks(int coll, uint32_t nranks, const uint64_t *vec,
    const uint64_t **counts, const uint64_t **displs)
{
	size_t first = coll == COLL_ALLTOALLV ? 2 * (size_t)nranks : 0;

	*counts = vec + first;
	*displs = vec + first + nranks;
}

/*
 * In bytes, the end of the furthest of the n blocks of counts[] elements
 * at displs[]; -1 (with why) when one reaches past 2^62 bytes.
 */
static int
vec_extent(const uint64_t *counts, const uint64_t *displs, uint32_t n,
    size_t esize, const char *what, uint64_t *bytes, char *err, size_t errlen)
{
	const uint64_t lim = (UINT64_MAX >> 2) / (esize ? esize : 1);
	uint64_t end = 0;

	for (uint32_t r = 0; r < n; r++) {
		if (counts[r] > lim || displs[r] > lim - counts[r]) {
			snprintf(err, errlen, "%s block %u (%llu elements at "
			    "%llu) is too large", what, r,
			    (unsigned long long)counts[r],
			    (unsigned long long)displs[r]);
			return -1;
		}
		if (counts[r] > 0 && displs[r] + counts[r] > end)
			end = displs[r] + counts[r];
	}
	*bytes = end * esize;
	return 0;
}

/*
 * A v-collective's bytes read and written by one rank: each buffer's
 * extent, the furthest of its blocks; -1 with why when the vector does not
 * hold.  allgatherv: count is the sum of recvcounts, and this rank sends
 * recvcounts[rank] elements.  alltoallv: count is 0.
 */
int
proto_vec_bytes(int coll, uint64_t count, size_t esize, uint32_t nranks,
    uint32_t rank, const uint64_t *vec, uint64_t *send, uint64_t *recv,
    char *err, size_t errlen)
{
	const uint64_t *v1 = vec + nranks, *v2 = v1 + nranks, *v3 = v2 + nranks;
	uint64_t sum = 0;

	if (coll == COLL_ALLTOALLV) {
		if (count != 0) {
			snprintf(err, errlen, "alltoallv with count %llu, not 0",
			    (unsigned long long)count);
			return -1;
		}
		return vec_extent(vec, v1, nranks, esize, "send", send, err,
		    errlen) == -1 || vec_extent(v2, v3, nranks, esize, "receive",
		    recv, err, errlen) == -1 ? -1 : 0;
	}
	if (coll != COLL_ALLGATHERV || rank >= nranks) {
		snprintf(err, errlen, "collective %d has no vector", coll);
		return -1;
	}
	if (vec_extent(vec, v1, nranks, esize, "receive", recv, err,
	    errlen) == -1)
		return -1;
	for (uint32_t r = 0; r < nranks; r++)
		if ((sum += vec[r]) > (UINT64_MAX >> 2)) {
			snprintf(err, errlen, "allgatherv recvcounts sum to "
			    "more than 2^62 elements");
			return -1;
		}
	if (sum != count) {
		snprintf(err, errlen, "allgatherv of %llu elements, but its "
		    "recvcounts sum to %llu", (unsigned long long)count,
		    (unsigned long long)sum);
		return -1;
	}
	*send = vec[rank] * esize;
	return 0;
}

/* 32 bits of FNV-1a over n uint64s: ranks compare their recvcounts by it. */
uint32_t
proto_vec_digest(const uint64_t *v, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 64; b += 8)
			h = (h ^ ((v[i] >> b) & 0xff)) * 0x100000001b3ULL;
	return (uint32_t)(h ^ (h >> 32));
}

/*
 * A rank's send and receive buffers may overlap only in the collective's
 * in-place form: the same buffer, or, for allgather and reduce_scatter,
 * the rank's own block of the larger one.  The library checks it for a
 * friendly error, the daemon because its copies rely on it.
 */
int
proto_bufs_ok(int coll, uint32_t rank, uintptr_t send, uint64_t sbytes,
    uintptr_t recv, uint64_t rbytes)
{
	if (sbytes == 0 || rbytes == 0 || send >= recv + rbytes ||
	    recv >= send + sbytes)
		return 1;
	switch (coll) {
	case COLL_ALLGATHER: case COLL_GATHER:
		return send == recv + (uint64_t)rank * sbytes;
	case COLL_REDUCE_SCATTER: case COLL_SCATTER:
		return recv == send + (uint64_t)rank * rbytes;
	case COLL_ALLGATHERV: case COLL_ALLTOALLV:
		return 0;		/* no in-place form */
	default:
		return send == recv && sbytes == rbytes;
	}
}

/*
 * Where a daemon of this user listens by default: /run/mccl for root, the
 * user's runtime directory otherwise.  Clients look for the system
 * daemon's socket first (conn_socket_path).
 */
void
proto_default_socket(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (geteuid() == 0)
		snprintf(buf, len, "%s", PROTO_SYSTEM_SOCKET);
	else if (xdg != NULL && *xdg != '\0')
		snprintf(buf, len, "%s/mccl/mccld.sock", xdg);
	else
		snprintf(buf, len, "/tmp/mccl-%u/mccld.sock",
		    (unsigned)geteuid());
}

/*
 * The length of the well-formed UTF-8 sequence at s (at most left bytes),
 * or 0: no overlong forms, surrogates, or code points past U+10FFFF.
 */
static size_t
utf8_len(const unsigned char *s, size_t left)
{
	uint32_t cp;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	cp = s[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

/*
 * A job name is 1 to JOB_NAME_MAX - 1 bytes of UTF-8 without control
 * characters: it reaches logs, JSON (mcclctl) and other users' screens.
 */
int
proto_job_name_check(const char *name, char *err, size_t errlen)
{
	const unsigned char *u = (const unsigned char *)name;
	size_t len = strnlen(name, JOB_NAME_MAX), n;

	if (len == 0 || len >= JOB_NAME_MAX) {
		snprintf(err, errlen, "job name must be 1 to %d bytes",
		    JOB_NAME_MAX - 1);
		return -1;
	}
	for (size_t i = 0; i < len; i += n) {
		if ((n = utf8_len(u + i, len - i)) == 0) {
			snprintf(err, errlen, "job name is not UTF-8 (byte "
			    "0x%02x at %zu)", u[i], i);
			return -1;
		}
		/* C0, DEL, and C1 (U+0080-U+009F: 0xc2 0x80-0x9f) */
		if (u[i] < 0x20 || u[i] == 0x7f ||
		    (u[i] == 0xc2 && u[i + 1] < 0xa0)) {
			snprintf(err, errlen, "job name has a control character "
			    "(0x%02x) at byte %zu", n == 1 ? u[i] : u[i + 1],
			    i);
			return -1;
		}
	}
	return 0;
}

/*
 * The directory holding a socket (or key) at path may be trusted: owned by
 * one of the uids in ok[], and writable by nobody else unless sticky (where
 * others may add files but not replace ours).
 */
int
proto_dir_check(const char *path, const uid_t *ok, size_t nok, char *err,
    size_t errlen)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;
	size_t i;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 :
		    (int)(slash - path), path);
	if (stat(dir, &st) == -1) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < nok && ok[i] != st.st_uid; i++)
		;
	if (i == nok) {
		snprintf(err, errlen, "directory %s belongs to uid %u, which "
		    "is not trusted here", dir, (unsigned)st.st_uid);
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		snprintf(err, errlen, "directory %s is writable by other users "
		    "(mode %04o)", dir, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

static const char *const coll_names[] = {
	"none", "allreduce", "broadcast", "barrier", "reduce", "allgather",
	"reduce_scatter", "alltoall", "send", "recv", "gather", "scatter",
	"allgatherv", "alltoallv"
};
_Static_assert(sizeof(coll_names) / sizeof(coll_names[0]) == COLL_MAX + 1,
    "a name for every collective");

const char *
proto_coll_name(int coll)
{
	return coll >= 1 && coll <= COLL_MAX ? coll_names[coll] : "unknown";
}

/* mccl_result_t's words: mccl_strerror, and the daemon's failed jobs. */
static const char *const result_names[] = {
	"success", "invalid argument", "unsupported", "cannot connect to the "
	"daemon", "timeout", "peer failed", "aborted", "permission denied",
	"out of memory", "protocol error", "internal error"
};
_Static_assert(sizeof(result_names) / sizeof(result_names[0]) ==
    PROTO_NUM_RESULTS, "a name for every result");

const char *
proto_result_name(int r)
{
	return r >= 0 && r < PROTO_NUM_RESULTS ? result_names[r] :
	    "unknown result code";
}

static const char *const algo_names[] = {
	"auto", "ring", "doubling", "rabenseifner", "direct", "tree"
};
_Static_assert(sizeof(algo_names) / sizeof(algo_names[0]) == ALGO_MAX + 1,
    "a name for every algorithm");

const char *
proto_algo_name(int algo)
{
	return algo >= 0 && algo <= ALGO_MAX ? algo_names[algo] : "unknown";
}

/* The algorithm named s (as MCCL_ALGO and the "algo" key spell it), or -1. */
int
proto_algo_parse(const char *s)
{
	for (int a = 0; a <= ALGO_MAX; a++)
		if (strcmp(s, algo_names[a]) == 0)
			return a;
	return -1;
}

/* Collectives that take a reduction op, and those that take a root. */
int
proto_coll_reduces(int coll)
{
	return coll == COLL_ALLREDUCE || coll == COLL_REDUCE ||
	    coll == COLL_REDUCE_SCATTER;
}

int
proto_coll_has_root(int coll)
{
	return coll == COLL_BROADCAST || coll == COLL_REDUCE ||
	    coll == COLL_SEND || coll == COLL_RECV || coll == COLL_GATHER ||
	    coll == COLL_SCATTER;
}

int
proto_coll_p2p(int coll)
{
	return coll == COLL_SEND || coll == COLL_RECV;
}

/* Arrays of 32-bit integers in trailers (rank lists, rank maps). */
void
wire_put_u32s(uint8_t *out, const uint32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put_uint(out + 4 * i, v[i], 4);
}

void
wire_get_u32s(uint32_t *v, const uint8_t *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (uint32_t)get_uint(in + 4 * i, 4);
}

/* A string field is valid when it is NUL-terminated inside its array. */
int
wire_str_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}

size_t
wire_strlcpy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);

	if (size > 0) {
		size_t n = len < size - 1 ? len : size - 1;

		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

/* ---- IPC message layouts ---- */

#define F WIRE_FIELD
static const struct wire_field f_ipc_hello[] = {
	F(ipc_hello, version, WIRE_INT), F(ipc_hello, pid, WIRE_INT),
	F(ipc_hello, probe_addr, WIRE_INT), F(ipc_hello, probe_val, WIRE_INT),
};
static const struct wire_field f_ipc_hello_ok[] = {
	F(ipc_hello_ok, version, WIRE_INT), F(ipc_hello_ok, node_index, WIRE_INT),
	F(ipc_hello_ok, nnodes, WIRE_INT),
	F(ipc_hello_ok, init_timeout_ms, WIRE_INT),
	F(ipc_hello_ok, op_timeout_ms, WIRE_INT),
	F(ipc_hello_ok, xmem, WIRE_INT), F(ipc_hello_ok, node_name, WIRE_BYTES),
};
static const struct wire_field f_ipc_error[] = {
	F(ipc_error, code, WIRE_INT), F(ipc_error, request, WIRE_INT),
};
static const struct wire_field f_ipc_seg_add[] = {
	F(ipc_seg_add, seg_id, WIRE_INT), F(ipc_seg_add, size, WIRE_INT),
};
static const struct wire_field f_ipc_seg_ok[] = {
	F(ipc_seg_ok, seg_id, WIRE_INT),
};
static const struct wire_field f_ipc_seg_del[] = {
	F(ipc_seg_del, seg_id, WIRE_INT),
};
static const struct wire_field f_ipc_bell[] = {
	F(ipc_bell, seg_id, WIRE_INT),
};
static const struct wire_field f_ipc_join[] = {
	F(ipc_join, nranks, WIRE_INT), F(ipc_join, rank, WIRE_INT),
	F(ipc_join, timeout_ms, WIRE_INT), F(ipc_join, job, WIRE_BYTES),
};
static const struct wire_field f_ipc_joined[] = {
	F(ipc_joined, job_id, WIRE_INT), F(ipc_joined, nranks, WIRE_INT),
	F(ipc_joined, rank, WIRE_INT), F(ipc_joined, nnodes, WIRE_INT),
	F(ipc_joined, nlocal, WIRE_INT),
};
static const struct wire_field f_ipc_op[] = {
	F(ipc_op, seq, WIRE_INT), F(ipc_op, coll, WIRE_INT),
	F(ipc_op, dtype, WIRE_INT), F(ipc_op, redop, WIRE_INT),
	F(ipc_op, algo, WIRE_INT), F(ipc_op, root, WIRE_INT),
	F(ipc_op, count, WIRE_INT), F(ipc_op, send_seg, WIRE_INT),
	F(ipc_op, recv_seg, WIRE_INT), F(ipc_op, send_off, WIRE_INT),
	F(ipc_op, recv_off, WIRE_INT), F(ipc_op, timeout_ms, WIRE_INT),
	F(ipc_op, tag, WIRE_INT), F(ipc_op, vec_seg, WIRE_INT),
	F(ipc_op, vec_off, WIRE_INT), F(ipc_op, wire, WIRE_INT),
	F(ipc_op, flags, WIRE_INT),
};
static const struct wire_field f_ipc_op_done[] = {
	F(ipc_op_done, seq, WIRE_INT), F(ipc_op_done, code, WIRE_INT),
	F(ipc_op_done, source, WIRE_INT), F(ipc_op_done, tag, WIRE_INT),
};
static const struct wire_field f_ipc_job_failed[] = {
	F(ipc_job_failed, code, WIRE_INT),
};
static const struct wire_field f_ipc_ctl[] = {
	F(ipc_ctl, cmd, WIRE_INT),
};
static const struct wire_field f_ipc_ctl_reply[] = {
	F(ipc_ctl_reply, code, WIRE_INT), F(ipc_ctl_reply, more, WIRE_INT),
};

static const struct wire_type ipc_types[] = {
	WIRE_TYPE(IPC_HELLO, ipc_hello, f_ipc_hello, 0, 0),
	WIRE_TYPE(IPC_HELLO_OK, ipc_hello_ok, f_ipc_hello_ok, 0, 0),
	WIRE_TYPE(IPC_ERROR, ipc_error, f_ipc_error, IPC_TEXT_MAX, 0),
	WIRE_TYPE(IPC_SEG_ADD, ipc_seg_add, f_ipc_seg_add, 0, 1),
	WIRE_TYPE(IPC_SEG_OK, ipc_seg_ok, f_ipc_seg_ok, 0, 0),
	WIRE_TYPE(IPC_SEG_DEL, ipc_seg_del, f_ipc_seg_del, 0, 0),
	WIRE_TYPE(IPC_BELL, ipc_bell, f_ipc_bell, 0, 0),
	WIRE_TYPE(IPC_JOIN, ipc_join, f_ipc_join, 0, 0),
	WIRE_TYPE(IPC_JOINED, ipc_joined, f_ipc_joined, 0, 0),
	WIRE_TYPE_EMPTY(IPC_LEAVE, 0, 0),
	WIRE_TYPE_EMPTY(IPC_ABORT, 0, 0),
	WIRE_TYPE(IPC_JOB_FAILED, ipc_job_failed, f_ipc_job_failed,
	    IPC_TEXT_MAX, 0),
	WIRE_TYPE(IPC_OP, ipc_op, f_ipc_op, 0, 0),
	WIRE_TYPE(IPC_OP_DONE, ipc_op_done, f_ipc_op_done, IPC_TEXT_MAX, 0),
	WIRE_TYPE(IPC_CTL, ipc_ctl, f_ipc_ctl, JOB_NAME_MAX, 0),
	WIRE_TYPE(IPC_CTL_REPLY, ipc_ctl_reply, f_ipc_ctl_reply,
	    CTL_PIECE_MAX, 0),
};

const struct wire_proto ipc_proto = {
	"ipc", IPC_MAGIC, IPC_VERSION, ipc_types,
	sizeof(ipc_types) / sizeof(ipc_types[0])
};

/* ---- peer message layouts ---- */

static const struct wire_field f_peer_hello[] = {
	F(peer_hello, version, WIRE_INT), F(peer_hello, node_index, WIRE_INT),
	F(peer_hello, nnodes, WIRE_INT), F(peer_hello, cluster_hash, WIRE_INT),
	F(peer_hello, node_name, WIRE_BYTES),
};
static const struct wire_field f_peer_ping[] = {
	F(peer_ping, stamp_ns, WIRE_INT),
};
static const struct wire_field f_peer_silent[] = {
	F(peer_silent, node, WIRE_INT), F(peer_silent, silent_ms, WIRE_INT),
};
static const struct wire_field f_peer_join[] = {
	F(peer_join, uid, WIRE_INT), F(peer_join, nranks, WIRE_INT),
	F(peer_join, node, WIRE_INT), F(peer_join, nlocal, WIRE_INT),
	F(peer_join, timeout_ms, WIRE_INT), F(peer_join, job, WIRE_BYTES),
	F(peer_join, alpha_ns, WIRE_INT), F(peer_join, beta_ps, WIRE_INT),
	F(peer_join, gamma_ps, WIRE_INT), F(peer_join, beta_pair_ps, WIRE_INT),
};
static const struct wire_field f_peer_formed[] = {
	F(peer_formed, job_id, WIRE_INT), F(peer_formed, uid, WIRE_INT),
	F(peer_formed, nranks, WIRE_INT), F(peer_formed, job, WIRE_BYTES),
	F(peer_formed, lanes, WIRE_INT), F(peer_formed, alpha_ns, WIRE_INT),
	F(peer_formed, beta_ps, WIRE_INT), F(peer_formed, gamma_ps, WIRE_INT),
	F(peer_formed, beta_pair_ps, WIRE_INT),
};
static const struct wire_field f_peer_join_fail[] = {
	F(peer_join_fail, uid, WIRE_INT), F(peer_join_fail, rank, WIRE_INT),
	F(peer_join_fail, code, WIRE_INT), F(peer_join_fail, job, WIRE_BYTES),
};
static const struct wire_field f_peer_abort[] = {
	F(peer_abort, job_id, WIRE_INT), F(peer_abort, code, WIRE_INT),
	F(peer_abort, origin, WIRE_INT),
};
static const struct wire_field f_peer_job_query[] = {
	F(peer_job_query, job_id, WIRE_INT), F(peer_job_query, qid, WIRE_INT),
};
static const struct wire_field f_peer_check_run[] = {
	F(peer_check_run, check_id, WIRE_INT), F(peer_check_run, pair, WIRE_INT),
	F(peer_check_run, to, WIRE_INT), F(peer_check_run, lanes, WIRE_INT),
	F(peer_check_run, ms, WIRE_INT), F(peer_check_run, force, WIRE_INT),
};
static const struct wire_field f_peer_check_done[] = {
	F(peer_check_done, check_id, WIRE_INT),
	F(peer_check_done, pair, WIRE_INT), F(peer_check_done, code, WIRE_INT),
	F(peer_check_done, rtt_ns, WIRE_INT),
	F(peer_check_done, tx_bytes, WIRE_INT),
	F(peer_check_done, tx_ns, WIRE_INT),
	F(peer_check_done, rx_bytes, WIRE_INT),
	F(peer_check_done, rx_ns, WIRE_INT),
};
static const struct wire_field f_peer_data_hello[] = {
	F(peer_data_hello, job_id, WIRE_INT), F(peer_data_hello, node, WIRE_INT),
	F(peer_data_hello, stream, WIRE_INT),
};
static const struct wire_field f_peer_data_link[] = {
	F(peer_data_link, transport, WIRE_INT), F(peer_data_link, need, WIRE_INT),
	F(peer_data_link, qpn, WIRE_INT), F(peer_data_link, psn, WIRE_INT),
	F(peer_data_link, lid, WIRE_INT), F(peer_data_link, mtu, WIRE_INT),
	F(peer_data_link, gid, WIRE_RAW),
	F(peer_data_link, ring_addr, WIRE_INT),
	F(peer_data_link, ring_rkey, WIRE_INT),
	F(peer_data_link, ring_bytes, WIRE_INT),
};
static const struct wire_field f_peer_ophdr[] = {
	F(peer_ophdr, seq, WIRE_INT), F(peer_ophdr, coll, WIRE_INT),
	F(peer_ophdr, dtype, WIRE_INT), F(peer_ophdr, redop, WIRE_INT),
	F(peer_ophdr, algo, WIRE_INT), F(peer_ophdr, root, WIRE_INT),
	F(peer_ophdr, count, WIRE_INT), F(peer_ophdr, wire, WIRE_INT),
};
static const struct wire_field f_peer_auth_hello[] = {
	F(peer_auth_hello, node, WIRE_INT), F(peer_auth_hello, nonce, WIRE_RAW),
};
static const struct wire_field f_peer_auth_challenge[] = {
	F(peer_auth_challenge, node, WIRE_INT),
	F(peer_auth_challenge, nonce, WIRE_RAW),
	F(peer_auth_challenge, mac, WIRE_RAW),
};
static const struct wire_field f_peer_auth_response[] = {
	F(peer_auth_response, mac, WIRE_RAW),
};
static const struct wire_field f_peer_p2p[] = {
	F(peer_p2p, src, WIRE_INT), F(peer_p2p, dst, WIRE_INT),
	F(peer_p2p, tag, WIRE_INT), F(peer_p2p, bytes, WIRE_INT),
};
#undef F

static const struct wire_type peer_types[] = {
	WIRE_TYPE(PEER_HELLO, peer_hello, f_peer_hello, 0, 0),
	WIRE_TYPE(PEER_PING, peer_ping, f_peer_ping, 0, 0),
	WIRE_TYPE(PEER_PONG, peer_ping, f_peer_ping, 0, 0),
	WIRE_TYPE(PEER_AUTH_HELLO, peer_auth_hello, f_peer_auth_hello, 0, 0),
	WIRE_TYPE(PEER_AUTH_CHALLENGE, peer_auth_challenge,
	    f_peer_auth_challenge, 0, 0),
	WIRE_TYPE(PEER_AUTH_RESPONSE, peer_auth_response,
	    f_peer_auth_response, 0, 0),
	WIRE_TYPE(PEER_SILENT, peer_silent, f_peer_silent, 0, 0),
	WIRE_TYPE(PEER_JOIN, peer_join, f_peer_join, PEER_RANKS_MAX * 4, 0),
	WIRE_TYPE(PEER_FORMED, peer_formed, f_peer_formed, PEER_RANKS_MAX * 4, 0),
	WIRE_TYPE(PEER_JOIN_FAIL, peer_join_fail, f_peer_join_fail,
	    PEER_TEXT_MAX, 0),
	WIRE_TYPE(PEER_ABORT, peer_abort, f_peer_abort, PEER_TEXT_MAX, 0),
	WIRE_TYPE(PEER_JOB_QUERY, peer_job_query, f_peer_job_query, 0, 0),
	WIRE_TYPE(PEER_JOB_INFO, peer_job_query, f_peer_job_query,
	    PEER_MSG_MAX - 256, 0),
	WIRE_TYPE(PEER_CHECK_RUN, peer_check_run, f_peer_check_run, 0, 0),
	WIRE_TYPE(PEER_CHECK_DONE, peer_check_done, f_peer_check_done,
	    PEER_TEXT_MAX, 0),
	WIRE_TYPE(PEER_DATA_HELLO, peer_data_hello, f_peer_data_hello, 0, 0),
	WIRE_TYPE(PEER_DATA_OPHDR, peer_ophdr, f_peer_ophdr, 0, 0),
	WIRE_TYPE_EMPTY(PEER_DATA, PEER_DATA_MAX, 0),
	WIRE_TYPE(PEER_P2P, peer_p2p, f_peer_p2p, 0, 0),
	WIRE_TYPE(PEER_DATA_LINK, peer_data_link, f_peer_data_link, 0, 0),
	WIRE_TYPE_EMPTY(PEER_DATA_READY, 0, 0),
};

const struct wire_proto peer_proto = {
	"peer", PEER_MAGIC, PEER_VERSION, peer_types,
	sizeof(peer_types) / sizeof(peer_types[0])
};
