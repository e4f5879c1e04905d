/*
 * test_reduce.c: unit tests of daemon/engine/reduce.c, the reduction kernels.
 * Every dtype and op is checked against a plain reference computed here
 * (in double, with its own float16/bfloat16 rounding through nearbyint),
 * on odd counts and unaligned buffers, with every kernel set this CPU can
 * run; then every vector set is compared with the scalar one, bit for bit.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/reduce.h"
#include "log.h"

#define MAXSRCS		5
#define NELEMS(a)	(sizeof(a) / sizeof((a)[0]))

static const char *const isa_names[] = { "avx512", "avx2", "sse2", "scalar" };
static const size_t counts[] = { 0, 1, 7, 33, 1000, 4099, 20011 };
static const size_t nsrcs_list[] = { 1, 2, 3, 5 };

/* ---- deterministic random data (xorshift64*) ---- */

static uint64_t rng_state = 1;

static void
rng_seed(uint64_t seed)
{
	rng_state = seed * 0x9e3779b97f4a7c15ULL + 1;
}

static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* ---- elements as bits ---- */

static int
is_float(int dtype)
{
	return dtype == MCCL_FLOAT16 || dtype == MCCL_BFLOAT16 ||
	    dtype == MCCL_FLOAT32 || dtype == MCCL_FLOAT64;
}

static uint64_t
load_bits(int dtype, const unsigned char *p)
{
	uint8_t b;
	uint16_t h;
	uint32_t w;
	uint64_t q;

	switch (dtype_size(dtype)) {
	case 1:
		memcpy(&b, p, 1);
		return b;
	case 2:
		memcpy(&h, p, 2);
		return h;
	case 4:
		memcpy(&w, p, 4);
		return w;
	default:
		memcpy(&q, p, 8);
		return q;
	}
}

static void
store_bits(int dtype, unsigned char *p, uint64_t v)
{
	uint8_t b = (uint8_t)v;
	uint16_t h = (uint16_t)v;
	uint32_t w = (uint32_t)v;

	switch (dtype_size(dtype)) {
	case 1:
		memcpy(p, &b, 1);
		break;
	case 2:
		memcpy(p, &h, 2);
		break;
	case 4:
		memcpy(p, &w, 4);
		break;
	default:
		memcpy(p, &v, 8);
		break;
	}
}

/* ---- the reference ---- */

/* A 16-bit float with mbits fraction bits and exponent bias, exactly. */
static double
ref_widen16(uint64_t h, int mbits, int bias)
{
	uint64_t man = h & ((1u << mbits) - 1);
	int exp = (int)(h >> mbits & (uint64_t)(2 * bias + 1));
	double v;

	if (exp == 2 * bias + 1)
		v = man ? NAN : INFINITY;
	else if (exp == 0)
		v = ldexp((double)man, 1 - bias - mbits);
	else
		v = ldexp((double)(man | 1u << mbits), exp - bias - mbits);
	return h & 0x8000 ? -v : v;
}

/* v to that format, to nearest even; any NaN gives the canonical one. */
static uint16_t
ref_round16(double v, int mbits, int bias)
{
	unsigned int sign = signbit(v) ? 0x8000 : 0, inf;
	double q;
	int e;

	inf = (unsigned int)(2 * bias + 1) << mbits;
	if (isnan(v))
		return (uint16_t)(inf | 1u << (mbits - 1));
	if (isinf(v) || v == 0)
		return (uint16_t)(sign | (isinf(v) ? inf : 0));
	(void)frexp(fabs(v), &e);
	e = e - 1 < 1 - bias ? 1 - bias : e - 1;  /* 2^e <= |v|, or subnormal */
	q = nearbyint(ldexp(fabs(v), mbits - e));
	if (q >= ldexp(1, mbits + 1)) {	/* rounded up to 2^(e+1) */
		q /= 2;
		e++;
	}
	if (e > bias)
		return (uint16_t)(sign | inf);
	if (q < ldexp(1, mbits))		/* subnormal */
		return (uint16_t)(sign | (unsigned int)q);
	return (uint16_t)(sign | (unsigned int)(e + bias) << mbits |
	    ((unsigned int)q - (1u << mbits)));
}

static double
ref_load(int dtype, const unsigned char *p)
{
	float f;
	double d;

	switch (dtype) {
	case MCCL_FLOAT16:
		return ref_widen16(load_bits(dtype, p), 10, 15);
	case MCCL_BFLOAT16:
		return ref_widen16(load_bits(dtype, p), 7, 127);
	case MCCL_FLOAT32:
		memcpy(&f, p, sizeof(f));
		return f;
	default:
		memcpy(&d, p, sizeof(d));
		return d;
	}
}

/* Store v, already rounded to float32 unless dtype is float64. */
static void
ref_store(int dtype, unsigned char *p, double v)
{
	float f = isnan(v) ? NAN : (float)v;
	double d = isnan(v) ? NAN : v;

	switch (dtype) {
	case MCCL_FLOAT16:
		store_bits(dtype, p, ref_round16(v, 10, 15));
		break;
	case MCCL_BFLOAT16:
		store_bits(dtype, p, ref_round16(v, 7, 127));
		break;
	case MCCL_FLOAT32:
		memcpy(p, &f, sizeof(f));
		break;
	default:
		memcpy(p, &d, sizeof(d));
		break;
	}
}

/*
 * a op b in double, then rounded to float32 for every type but float64
 * (float32 operands: the double result rounds to the float32 one).
 */
static double
ref_float(int dtype, int op, double a, double b)
{
	double r;

	switch (op) {
	case MCCL_PROD:
		r = a * b;
		break;
	case MCCL_MIN:
		r = isnan(a) || isnan(b) ? NAN : b < a ? b : a;
		break;
	case MCCL_MAX:
		r = isnan(a) || isnan(b) ? NAN : a < b ? b : a;
		break;
	default:
		r = a + b;
		break;
	}
	return dtype == MCCL_FLOAT64 ? r : (double)(float)r;
}

static int64_t
sign_extend(int dtype, uint64_t v)
{
	switch (dtype) {
	case MCCL_INT8:
		return (int8_t)v;
	case MCCL_INT32:
		return (int32_t)v;
	default:
		return (int64_t)v;
	}
}

static uint64_t
ref_int(int dtype, int op, uint64_t a, uint64_t b)
{
	int sgn = dtype == MCCL_INT8 || dtype == MCCL_INT32 ||
	    dtype == MCCL_INT64;
	int64_t sa = sign_extend(dtype, a), sb = sign_extend(dtype, b);
	int less = sgn ? sb < sa : b < a;	/* b < a */

	switch (op) {
	case MCCL_SUM:
		return a + b;
	case MCCL_PROD:
		return a * b;
	case MCCL_MIN:
		return less ? b : a;
	case MCCL_BAND:
		return a & b;
	case MCCL_BOR:
		return a | b;
	case MCCL_BXOR:
		return a ^ b;
	default:
		return !less && a != b ? b : a;
	}
}

/* *acc = *acc op *b, one element. */
static void
ref_step(int dtype, int op, unsigned char *acc, const unsigned char *b)
{
	if (is_float(dtype))
		ref_store(dtype, acc, ref_float(dtype, op,
		    ref_load(dtype, acc), ref_load(dtype, b)));
	else
		store_bits(dtype, acc, ref_int(dtype, op,
		    load_bits(dtype, acc), load_bits(dtype, b)));
}

/* ---- random data ---- */

static const uint64_t specials[][15] = {
	[MCCL_FLOAT16] = { 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d01,
	    0xfe37, 0x7bff, 0xfbff, 0x0400, 0x0001, 0x8001, 0x03ff, 0x3c00,
	    0xbc00 },
	[MCCL_BFLOAT16] = { 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
	    0xffc3, 0x7f7f, 0xff7f, 0x0080, 0x0001, 0x8001, 0x007f, 0x3f80,
	    0xbf80 },
	[MCCL_FLOAT32] = { 0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
	    0x7f800001, 0xffc12345, 0x7f7fffff, 0xff7fffff, 0x00800000, 1,
	    0x80000001, 0x007fffff, 0x3f800000, 0xbf800000 },
	[MCCL_FLOAT64] = { 0, 0x8000000000000000, 0x7ff0000000000000,
	    0xfff0000000000000, 0x7ff8000000000000, 0x7ff0000000000001,
	    0xfff8123456789abc, 0x7fefffffffffffff, 0xffefffffffffffff,
	    0x0010000000000000, 1, 0x8000000000000001, 0x000fffffffffffff,
	    0x3ff0000000000000, 0xbff0000000000000 },
};

/* Integers: random bits.  Floats: 1/8 special values, 1/4 random bits
 * (NaN payloads, subnormals, huge), the rest moderate values whose sums
 * and products round. */
static void
fill_random(int dtype, unsigned char *p, size_t count)
{
	size_t esz = dtype_size(dtype);
	uint64_t r;
	double v;

	for (size_t i = 0; i < count; i++, p += esz) {
		r = rng();
		if (!is_float(dtype) || r % 8 == 1 || r % 8 == 2) {
			store_bits(dtype, p, rng());
		} else if (r % 8 == 0) {
			store_bits(dtype, p, specials[dtype][r / 8 % 15]);
		} else {
			v = (double)(int64_t)(r >> 40 & 0xfffff) - 0x80000;
			v = ldexp(v, (int)(r / 8 % 24) - 30);
			ref_store(dtype, p, dtype == MCCL_FLOAT64 ? v :
			    (double)(float)v);
		}
	}
}

/* ---- one case: sources, and what the reference makes of them ---- */

enum mode { MODE_INTO, MODE_MANY, MODE_INPLACE };

struct rcase {
	int		 dtype, op;
	size_t		 nsrcs, count, bytes;
	unsigned char	*src[MAXSRCS];
	unsigned char	*want;
};

static void
rcase_init(struct rcase *c, int dtype, int op, size_t nsrcs, size_t count)
{
	c->dtype = dtype;
	c->op = op;
	c->nsrcs = nsrcs;
	c->count = count;
	c->bytes = count * dtype_size(dtype);
	rng_seed((uint64_t)dtype << 40 ^ (uint64_t)op << 32 ^ nsrcs << 24 ^
	    count);
	for (size_t s = 0; s < nsrcs; s++) {
		c->src[s] = malloc(c->bytes + 1);
		ck_assert_ptr_nonnull(c->src[s]);
		fill_random(dtype, c->src[s], count);
	}
	c->want = malloc(c->bytes + 1);
	ck_assert_ptr_nonnull(c->want);
	memcpy(c->want, c->src[0], c->bytes);
	for (size_t s = 1; s < nsrcs; s++)
		for (size_t i = 0; i < c->bytes; i += dtype_size(dtype))
			ref_step(dtype, op, c->want + i, c->src[s] + i);
}

static void
rcase_free(struct rcase *c)
{
	for (size_t s = 0; s < c->nsrcs; s++)
		free(c->src[s]);
	free(c->want);
}

/* got must equal want, except that any NaN matches any NaN. */
static void
check_equal(int dtype, int op, const unsigned char *got,
    const unsigned char *want, size_t count, const char *what)
{
	size_t esz = dtype_size(dtype);

	if (memcmp(got, want, count * esz) == 0)
		return;
	for (size_t i = 0; i < count; i++) {
		const unsigned char *g = got + i * esz, *w = want + i * esz;

		if (memcmp(g, w, esz) == 0 || (is_float(dtype) &&
		    isnan(ref_load(dtype, g)) && isnan(ref_load(dtype, w))))
			continue;
		ck_abort_msg("%s: %s %s on %s, count %zu: element %zu is "
		    "0x%llx, want 0x%llx", what, dtype_name(dtype),
		    redop_name(op), reduce_isa(), count, i,
		    (unsigned long long)load_bits(dtype, g),
		    (unsigned long long)load_bits(dtype, w));
	}
}

/* Run c with the active kernels, every buffer off bytes (or more) past
 * an allocation, so none is aligned alike. */
static void
rcase_run(const struct rcase *c, size_t off, enum mode mode)
{
	unsigned char *mem[MAXSRCS + 1], *src[MAXSRCS], *dst;
	const void *srcs[MAXSRCS];
	char what[64];

	for (size_t s = 0; s <= c->nsrcs; s++) {
		mem[s] = malloc(c->bytes + 16);
		ck_assert_ptr_nonnull(mem[s]);
		memset(mem[s], 0xa5, c->bytes + 16);
	}
	for (size_t s = 0; s < c->nsrcs; s++) {
		src[s] = mem[s] + off + s;
		memcpy(src[s], c->src[s], c->bytes);
		srcs[s] = src[s];
	}
	dst = mode == MODE_INPLACE ? src[0] : mem[c->nsrcs] + off + 7;
	if (mode == MODE_INTO) {
		memcpy(dst, src[0], c->bytes);
		for (size_t s = 1; s < c->nsrcs; s++)
			reduce_into(dst, src[s], c->count, c->dtype, c->op);
	} else
		reduce_many(dst, srcs, c->nsrcs, c->count, c->dtype, c->op);
	snprintf(what, sizeof(what), "%s of %zu sources, offset %zu",
	    mode == MODE_INTO ? "reduce_into chain" : mode == MODE_MANY ?
	    "reduce_many" : "reduce_many in place", c->nsrcs, off);
	check_equal(c->dtype, c->op, dst, c->want, c->count, what);
	for (size_t s = 1; s < c->nsrcs; s++)	/* sources left alone */
		ck_assert_mem_eq(src[s], c->src[s], c->bytes);
	for (size_t s = 0; s <= c->nsrcs; s++)
		free(mem[s]);
}

/* ---- tests ---- */

START_TEST(test_names)
{
	static const char *const names[] = { "int8", "uint8", "int32",
	    "uint32", "int64", "uint64", "float16", "bfloat16", "float32",
	    "float64" };
	static const size_t sizes[] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
	static const char *const ops[] = { "sum", "prod", "min", "max", "avg",
	    "band", "bor", "bxor" };

	for (int d = 0; d < MCCL_NUM_DTYPES; d++) {
		ck_assert_str_eq(dtype_name(d), names[d]);
		ck_assert_uint_eq(dtype_size(d), sizes[d]);
	}
	for (int op = 0; op < MCCL_NUM_OPS; op++)
		ck_assert_str_eq(redop_name(op), ops[op]);
	ck_assert_str_eq(dtype_name(-1), "unknown");
	ck_assert_str_eq(dtype_name(MCCL_NUM_DTYPES), "unknown");
	ck_assert_str_eq(redop_name(-1), "unknown");
	ck_assert_str_eq(redop_name(MCCL_NUM_OPS), "unknown");
	ck_assert_uint_eq(dtype_size(-1), 0);
	ck_assert_uint_eq(dtype_size(MCCL_NUM_DTYPES), 0);
}
END_TEST

START_TEST(test_supported)
{
	for (int d = -1; d <= MCCL_NUM_DTYPES; d++) {
		for (int op = -1; op <= MCCL_NUM_OPS; op++) {
			int valid = d >= 0 && d < MCCL_NUM_DTYPES &&
			    op >= 0 && op < MCCL_NUM_OPS &&
			    (op != MCCL_AVG || is_float(d)) &&
			    (op < MCCL_BAND || !is_float(d));

			ck_assert_msg(reduce_supported(d, op) == valid,
			    "reduce_supported(%d, %d) != %d", d, op, valid);
		}
	}
	ck_assert_int_eq(reduce_supported(MCCL_INT32, MCCL_AVG), 0);
	ck_assert_int_eq(reduce_supported(MCCL_UINT8, MCCL_AVG), 0);
	ck_assert_int_eq(reduce_supported(MCCL_BFLOAT16, MCCL_AVG), 1);
	ck_assert_int_eq(reduce_supported(MCCL_INT64, MCCL_BXOR), 1);
	ck_assert_int_eq(reduce_supported(MCCL_FLOAT32, MCCL_BAND), 0);
}
END_TEST

START_TEST(test_isa_select)
{
	const char *best = reduce_isa();
	int known = 0;

	for (size_t k = 0; k < NELEMS(isa_names); k++)
		known |= strcmp(best, isa_names[k]) == 0;
	ck_assert_msg(known, "reduce_isa() is \"%s\"", best);
	ck_assert_int_eq(reduce_force_isa("scalar"), 0);
	ck_assert_str_eq(reduce_isa(), "scalar");
	ck_assert_int_eq(reduce_force_isa("mmx"), -1);
	ck_assert_str_eq(reduce_isa(), "scalar");
	ck_assert_int_eq(reduce_force_isa(best), 0);
	ck_assert_str_eq(reduce_isa(), best);
	ck_assert_int_eq(reduce_force_isa(NULL), 0);
	ck_assert_str_eq(reduce_isa(), best);
}
END_TEST

/* One case under every kernel set, alignment and way of calling. */
static void
rcase_run_all(int dtype, int op, size_t nsrcs, size_t count)
{
	static const size_t offs[] = { 0, 1, 3 };
	struct rcase c;

	rcase_init(&c, dtype, op, nsrcs, count);
	for (size_t k = 0; k < NELEMS(isa_names); k++) {
		if (reduce_force_isa(isa_names[k]) != 0)
			continue;
		for (size_t o = 0; o < NELEMS(offs); o++)
			for (int m = MODE_INTO; m <= MODE_INPLACE; m++)
				rcase_run(&c, offs[o], (enum mode)m);
	}
	reduce_force_isa(NULL);
	rcase_free(&c);
}

/* Every op of dtype _i with every count and number of sources. */
START_TEST(test_reference)
{
	for (int op = 0; op < MCCL_NUM_OPS; op++) {
		if (!reduce_supported(_i, op))
			continue;
		for (size_t ns = 0; ns < NELEMS(nsrcs_list); ns++)
			for (size_t n = 0; n < NELEMS(counts); n++)
				rcase_run_all(_i, op, nsrcs_list[ns],
				    counts[n]);
	}
}
END_TEST

/* Count 0 touches nothing, not even a NULL pointer. */
START_TEST(test_empty)
{
	const void *srcs[2] = { NULL, NULL };

	for (int d = 0; d < MCCL_NUM_DTYPES; d++) {
		reduce_into(NULL, NULL, 0, d, MCCL_SUM);
		reduce_many(NULL, srcs, 2, 0, d, MCCL_MAX);
		reduce_many(NULL, srcs, 1, 0, d, MCCL_MIN);
		reduce_many(NULL, NULL, 0, 0, d, MCCL_PROD);
		if (is_float(d))
			reduce_scale_avg(NULL, 0, d, 3);
	}
}
END_TEST

static const struct special {
	int		 dtype, op;
	uint64_t	 a, b, want;
} special_cases[] = {
	/* float16: ties to even (1 + 2^-11, 1 + 3*2^-11), and near ties */
	{ MCCL_FLOAT16, MCCL_SUM, 0x3c00, 0x1000, 0x3c00 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x3c00, 0x1600, 0x3c02 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x3c01, 0x1000, 0x3c02 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x3c00, 0x1001, 0x3c01 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x3c00, 0x0fff, 0x3c00 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x3c00, 0xbc00, 0x0000 },
	/* float16 overflow: 65504 + 16 is the tie above the largest */
	{ MCCL_FLOAT16, MCCL_SUM, 0x7bff, 0x4c00, 0x7c00 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x7bff, 0x4800, 0x7bff },
	{ MCCL_FLOAT16, MCCL_SUM, 0xfbff, 0xcc00, 0xfc00 },
	{ MCCL_FLOAT16, MCCL_PROD, 0x7bff, 0x4000, 0x7c00 },
	{ MCCL_FLOAT16, MCCL_AVG, 0x7bff, 0x7bff, 0x7c00 },
	/* float16 NaN, always the canonical quiet one */
	{ MCCL_FLOAT16, MCCL_SUM, 0x7c00, 0xfc00, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_PROD, 0x0000, 0x7c00, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x7d01, 0x3c00, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_SUM, 0xfe37, 0x7d55, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_MIN, 0x7e00, 0x3c00, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_MIN, 0x3c00, 0xfd00, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_MAX, 0xfc00, 0x7e01, 0x7e00 },
	{ MCCL_FLOAT16, MCCL_MAX, 0x7c01, 0x7c00, 0x7e00 },
	/* float16 min/max: signs, infinities, first operand on ties */
	{ MCCL_FLOAT16, MCCL_MIN, 0x3c00, 0xbc00, 0xbc00 },
	{ MCCL_FLOAT16, MCCL_MAX, 0x3c00, 0xbc00, 0x3c00 },
	{ MCCL_FLOAT16, MCCL_MAX, 0xfc00, 0x0001, 0x0001 },
	{ MCCL_FLOAT16, MCCL_MIN, 0x7c00, 0x7bff, 0x7bff },
	{ MCCL_FLOAT16, MCCL_MIN, 0x0000, 0x8000, 0x0000 },
	{ MCCL_FLOAT16, MCCL_MIN, 0x8000, 0x0000, 0x8000 },
	{ MCCL_FLOAT16, MCCL_MAX, 0x0000, 0x8000, 0x0000 },
	/* float16 subnormals */
	{ MCCL_FLOAT16, MCCL_SUM, 0x0001, 0x0001, 0x0002 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x03ff, 0x0001, 0x0400 },
	{ MCCL_FLOAT16, MCCL_SUM, 0x0400, 0x8001, 0x03ff },
	{ MCCL_FLOAT16, MCCL_PROD, 0x0400, 0x3800, 0x0200 },
	{ MCCL_FLOAT16, MCCL_PROD, 0x0001, 0x3800, 0x0000 },	/* tie */
	{ MCCL_FLOAT16, MCCL_PROD, 0x0003, 0x3800, 0x0002 },	/* tie */
	{ MCCL_FLOAT16, MCCL_PROD, 0x0001, 0x3a00, 0x0001 },
	{ MCCL_FLOAT16, MCCL_PROD, 0x8001, 0x3800, 0x8000 },
	{ MCCL_FLOAT16, MCCL_PROD, 0x0200, 0x4000, 0x0400 },
	/* bfloat16: 1 + 2^-8 and 1 + 3*2^-8 are ties; max + 2^119 too */
	{ MCCL_BFLOAT16, MCCL_SUM, 0x3f80, 0x3b80, 0x3f80 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x3f80, 0x3c40, 0x3f82 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x3f81, 0x3b80, 0x3f82 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x3f80, 0x3b81, 0x3f81 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x7f7f, 0x7b00, 0x7f80 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x7f7f, 0x7a80, 0x7f7f },
	{ MCCL_BFLOAT16, MCCL_PROD, 0x7f7f, 0x4000, 0x7f80 },
	{ MCCL_BFLOAT16, MCCL_PROD, 0xff7f, 0x4000, 0xff80 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x0001, 0x0001, 0x0002 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x007f, 0x0001, 0x0080 },
	{ MCCL_BFLOAT16, MCCL_PROD, 0x0001, 0x3f00, 0x0000 },	/* tie */
	{ MCCL_BFLOAT16, MCCL_PROD, 0x0003, 0x3f00, 0x0002 },	/* tie */
	{ MCCL_BFLOAT16, MCCL_SUM, 0x7f80, 0xff80, 0x7fc0 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0x7f81, 0x3f80, 0x7fc0 },
	{ MCCL_BFLOAT16, MCCL_SUM, 0xffc3, 0x7fa1, 0x7fc0 },
	{ MCCL_BFLOAT16, MCCL_MIN, 0x7fc0, 0x3f80, 0x7fc0 },
	{ MCCL_BFLOAT16, MCCL_MAX, 0x3f80, 0xffc1, 0x7fc0 },
	{ MCCL_BFLOAT16, MCCL_MIN, 0x8000, 0x0000, 0x8000 },
	{ MCCL_BFLOAT16, MCCL_MAX, 0xbf80, 0xff80, 0xbf80 },
	/* float32 and float64: canonical NaNs, ties */
	{ MCCL_FLOAT32, MCCL_SUM, 0x7fc00001, 0xffc00002, 0x7fc00000 },
	{ MCCL_FLOAT32, MCCL_PROD, 0x7f800001, 0x3f800000, 0x7fc00000 },
	{ MCCL_FLOAT32, MCCL_MIN, 0x3f800000, 0x7f800001, 0x7fc00000 },
	{ MCCL_FLOAT32, MCCL_MAX, 0xffc12345, 0x3f800000, 0x7fc00000 },
	{ MCCL_FLOAT32, MCCL_MIN, 0x80000000, 0x00000000, 0x80000000 },
	{ MCCL_FLOAT32, MCCL_SUM, 0x3f800000, 0x33800000, 0x3f800000 },
	{ MCCL_FLOAT32, MCCL_SUM, 0x7f7fffff, 0x73800000, 0x7f800000 },
	{ MCCL_FLOAT32, MCCL_SUM, 0x00000001, 0x00000001, 0x00000002 },
	{ MCCL_FLOAT64, MCCL_SUM, 0x7ff8000000000001, 0xfff8000000000002,
	    0x7ff8000000000000 },
	{ MCCL_FLOAT64, MCCL_MAX, 0x3ff0000000000000, 0x7ff0000000000001,
	    0x7ff8000000000000 },
	{ MCCL_FLOAT64, MCCL_MAX, 0x0000000000000000, 0x8000000000000000,
	    0x0000000000000000 },
	{ MCCL_FLOAT64, MCCL_PROD, 0x0000000000000001, 0x3fe0000000000000,
	    0x0000000000000000 },
	/* integers wrap */
	{ MCCL_INT8, MCCL_SUM, 0x7f, 0x01, 0x80 },
	{ MCCL_INT8, MCCL_PROD, 0x80, 0xff, 0x80 },
	{ MCCL_INT8, MCCL_MIN, 0x80, 0x7f, 0x80 },
	{ MCCL_UINT8, MCCL_MIN, 0x80, 0x7f, 0x7f },
	{ MCCL_UINT8, MCCL_PROD, 0x10, 0x10, 0x00 },
	{ MCCL_INT32, MCCL_SUM, 0x7fffffff, 0x1, 0x80000000 },
	{ MCCL_INT32, MCCL_MAX, 0xffffffff, 0x1, 0x1 },
	{ MCCL_UINT32, MCCL_MAX, 0xffffffff, 0x1, 0xffffffff },
	{ MCCL_INT64, MCCL_PROD, 0x8000000000000000, 0xffffffffffffffff,
	    0x8000000000000000 },
	{ MCCL_INT64, MCCL_MIN, 0x8000000000000000, 0x1, 0x8000000000000000 },
	{ MCCL_UINT64, MCCL_MIN, 0x8000000000000000, 0x1, 0x1 },
	{ MCCL_UINT64, MCCL_SUM, 0xffffffffffffffff, 0x2, 0x1 },
};

/* Each case repeated 40 times, at every lane of the vectors: the tails
 * and the vector loops both meet it. */
START_TEST(test_special)
{
	const struct special *sp = &special_cases[_i];
	size_t esz = dtype_size(sp->dtype), n = 40;
	unsigned char a[40 * 8], b[40 * 8], want[8];

	for (size_t i = 0; i < n; i++) {
		store_bits(sp->dtype, a + i * esz, sp->a);
		store_bits(sp->dtype, b + i * esz, sp->b);
	}
	store_bits(sp->dtype, want, sp->a);
	ref_step(sp->dtype, sp->op, want, b);
	ck_assert_msg(load_bits(sp->dtype, want) == sp->want,
	    "reference: %s %s 0x%llx 0x%llx gives 0x%llx, want 0x%llx",
	    dtype_name(sp->dtype), redop_name(sp->op),
	    (unsigned long long)sp->a, (unsigned long long)sp->b,
	    (unsigned long long)load_bits(sp->dtype, want),
	    (unsigned long long)sp->want);
	for (size_t k = 0; k < NELEMS(isa_names); k++) {
		unsigned char out[40 * 8];

		if (reduce_force_isa(isa_names[k]) != 0)
			continue;
		memcpy(out, a, n * esz);
		reduce_into(out, b, n, sp->dtype, sp->op);
		for (size_t i = 0; i < n; i++)
			ck_assert_msg(load_bits(sp->dtype, out + i * esz) ==
			    sp->want, "%s: %s %s 0x%llx 0x%llx gives 0x%llx "
			    "at %zu, want 0x%llx", isa_names[k],
			    dtype_name(sp->dtype), redop_name(sp->op),
			    (unsigned long long)sp->a,
			    (unsigned long long)sp->b,
			    (unsigned long long)load_bits(sp->dtype,
			    out + i * esz), i, (unsigned long long)sp->want);
	}
	reduce_force_isa(NULL);
}
END_TEST

/* Every float16 and bfloat16 value as first operand (exhausting the
 * conversions), each against a scrambled one. */
START_TEST(test_all16)
{
	static const int d16[] = { MCCL_FLOAT16, MCCL_BFLOAT16 };
	int dtype = d16[_i / MCCL_NUM_OPS], op = _i % MCCL_NUM_OPS;
	size_t n = 65536;
	unsigned char *a, *b, *want, *got;

	if (!reduce_supported(dtype, op))
		return;
	a = malloc(2 * n);
	b = malloc(2 * n);
	want = malloc(2 * n);
	got = malloc(2 * n);

	ck_assert(a && b && want && got);
	for (size_t i = 0; i < n; i++) {
		store_bits(dtype, a + 2 * i, i);
		store_bits(dtype, b + 2 * i, (i * 40503 + 12345) & 0xffff);
	}
	memcpy(want, a, 2 * n);
	for (size_t i = 0; i < n; i++)
		ref_step(dtype, op, want + 2 * i, b + 2 * i);
	for (size_t k = 0; k < NELEMS(isa_names); k++) {
		if (reduce_force_isa(isa_names[k]) != 0)
			continue;
		memcpy(got, a, 2 * n);
		reduce_into(got, b, n, dtype, op);
		check_equal(dtype, op, got, want, n, "all 16-bit values");
	}
	reduce_force_isa(NULL);
	free(a);
	free(b);
	free(want);
	free(got);
}
END_TEST

/*
 * The vector kernel sets against the scalar one, bit for bit, NaN
 * payloads included, for dtype _i: reduce_into, reduce_many of 5 sources
 * (unaligned) and reduce_scale_avg.
 */
static void
run_all_ways(int dtype, int op, unsigned char *const *src, size_t count,
    unsigned char *out)
{
	size_t bytes = count * dtype_size(dtype);
	const void *srcs[MAXSRCS];

	for (size_t s = 0; s < MAXSRCS; s++)
		srcs[s] = src[s];
	memcpy(out, src[0], bytes);
	reduce_into(out, src[1], count, dtype, op);
	reduce_many(out + bytes, srcs, MAXSRCS, count, dtype, op);
	if (op == MCCL_AVG) {
		memcpy(out + 2 * bytes, src[2], bytes);
		reduce_scale_avg(out + 2 * bytes, count, dtype, 7);
	}
}

START_TEST(test_isa_identical)
{
	int dtype = _i;
	size_t count = 20011, bytes = count * dtype_size(dtype);
	unsigned char *mem[MAXSRCS], *src[MAXSRCS], *want, *got;

	rng_seed(0x5eed + (uint64_t)dtype);
	for (size_t s = 0; s < MAXSRCS; s++) {
		mem[s] = malloc(bytes + 8);
		ck_assert_ptr_nonnull(mem[s]);
		src[s] = mem[s] + s + 1;
		fill_random(dtype, src[s], count);
	}
	want = calloc(3, bytes + 1);
	got = calloc(3, bytes + 1);
	ck_assert(want && got);
	for (int op = 0; op < MCCL_NUM_OPS; op++) {
		if (!reduce_supported(dtype, op))
			continue;
		ck_assert_int_eq(reduce_force_isa("scalar"), 0);
		run_all_ways(dtype, op, src, count, want + 1);
		for (size_t k = 0; k < NELEMS(isa_names) - 1; k++) {
			if (reduce_force_isa(isa_names[k]) != 0)
				continue;
			run_all_ways(dtype, op, src, count, got + 1);
			ck_assert_msg(memcmp(got, want, 3 * bytes + 1) == 0,
			    "%s %s: %s differs from scalar", dtype_name(dtype),
			    redop_name(op), isa_names[k]);
		}
	}
	reduce_force_isa(NULL);
	for (size_t s = 0; s < MAXSRCS; s++)
		free(mem[s]);
	free(want);
	free(got);
}
END_TEST

/* Results of 8 MiB or more out of place bypass the cache on their way to
 * dst: the same bits as a reduce_into chain, however dst is aligned. */
START_TEST(test_large)
{
	static const int dts[] = { MCCL_INT8, MCCL_FLOAT16, MCCL_FLOAT32,
	    MCCL_FLOAT64 };
	static const size_t offs[] = { 0, 1, 2, 8, 40 };
	int dtype = dts[_i];
	size_t esz = dtype_size(dtype), count = (9u << 20) / esz + 13;
	size_t bytes = count * esz;
	unsigned char *src[3], *want = malloc(bytes), *mem = malloc(bytes + 64);
	const void *srcs[3];

	ck_assert(want && mem);
	rng_seed(0x1a7 + (uint64_t)dtype);
	for (size_t s = 0; s < 3; s++) {
		src[s] = malloc(bytes);
		ck_assert_ptr_nonnull(src[s]);
		fill_random(dtype, src[s], count);
		srcs[s] = src[s];
	}
	for (size_t ns = 2; ns <= 3; ns++) {
		memcpy(want, src[0], bytes);
		for (size_t s = 1; s < ns; s++)
			reduce_into(want, src[s], count, dtype, MCCL_SUM);
		for (size_t o = 0; o < NELEMS(offs); o++) {
			memset(mem, 0xa5, bytes + 64);
			reduce_many(mem + offs[o], srcs, ns, count, dtype,
			    MCCL_SUM);
			ck_assert_msg(memcmp(mem + offs[o], want, bytes) == 0,
			    "%s, %zu sources, offset %zu", dtype_name(dtype),
			    ns, offs[o]);
		}
	}
	for (size_t s = 0; s < 3; s++)
		free(src[s]);
	free(want);
	free(mem);
}
END_TEST

/*
 * reduce_fan gives every destination the bits of reduce_many (then
 * reduce_scale_avg for an average), for 1 to 3 sources, small and
 * streamed sizes, misaligned destinations, and in place (each destination
 * one of the sources, as a node's ranks are).
 */
START_TEST(test_fan)
{
	static const int ops[] = { MCCL_SUM, MCCL_MAX, MCCL_AVG };
	static const size_t sizes[] = { 1, 4097, (9u << 20) + 3 };
	int dtype = _i % 2 ? MCCL_FLOAT32 : MCCL_FLOAT16, op = ops[_i / 2];
	size_t esz = dtype_size(dtype);

	for (size_t z = 0; z < NELEMS(sizes); z++) {
		size_t count = sizes[z] / esz + 1, bytes = count * esz;
		unsigned char *src[3], *dst[3], *want = malloc(bytes);
		const void *srcs[3];
		void *dsts[3];

		ck_assert_ptr_nonnull(want);
		rng_seed(0xfa9 + (uint64_t)_i * 7 + z);
		for (size_t s = 0; s < 3; s++) {
			src[s] = malloc(bytes + 8);
			dst[s] = malloc(bytes + 8);
			ck_assert(src[s] && dst[s]);
			fill_random(dtype, src[s], count);
			srcs[s] = src[s];
			dsts[s] = dst[s] + 2 * s + 1;	/* odd: misaligned */
		}
		for (size_t ns = 1; ns <= 3; ns++) {
			reduce_many(want, srcs, ns, count, dtype, op);
			if (op == MCCL_AVG)
				reduce_scale_avg(want, count, dtype,
				    (uint32_t)ns + 1);
			reduce_fan(dsts, ns, srcs, ns, count, dtype, op,
			    op == MCCL_AVG ? (uint32_t)ns + 1 : 0);
			for (size_t d = 0; d < ns; d++)
				ck_assert_msg(memcmp(dsts[d], want, bytes) == 0,
				    "%s %s, %zu bytes, %zu sources, dst %zu",
				    dtype_name(dtype), redop_name(op), bytes,
				    ns, d);
		}
		/* In place: the sources are the destinations. */
		reduce_many(want, srcs, 3, count, dtype, op);
		if (op == MCCL_AVG)
			reduce_scale_avg(want, count, dtype, 3);
		reduce_fan((void *const *)(void *)srcs, 3, srcs, 3, count,
		    dtype, op, op == MCCL_AVG ? 3 : 0);
		for (size_t d = 0; d < 3; d++)
			ck_assert_msg(memcmp(src[d], want, bytes) == 0,
			    "in place: %s %s, %zu bytes, dst %zu",
			    dtype_name(dtype), redop_name(op), bytes, d);
		for (size_t s = 0; s < 3; s++) {
			free(src[s]);
			free(dst[s]);
		}
		free(want);
	}
}
END_TEST

/* buf / nranks for the float dtype _i, against the reference. */
START_TEST(test_scale_avg)
{
	static const int fdt[] = { MCCL_FLOAT16, MCCL_BFLOAT16, MCCL_FLOAT32,
	    MCCL_FLOAT64 };
	static const uint32_t nranks[] = { 0, 1, 2, 3, 7, 1000, 65537 };
	int dtype = fdt[_i];
	size_t esz = dtype_size(dtype), count = 4099, bytes = count * esz;
	unsigned char *src = malloc(bytes), *want = malloc(bytes);
	unsigned char *mem = malloc(bytes + 3);

	ck_assert(src && want && mem);
	rng_seed(0xa5a5 + (uint64_t)dtype);
	fill_random(dtype, src, count);
	for (size_t r = 0; r < NELEMS(nranks); r++) {
		for (size_t i = 0; i < bytes; i += esz) {
			double v = ref_load(dtype, src + i) / nranks[r];

			if (nranks[r] <= 1)
				memcpy(want + i, src + i, esz);
			else
				ref_store(dtype, want + i, dtype ==
				    MCCL_FLOAT64 ? v : (double)(float)v);
		}
		for (size_t k = 0; k < NELEMS(isa_names); k++) {
			if (reduce_force_isa(isa_names[k]) != 0)
				continue;
			for (size_t n = 0; n < NELEMS(counts); n++) {
				size_t c = counts[n] < count ? counts[n] :
				    count;

				memcpy(mem + 3, src, c * esz);
				reduce_scale_avg(mem + 3, c, dtype, nranks[r]);
				check_equal(dtype, MCCL_AVG, mem + 3, want, c,
				    "reduce_scale_avg");
			}
		}
	}
	reduce_force_isa(NULL);
	free(src);
	free(want);
	free(mem);
}
END_TEST

/* 1/3 in each format, and a float16 subnormal halved to a tie. */
START_TEST(test_scale_values)
{
	uint16_t h[2] = { 0x3c00, 0x0001 }, bf = 0x3f80;
	float f = 1.0f;
	double d = 1.0;

	reduce_scale_avg(h, 1, MCCL_FLOAT16, 3);
	ck_assert_uint_eq(h[0], 0x3555);
	reduce_scale_avg(h + 1, 1, MCCL_FLOAT16, 2);
	ck_assert_uint_eq(h[1], 0x0000);
	reduce_scale_avg(&bf, 1, MCCL_BFLOAT16, 3);
	ck_assert_uint_eq(bf, 0x3eab);
	reduce_scale_avg(&f, 1, MCCL_FLOAT32, 3);
	ck_assert(f == 1.0f / 3);
	reduce_scale_avg(&d, 1, MCCL_FLOAT64, 3);
	ck_assert(d == 1.0 / 3);
}
END_TEST

/* The daemon checks reduce_supported() first: anything else is a bug. */
START_TEST(test_unsupported_into)
{
	int8_t a = 1, b = 2;

	log_setlevel(0);
	reduce_into(&a, &b, 1, MCCL_INT8, MCCL_AVG);
}
END_TEST

START_TEST(test_unsupported_many)
{
	uint32_t a = 1;
	const void *srcs[1] = { &a };

	log_setlevel(0);
	reduce_many(&a, srcs, 1, 1, MCCL_NUM_DTYPES, MCCL_SUM);
}
END_TEST

START_TEST(test_unsupported_scale)
{
	int32_t a = 6;

	log_setlevel(0);
	reduce_scale_avg(&a, 1, MCCL_INT32, 3);
}
END_TEST

/* ---- a narrowed wire: float32 as float16 or bfloat16 ---- */

static const int wires[] = { MCCL_FLOAT16, MCCL_BFLOAT16 };

static int
wire_mbits(int wire)
{
	return wire == MCCL_FLOAT16 ? 10 : 7;
}

static int
wire_bias(int wire)
{
	return wire == MCCL_FLOAT16 ? 15 : 127;
}

static float
f32_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t
f32_bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* A 16-bit NaN: every exponent bit, some fraction bit. */
static int
is_nan16(uint16_t h, int wire)
{
	uint16_t inf = (uint16_t)((2 * wire_bias(wire) + 1) << wire_mbits(wire));

	return (h & 0x7fff) > inf;
}

/*
 * float32 inputs of every kind: random bit patterns (NaNs with low and
 * high payloads, infinities, subnormals), values near the 16-bit formats'
 * ties and overflow thresholds, zeros of both signs.
 */
static void
wire_inputs(float *a, size_t n)
{
	static const uint32_t edges[] = { 0x00000000, 0x80000000, 0x7f800000,
	    0xff800000, 0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff,
	    0x7f7fffff, 0x477fe000, 0x477fefff, 0x477ff000, 0x47800000,
	    0x33000000, 0x33000001, 0x32ffffff, 0x3f808000, 0x3f818000,
	    0x3f807fff, 0x3f808001, 0x00000001, 0x807fffff, 0x387fc000 };

	for (size_t i = 0; i < n; i++)
		a[i] = f32_of(i < NELEMS(edges) ? edges[i] : (uint32_t)rng());
}

START_TEST(test_wire_narrow)
{
	int wire = wires[_i];
	size_t n = 200003;
	float *a = malloc(n * sizeof(*a));
	uint16_t *got = malloc(n * 2), *want = malloc(n * 2);

	ck_assert(a && got && want);
	rng_seed(77 + (uint64_t)_i);
	wire_inputs(a, n);
	for (size_t k = 0; k < NELEMS(isa_names); k++) {
		if (reduce_force_isa(isa_names[k]) != 0)
			continue;
		wire_narrow(got, a, n, wire);
		for (size_t i = 0; i < n; i++) {
			uint16_t ref = ref_round16(a[i], wire_mbits(wire),
			    wire_bias(wire));

			if (isnan(a[i]))	/* the same kind, the same sign */
				ck_assert_msg(is_nan16(got[i], wire) &&
				    (got[i] & 0x8000) == (signbit(a[i]) ?
				    0x8000 : 0), "%s %s: NaN 0x%08x gave 0x%04x",
				    isa_names[k], dtype_name(wire),
				    (unsigned)f32_bits_of(a[i]), got[i]);
			else
				ck_assert_msg(got[i] == ref, "%s %s: 0x%08x "
				    "gave 0x%04x, want 0x%04x", isa_names[k],
				    dtype_name(wire),
				    (unsigned)f32_bits_of(a[i]), got[i], ref);
		}
		if (k == 0 || strcmp(isa_names[k], "scalar") != 0)
			memcpy(want, got, n * 2);
		else		/* NaN payloads too: every set alike */
			ck_assert_mem_eq(got, want, n * 2);
	}
	reduce_force_isa(NULL);
	free(a);
	free(got);
	free(want);
}
END_TEST

/* Every 16-bit value widened, and added to a random float32 and narrowed. */
START_TEST(test_wire_widen)
{
	int wire = wires[_i];
	size_t n = 65536;
	uint16_t *h = malloc(n * 2), *out = malloc(n * 2);
	float *own = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));

	ck_assert(h && out && own && got);
	rng_seed(91 + (uint64_t)_i);
	for (size_t i = 0; i < n; i++) {
		h[i] = (uint16_t)i;
		own[i] = (float)((double)(rng() % 2000001) - 1e6) / 64.0f;
	}
	for (size_t k = 0; k < NELEMS(isa_names); k++) {
		if (reduce_force_isa(isa_names[k]) != 0)
			continue;
		wire_widen(got, h, n, wire);
		for (size_t i = 0; i < n; i++) {
			double ref = ref_widen16(h[i], wire_mbits(wire),
			    wire_bias(wire));

			ck_assert_msg(isnan(ref) ? isnan(got[i]) :
			    got[i] == (float)ref && !signbit(got[i]) ==
			    !signbit(ref), "%s %s widen 0x%04x", isa_names[k],
			    dtype_name(wire), h[i]);
		}
		for (int round = 0; round < 2; round++) {
			memcpy(got, own, n * sizeof(float));	/* in place */
			wire_add_narrow(got, got, h, out, n, wire, round);
			for (size_t i = 0; i < n; i++) {
				float sum = own[i] + (float)ref_widen16(h[i],
				    wire_mbits(wire), wire_bias(wire));
				uint16_t r16 = ref_round16(sum,
				    wire_mbits(wire), wire_bias(wire));
				float want = round ? (float)ref_widen16(r16,
				    wire_mbits(wire), wire_bias(wire)) : sum;

				ck_assert_msg(isnan(sum) ? isnan(got[i]) &&
				    is_nan16(out[i], wire) : got[i] == want &&
				    out[i] == r16, "%s %s add_narrow (round "
				    "%d) 0x%04x", isa_names[k],
				    dtype_name(wire), round, h[i]);
			}
		}
	}
	reduce_force_isa(NULL);
	free(h);
	free(out);
	free(own);
	free(got);
}
END_TEST

static Suite *
reduce_suite(void)
{
	Suite *s = suite_create("reduce");
	TCase *tc = tcase_create("kernels");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_supported);
	tcase_add_test(tc, test_isa_select);
	tcase_add_loop_test(tc, test_reference, 0, MCCL_NUM_DTYPES);
	tcase_add_test(tc, test_empty);
	tcase_add_loop_test(tc, test_special, 0, (int)NELEMS(special_cases));
	tcase_add_loop_test(tc, test_all16, 0, 2 * MCCL_NUM_OPS);
	tcase_add_loop_test(tc, test_isa_identical, 0, MCCL_NUM_DTYPES);
	tcase_add_loop_test(tc, test_large, 0, 4);
	tcase_add_loop_test(tc, test_scale_avg, 0, 4);
	tcase_add_loop_test(tc, test_fan, 0, 6);
	tcase_add_loop_test(tc, test_wire_narrow, 0, 2);
	tcase_add_loop_test(tc, test_wire_widen, 0, 2);
	tcase_add_test(tc, test_scale_values);
	tcase_add_exit_test(tc, test_unsupported_into, 1);
	tcase_add_exit_test(tc, test_unsupported_many, 1);
	tcase_add_exit_test(tc, test_unsupported_scale, 1);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(reduce_suite());
	int failed;

	printf("kernel set: %s\n", reduce_isa());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
