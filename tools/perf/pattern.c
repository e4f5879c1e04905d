/*
 * pattern.c: elements of every type read and written as doubles, and
 * the check pattern: inputs and expected results exact in every type.
 */
#include <math.h>
#include <string.h>

#include "perf.h"

/* ---- element access ---- */

static double
half_to_double(uint16_t h)
{
	int	 e = (h >> 10) & 0x1f, f = h & 0x3ff;
	double	 v;

	if (e == 0)
		v = ldexp(f, -24);
	else if (e == 31)
		v = f != 0 ? NAN : INFINITY;
	else
		v = ldexp(f + 1024, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* Only for values exact in float16, which is all the pattern makes. */
static uint16_t
half_from_double(double v)
{
	uint16_t	 sign = 0;
	double		 m;
	int		 e;

	if (signbit(v)) {
		sign = 0x8000;
		v = -v;
	}
	if (v == 0)
		return sign;
	m = frexp(v, &e);	/* v = m * 2^e, 0.5 <= m < 1 */
	return sign | (uint16_t)((e + 14) << 10) |
	    (uint16_t)((m * 2 - 1) * 1024);
}

static double
bf16_to_double(uint16_t h)
{
	uint32_t	 bits = (uint32_t)h << 16;
	float		 f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* Round to nearest even; the pattern's values are exact anyway. */
static uint16_t
bf16_from_double(double v)
{
	float		 f = (float)v;
	uint32_t	 bits;

	memcpy(&bits, &f, sizeof(bits));
	return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

static double
elem_get(mccl_dtype_t t, const void *buf, size_t i)
{
	switch (t) {
	case MCCL_INT8:
		return ((const int8_t *)buf)[i];
	case MCCL_UINT8:
		return ((const uint8_t *)buf)[i];
	case MCCL_INT32:
		return ((const int32_t *)buf)[i];
	case MCCL_UINT32:
		return ((const uint32_t *)buf)[i];
	case MCCL_INT64:
		return (double)((const int64_t *)buf)[i];
	case MCCL_UINT64:
		return (double)((const uint64_t *)buf)[i];
	case MCCL_FLOAT16:
		return half_to_double(((const uint16_t *)buf)[i]);
	case MCCL_BFLOAT16:
		return bf16_to_double(((const uint16_t *)buf)[i]);
	case MCCL_FLOAT32:
		return ((const float *)buf)[i];
	case MCCL_FLOAT64:
		return ((const double *)buf)[i];
	}
	return NAN;
}

static void
elem_set(mccl_dtype_t t, void *buf, size_t i, double v)
{
	switch (t) {
	case MCCL_INT8:
		((int8_t *)buf)[i] = (int8_t)v;
		break;
	case MCCL_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case MCCL_INT32:
		((int32_t *)buf)[i] = (int32_t)v;
		break;
	case MCCL_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	case MCCL_INT64:
		((int64_t *)buf)[i] = (int64_t)v;
		break;
	case MCCL_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case MCCL_FLOAT16:
		((uint16_t *)buf)[i] = half_from_double(v);
		break;
	case MCCL_BFLOAT16:
		((uint16_t *)buf)[i] = bf16_from_double(v);
		break;
	case MCCL_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	case MCCL_FLOAT64:
		((double *)buf)[i] = v;
		break;
	}
}

/* ---- the check pattern ---- */

double
fold_sum(double a, double b)
{
	return a + b;
}

double
fold_prod(double a, double b)
{
	return a * b;
}

/* The bitwise ops see the pattern's small non-negative integers. */
double
fold_band(double a, double b)
{
	return (double)((uint64_t)a & (uint64_t)b);
}

double
fold_bor(double a, double b)
{
	return (double)((uint64_t)a | (uint64_t)b);
}

double
fold_bxor(double a, double b)
{
	return (double)((uint64_t)a ^ (uint64_t)b);
}

/*
 * PROD: at most `twos` ranks (2^twos is exact) give a 2 at an index, the
 * others 1.  Otherwise 0..period-1, with period - 1 <= exact_max / nranks
 * so that every partial sum is exact too.
 */
double
pattern_input(const struct pattern *p, int rank, size_t j)
{
	size_t	 k = j + (size_t)rank;

	if (p->prod)
		return rank < p->twos && k % 3 == 0 ? 2 : 1;
	return (double)(k % p->period);
}

double
expect_allreduce(const struct bench *b, size_t j)
{
	const struct op_info	*op = b->o->op;
	double			 acc;
	int			 r;

	acc = pattern_input(&b->pat, 0, j);
	for (r = 1; r < b->nranks; r++)
		acc = op->fold(acc, pattern_input(&b->pat, r, j));
	return op->mean ? acc / b->nranks : acc;
}

double
expect_broadcast(const struct bench *b, size_t j)
{
	return pattern_input(&b->pat, b->root, j);
}

void
pattern_init(struct bench *b)
{
	const struct opts	*o = b->o;
	struct pattern		*p = &b->pat;
	size_t			 j;

	p->prod = o->coll->has_op && o->op->op == MCCL_PROD;
	p->twos = o->dtype->prod_bits;
	p->period = p->prod ? 3 :
	    1 + (size_t)fmin(PATTERN_MAX, floor(o->dtype->exact_max / b->nranks));
	/* A broadcast's input is the root's alone. */
	p->has_input = o->coll->expect != expect_broadcast ||
	    o->coll->want != NULL || b->root == b->rank;
	/* AVG may divide before summing (NCCL premultiplies): allow its
	 * rounding errors, at most one per rank. */
	p->tol = o->coll->has_op && o->op->mean ? b->nranks * o->dtype->eps : 0;
	/* A 16-bit wire: within (nodes + 1) u of the sum (mccl.h), and the
	 * ranks are at least the nodes. */
	if (o->wire->u > 0 && o->coll->has_op &&
	    o->dtype->dtype == MCCL_FLOAT32 && (o->op->op == MCCL_SUM ||
	    o->op->op == MCCL_AVG))
		p->tol = fmax(p->tol, (b->nranks + 1) * o->wire->u);
	for (j = 0; j < p->period; j++) {
		p->input[j] = pattern_input(p, b->rank, j);
		if (o->coll->want == NULL)
			p->expect[j] = o->coll->expect(b, j);
	}
}

void
pattern_fill(const struct bench *b, void *buf, size_t count)
{
	const struct pattern	*p = &b->pat;
	size_t			 i;

	if (!p->has_input) {
		memset(buf, SENTINEL, count * b->esize);
		return;
	}
	for (i = 0; i < count; i++)
		elem_set(b->o->dtype->dtype, buf, i, p->input[i % p->period]);
}

uint64_t
pattern_wrong(const struct bench *b, const void *buf, size_t count,
    size_t total)
{
	const struct pattern	*p = &b->pat;
	double			 want, got;
	uint64_t		 wrong = 0;
	size_t			 i;

	for (i = 0; i < count; i++) {
		want = b->o->coll->want != NULL ? b->o->coll->want(b, total, i) :
		    p->expect[i % p->period];
		got = elem_get(b->o->dtype->dtype, buf, i);
		/* false for NaN, so the sentinel counts as wrong */
		if (!(fabs(got - want) <= p->tol * fmax(fabs(want), 1)))
			wrong++;
	}
	return wrong;
}
