/*
 * fuzz_wire.c: checks shared by the IPC and peer fuzz targets.  Each result
 * of proto.c is compared with an oracle written here independently of it:
 * which headers must pass, which bodies must decode, what the decoded
 * fields must hold, and that encoding them again gives the same bytes.
 */
#include <string.h>

#include "fuzz.h"

#define ERR_LEN		256

static uint64_t
get_be(const uint8_t *p, size_t size)
{
	uint64_t v = 0;

	for (size_t i = 0; i < size; i++)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t
get_host(const uint8_t *p, size_t size)
{
	uint8_t v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	switch (size) {
	case 1: memcpy(&v8, p, 1); return v8;
	case 2: memcpy(&v16, p, 2); return v16;
	case 4: memcpy(&v32, p, 4); return v32;
	case 8: memcpy(&v64, p, 8); return v64;
	}
	fuzz_fail(__FILE__, __LINE__, "integer field of odd size");
}

/* The largest host struct of a protocol: what a decode union must hold. */
size_t
fuzz_max_host_size(const struct wire_proto *proto)
{
	size_t max = 0;

	for (size_t i = 0; i < proto->ntypes; i++)
		if (proto->types[i].host_size > max)
			max = proto->types[i].host_size;
	return max;
}

static size_t
fixed_len(const struct wire_type *t)
{
	size_t len = 0;

	for (size_t i = 0; i < t->nfields; i++)
		len += t->fields[i].size;
	return len;
}

/* Oracle: the table entry a header must be accepted with, or NULL. */
static const struct wire_type *
hdr_expected(const struct wire_proto *proto, const uint8_t *p)
{
	const struct wire_type *t = NULL;
	uint64_t len = get_be(p + 8, 4);

	if (get_be(p, 4) != proto->magic || get_be(p + 4, 2) != proto->version)
		return NULL;
	for (size_t i = 0; i < proto->ntypes && t == NULL; i++)
		if (proto->types[i].type == get_be(p + 6, 2))
			t = &proto->types[i];
	if (t == NULL || len < fixed_len(t) ||
	    len - fixed_len(t) > t->trailer_max)
		return NULL;
	return t;
}

/* wire_hdr_check on the 12 bytes at p, against the oracle. */
int
fuzz_hdr_check(const struct wire_proto *proto, const uint8_t *p,
    struct fuzz_frame *f)
{
	const struct wire_type *want = hdr_expected(proto, p);
	char err[ERR_LEN] = "";
	int rc;

	memset(f, 0, sizeof(*f));
	rc = wire_hdr_check(proto, p, &f->hdr, &f->type, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -1);
	FUZZ_CHECK(f->hdr.magic == get_be(p, 4));
	FUZZ_CHECK(f->hdr.version == get_be(p + 4, 2));
	FUZZ_CHECK(f->hdr.type == get_be(p + 6, 2));
	FUZZ_CHECK(f->hdr.len == get_be(p + 8, 4));
	if (rc == -1) {
		FUZZ_CHECK(want == NULL);
		FUZZ_CHECK(err[0] != '\0');
		return -1;
	}
	FUZZ_CHECK(f->type == want);
	FUZZ_CHECK(wire_fixed_len(f->type) == fixed_len(f->type));
	return 0;
}

/* Oracle: every string field of the body holds its NUL. */
static int
strings_ok(const struct wire_type *t, const uint8_t *body)
{
	size_t pos = 0;

	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *fl = &t->fields[i];

		if (fl->kind == WIRE_BYTES &&
		    memchr(body + pos, '\0', fl->size) == NULL)
			return 0;
		pos += fl->size;
	}
	return 1;
}

/*
 * The daemon's form of the call (no trailer) into a buffer of exactly
 * host_size, so that the sanitizer sees any write past the struct; it must
 * agree with the decode into the union.
 */
static void
decode_exact(const struct wire_type *t, const uint8_t *body, size_t len,
    int want_rc, const void *msg)
{
	char err[ERR_LEN] = "";
	uint8_t *exact;
	int rc;

	if ((exact = malloc(t->host_size > 0 ? t->host_size : 1)) == NULL)
		abort();
	rc = wire_decode(t, body, len, exact, NULL, NULL, err, sizeof(err));
	FUZZ_CHECK(rc == want_rc);
	if (rc == 0)
		FUZZ_CHECK(memcmp(exact, msg, t->host_size) == 0);
	free(exact);
}

/*
 * Decode a frame whose header passed fuzz_hdr_check and whose length the
 * caller checked, into msg (msgsize bytes, the caller's union).
 */
int
fuzz_decode(const struct wire_proto *proto, const uint8_t *frame,
    size_t framelen, struct fuzz_frame *f, void *msg, size_t msgsize)
{
	const uint8_t *body = frame + WIRE_HDR_LEN;
	size_t len = framelen - WIRE_HDR_LEN;
	char err[ERR_LEN] = "";
	int rc;

	FUZZ_CHECK(framelen >= WIRE_HDR_LEN && f->hdr.len == len);
	FUZZ_CHECK(f->type->host_size <= msgsize);
	rc = wire_decode(f->type, body, len, msg, &f->trailer, &f->trailer_len,
	    err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -1);
	FUZZ_CHECK((rc == 0) == strings_ok(f->type, body));
	FUZZ_CHECK(rc == 0 || err[0] != '\0');
	decode_exact(f->type, body, len, rc, msg);
	if (rc == 0)
		fuzz_check_decoded(proto, frame, framelen, f, msg);
	return rc;
}

/* Each field of msg holds what the body says; strings hold their NUL. */
static void
check_fields(const struct wire_type *t, const uint8_t *body, const void *msg)
{
	const uint8_t *m = msg;
	size_t pos = 0;

	for (size_t i = 0; i < t->nfields; i++) {
		const struct wire_field *fl = &t->fields[i];

		FUZZ_CHECK((size_t)fl->offset + fl->size <= t->host_size);
		switch (fl->kind) {
		case WIRE_INT:
			FUZZ_CHECK(get_host(m + fl->offset, fl->size) ==
			    get_be(body + pos, fl->size));
			break;
		case WIRE_BYTES:
		case WIRE_RAW:
			FUZZ_CHECK(memcmp(m + fl->offset, body + pos,
			    fl->size) == 0);
			FUZZ_CHECK(fl->kind == WIRE_RAW ||
			    memchr(m + fl->offset, '\0', fl->size) != NULL);
			break;
		default:
			fuzz_fail(__FILE__, __LINE__, "unknown field kind");
		}
		pos += fl->size;
	}
}

/* Encoding the decoded message again gives the frame, and needs all of it. */
static void
check_reencode(const struct wire_proto *proto, const uint8_t *frame,
    size_t framelen, const struct fuzz_frame *f, const void *msg)
{
	uint8_t *out;
	size_t n;

	if ((out = malloc(framelen)) == NULL)
		abort();
	n = wire_encode(proto, f->type->type, msg, f->trailer, f->trailer_len,
	    out, framelen);
	FUZZ_CHECK(n == framelen);
	FUZZ_CHECK(memcmp(out, frame, framelen) == 0);
	n = wire_encode(proto, f->type->type, msg, f->trailer, f->trailer_len,
	    out, framelen - 1);
	FUZZ_CHECK(n == 0);
	free(out);
}

/* A successfully decoded frame, as a handler would go on to use it. */
void
fuzz_check_decoded(const struct wire_proto *proto, const uint8_t *frame,
    size_t framelen, const struct fuzz_frame *f, const void *msg)
{
	const uint8_t *body = frame + WIRE_HDR_LEN;
	size_t len = framelen - WIRE_HDR_LEN;
	size_t fixed = wire_fixed_len(f->type);

	FUZZ_CHECK(f->hdr.len == len && fixed <= len);
	FUZZ_CHECK(f->trailer == body + fixed);
	FUZZ_CHECK(f->trailer_len == len - fixed);
	FUZZ_CHECK(f->trailer >= frame && f->trailer <= frame + framelen);
	FUZZ_CHECK(f->trailer_len <= (size_t)(frame + framelen - f->trailer));
	FUZZ_CHECK(f->trailer_len <= f->type->trailer_max);
	check_fields(f->type, body, msg);
	check_reencode(proto, frame, framelen, f, msg);
}
