/*
 * test_perf_pattern.c: mccl-perf's check pattern (tools/perf/pattern.c)
 * alone.  Its inputs and every rank count's expected results must be exact
 * in the type they are checked in, a buffer filled with a rank's inputs
 * must read back as them through each type's encoding (the 16-bit floats
 * included), and a single wrong element must count as one.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/perf/perf.h"

/* Rows as tools/perf/options.c has them. */
static const struct dtype_info types[] = {
	{ { "int8", NULL }, MCCL_INT8, 0, 127, 6, 0 },
	{ { "uint32", NULL }, MCCL_UINT32, 0, 0x1p32 - 1, 31, 0 },
	{ { "int64", NULL }, MCCL_INT64, 0, 0x1p62, 62, 0 },
	{ { "float16", "half" }, MCCL_FLOAT16, 1, 2048, 15, 0x1p-10 },
	{ { "bfloat16", NULL }, MCCL_BFLOAT16, 1, 256, 127, 0x1p-7 },
	{ { "float32", "float" }, MCCL_FLOAT32, 1, 0x1p24, 127, 0x1p-23 },
	{ { "float64", "double" }, MCCL_FLOAT64, 1, 0x1p53, 1023, 0x1p-52 },
};
static const struct op_info sum = { { "sum", NULL }, MCCL_SUM, fold_sum, 0 };
static const struct op_info prod = { { "prod", NULL }, MCCL_PROD,
    fold_prod, 0 };
static const struct wire_info fp32 = { { "fp32", NULL }, 0 };
static const struct coll_info allreduce_row = { { "allreduce", NULL },
    "mccl_allreduce", NULL, expect_allreduce, NULL, 1, 1, 1, -1, 1, 0,
    NULL, NULL };
static const struct coll_info broadcast_row = { { "broadcast", NULL },
    "mccl_broadcast", NULL, expect_broadcast, NULL, 0, 0, 1, 0, 1, 0,
    NULL, NULL };

static size_t
esize(mccl_dtype_t t)
{
	switch (t) {
	case MCCL_INT8:
		return 1;
	case MCCL_FLOAT16:
	case MCCL_BFLOAT16:
		return 2;
	case MCCL_UINT32:
	case MCCL_FLOAT32:
		return 4;
	default:
		return 8;
	}
}

static void
bench_for(struct bench *b, struct opts *o, const struct dtype_info *d,
    const struct op_info *op, const struct coll_info *c, int rank,
    int nranks)
{
	memset(o, 0, sizeof(*o));
	o->dtype = d;
	o->op = op;
	o->coll = c;
	o->wire = &fp32;
	memset(b, 0, sizeof(*b));
	b->o = o;
	b->rank = rank;
	b->nranks = nranks;
	b->esize = esize(d->dtype);
	pattern_init(b);
}

/*
 * A sum the type holds exactly: an integer up to exact_max; a product, a
 * power of two up to 2^prod_bits.
 */
static int
exact(const struct dtype_info *d, const struct op_info *op, double e)
{
	int x;

	if (op->op == MCCL_PROD)
		return frexp(e, &x) == 0.5 && x - 1 <= d->prod_bits;
	return e == floor(e) && e >= 0 && e <= d->exact_max;
}

/* Every expected sum and product, over any number of ranks, is exact. */
START_TEST(results_are_exact)
{
	static const int counts[] = { 1, 2, 3, 8, 64, 1000 };
	const struct op_info *ops[] = { &sum, &prod };
	struct bench b;
	struct opts o;

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t k = 0; k < 2; k++)
			for (size_t n = 0; n < 6; n++) {
				bench_for(&b, &o, &types[t], ops[k],
				    &allreduce_row, 0, counts[n]);
				ck_assert_uint_ge(b.pat.period, 1);
				for (size_t j = 0; j < b.pat.period; j++) {
					double e = b.pat.expect[j];

					ck_assert_msg(exact(&types[t], ops[k],
					    e), "%s %s over %d ranks: %g at "
					    "%zu", types[t].n.name,
					    ops[k]->n.name, counts[n], e, j);
				}
			}
}
END_TEST

/* A rank's inputs written in each type read back as they are. */
START_TEST(inputs_read_back)
{
	enum { COUNT = 1000 };
	struct bench b;
	struct opts o;
	uint8_t buf[COUNT * 8];

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		/* the root of a broadcast expects its own inputs */
		bench_for(&b, &o, &types[t], &sum, &broadcast_row, 0, 4);
		pattern_fill(&b, buf, COUNT);
		ck_assert_msg(pattern_wrong(&b, buf, COUNT, COUNT) == 0, "%s",
		    types[t].n.name);
		memset(buf + 7 * b.esize, SENTINEL, b.esize);
		ck_assert_msg(pattern_wrong(&b, buf, COUNT, COUNT) == 1,
		    "%s: one element overwritten", types[t].n.name);
	}
}
END_TEST

/* A rank that is not a broadcast's root has no input: all sentinel. */
START_TEST(no_input_is_all_wrong)
{
	struct bench b;
	struct opts o;
	uint8_t buf[64 * 4];

	bench_for(&b, &o, &types[5], &sum, &broadcast_row, 1, 4);
	ck_assert_int_eq(b.pat.has_input, 0);
	pattern_fill(&b, buf, 64);
	ck_assert_uint_eq(pattern_wrong(&b, buf, 64, 64), 64);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("perf_pattern");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, results_are_exact);
	tcase_add_test(tc, inputs_read_back);
	tcase_add_test(tc, no_input_is_all_wrong);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
