/*
 * mccl-perf.c: the MCCL benchmark, modelled on nccl-tests' all_reduce_perf.
 *
 * Every rank is one process: started by the user with MCCL_JOB, MCCL_RANK
 * and MCCL_NRANKS set, or forked here with -N.  Each rank times its own
 * iterations of one collective over a range of sizes and checks one extra
 * iteration against a pattern whose result is exact in every type; the ranks
 * agree on the slowest time and the total of wrong elements, and global
 * rank 0 prints the table (and writes it as JSON or CSV with -j).  Only the
 * public API of mccl.h is used.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mccl.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

#define EXIT_USAGE	2
#define SIZE_LIMIT	((size_t)1 << 40)	/* so size * FACTOR_MAX never overflows */
#define FACTOR_MAX	1024
#define ITERS_MAX	1000000000L
#define NPROCS_MAX	4096
#define PARTS_MAX	4096		/* -P: operations in flight per size */
#define PATTERN_MAX	100	/* largest input of the check pattern */
#define PEER_LEN	64	/* "Pid N on host" of one rank */
#define SENTINEL	0xff	/* NaN in floats, -1 or the maximum in ints */
#define PROGRESS_AFTER_US 1e6	/* runs longer than this show progress */
#define GRACE_MS	10000	/* other children's grace after one failed */
#define POLL_NS		10000000L

struct bench;

/* The first member of every table entry, for lookup(). */
struct named {
	const char	*name;
	const char	*alias;		/* nccl-tests' name, printed if set */
};

struct dtype_info {
	struct named	 n;
	mccl_dtype_t	 dtype;
	int		 is_float;
	double		 exact_max;	/* every integer 0..exact_max is exact */
	int		 prod_bits;	/* 2^prod_bits is exact */
	double		 eps;		/* relative precision of floats */
};

/* What float32 sums cross the network as (MCCL_WIRE_DTYPE, -W). */
struct wire_info {
	struct named	 n;
	double		 u;		/* its unit roundoff; 0: exact */
};

/* Where the buffers live: the daemon's shared memory, or the process's own. */
struct memory_info {
	struct named	 n;
	int		 shared;	/* mccl_alloc; else the library stages it */
};

struct op_info {
	struct named	 n;
	mccl_op_t	 op;
	double		(*fold)(double, double);
	int		 mean;		/* divide the fold by nranks */
};

/* Where one rank's data goes in an operation of `count` elements in all. */
struct layout {
	void		*send;
	size_t		 scount;
	void		*recv;
	size_t		 rcount;	/* elements to check; 0: nothing here */
};

struct coll_info {
	struct named	 n;
	const char	*call;		/* the mccl.h function, for errors */
	mccl_result_t	(*start)(const struct bench *, size_t, int,
			    mccl_request_t **);
	double		(*expect)(const struct bench *, size_t);
	double		(*busfactor)(int);
	int		 has_op;	/* uses -o */
	int		 has_oop;	/* has an out-of-place variant */
	int		 sized;		/* else one row of size 0 */
	int		 root;		/* -1 when there is none */
	int		 has_ip;	/* has an in-place variant */
	int		 per_rank;	/* count is split among the ranks */
	void		(*layout)(const struct bench *, size_t, int,
			    struct layout *);
	/* Expected value at any receive index; NULL: expect is periodic. */
	double		(*want)(const struct bench *, size_t, size_t);
};

struct summary {
	uint64_t	 wrong;
	double		 busbw;		/* sum over the results */
	int		 nbusbw;
};

struct result {
	int		 ran;
	double		 time_us;
	double		 algbw;		/* GB/s */
	double		 busbw;
	uint64_t	 wrong;
};

struct row {
	size_t		 index;
	size_t		 bytes;
	size_t		 count;
	struct result	 res[2];	/* out-of-place, in-place */
};

struct output {
	void	(*begin)(FILE *, const struct bench *);
	void	(*row)(FILE *, const struct bench *, const struct row *);
	void	(*end)(FILE *, const struct bench *, const struct summary *);
};

struct format_info {
	struct named		 n;
	const struct output	*out;
};

struct opts {
	size_t			 minbytes;
	size_t			 maxbytes;
	size_t			 stepbytes;	/* 0: multiply by factor */
	size_t			 partbytes;	/* -P; 0: one operation */
	unsigned long		 factor;
	int			 iters;
	int			 warmup;
	int			 check;
	int			 timeout_ms;	/* -1: the operation's own */
	int			 nprocs;	/* -N; 0: one rank from the env */
	int			 total;
	int			 first;
	const char		*job;
	const char		*path;
	const struct dtype_info	*dtype;
	const struct op_info	*op;
	const struct coll_info	*coll;
	const struct format_info *format;
	const struct wire_info	*wire;
	const struct memory_info *memory;
	char			 jobbuf[64];
};

/*
 * The check pattern: small integers, periodic in the index, so that every
 * partial reduction is exact in every type and the expected result of all
 * ranks is computed once per period.
 */
struct pattern {
	size_t		 period;
	int		 prod;		/* inputs 1 and 2, for PROD */
	int		 twos;		/* PROD: ranks below this may give 2 */
	int		 has_input;	/* else fill with SENTINEL */
	double		 tol;		/* relative tolerance */
	double		 input[PATTERN_MAX + 1];
	double		 expect[PATTERN_MAX + 1];
};

struct bench {
	const struct opts	*o;
	mccl_comm_t		*comm;
	int			 rank;
	int			 nranks;
	const char		*job;
	size_t			 esize;
	void			*sendbuf;
	void			*recvbuf;
	int			 checked;
	struct pattern		 pat;
	char			*peers;		/* nranks * PEER_LEN */
	size_t			*vec;		/* the v-collectives' arrays,
						   4 * nranks, filled per call */
	FILE			*file;
	double			 start_us;
	int			 progress;
	int			 progress_shown;
};

struct sizes {
	const struct bench	*b;
	size_t			 next;
	size_t			 last;
	int			 done;
};

static double	fold_sum(double, double);
static double	fold_prod(double, double);
static double	fold_band(double, double);
static double	fold_bor(double, double);
static double	fold_bxor(double, double);
static mccl_result_t start_allreduce(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_broadcast(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_barrier(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_reduce(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_allgather(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_reduce_scatter(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_alltoall(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_sendrecv(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_gather(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_scatter(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_allgatherv(const struct bench *, size_t, int,
		    mccl_request_t **);
static mccl_result_t start_alltoallv(const struct bench *, size_t, int,
		    mccl_request_t **);
static void	layout_gather(const struct bench *, size_t, int,
		    struct layout *);
static void	layout_scatter(const struct bench *, size_t, int,
		    struct layout *);
static void	layout_v(const struct bench *, size_t, int, struct layout *);
static double	want_scatter(const struct bench *, size_t, size_t);
static void	layout_same(const struct bench *, size_t, int, struct layout *);
static void	layout_reduce(const struct bench *, size_t, int,
		    struct layout *);
static void	layout_allgather(const struct bench *, size_t, int,
		    struct layout *);
static void	layout_reduce_scatter(const struct bench *, size_t, int,
		    struct layout *);
static double	want_allgather(const struct bench *, size_t, size_t);
static double	want_reduce_scatter(const struct bench *, size_t, size_t);
static double	want_alltoall(const struct bench *, size_t, size_t);
static double	want_sendrecv(const struct bench *, size_t, size_t);
static double	expect_allreduce(const struct bench *, size_t);
static double	expect_broadcast(const struct bench *, size_t);
static double	busfactor_allreduce(int);
static double	busfactor_gather(int);
static double	busfactor_one(int);
static double	busfactor_zero(int);
static void	text_begin(FILE *, const struct bench *);
static void	text_row(FILE *, const struct bench *, const struct row *);
static void	text_end(FILE *, const struct bench *, const struct summary *);
static void	json_begin(FILE *, const struct bench *);
static void	json_row(FILE *, const struct bench *, const struct row *);
static void	json_end(FILE *, const struct bench *, const struct summary *);
static void	csv_begin(FILE *, const struct bench *);
static void	csv_row(FILE *, const struct bench *, const struct row *);

static const struct dtype_info dtypes[] = {
	{ { "int8", NULL }, MCCL_INT8, 0, 127, 6, 0 },
	{ { "uint8", NULL }, MCCL_UINT8, 0, 255, 7, 0 },
	{ { "int32", NULL }, MCCL_INT32, 0, 0x1p31 - 1, 30, 0 },
	{ { "uint32", NULL }, MCCL_UINT32, 0, 0x1p32 - 1, 31, 0 },
	{ { "int64", NULL }, MCCL_INT64, 0, 0x1p62, 62, 0 },
	{ { "uint64", NULL }, MCCL_UINT64, 0, 0x1p63, 63, 0 },
	{ { "float16", "half" }, MCCL_FLOAT16, 1, 2048, 15, 0x1p-10 },
	{ { "bfloat16", NULL }, MCCL_BFLOAT16, 1, 256, 127, 0x1p-7 },
	{ { "float32", "float" }, MCCL_FLOAT32, 1, 0x1p24, 127, 0x1p-23 },
	{ { "float64", "double" }, MCCL_FLOAT64, 1, 0x1p53, 1023, 0x1p-52 },
};

static const struct wire_info wires[] = {
	{ { "fp32", "float32" }, 0 },
	{ { "bf16", "bfloat16" }, 0x1p-8 },
	{ { "fp16", "float16" }, 0x1p-11 },
};

static const struct memory_info memories[] = {
	{ { "shared", NULL }, 1 },
	{ { "host", NULL }, 0 },
};

static const struct op_info ops[] = {
	{ { "sum", NULL }, MCCL_SUM, fold_sum, 0 },
	{ { "prod", NULL }, MCCL_PROD, fold_prod, 0 },
	{ { "min", NULL }, MCCL_MIN, fmin, 0 },
	{ { "max", NULL }, MCCL_MAX, fmax, 0 },
	{ { "avg", NULL }, MCCL_AVG, fold_sum, 1 },
	{ { "band", NULL }, MCCL_BAND, fold_band, 0 },
	{ { "bor", NULL }, MCCL_BOR, fold_bor, 0 },
	{ { "bxor", NULL }, MCCL_BXOR, fold_bxor, 0 },
};

/* nccl-tests' conventions: size is the larger buffer, busbw factors alike. */
static const struct coll_info colls[] = {
	{ { "allreduce", NULL }, "mccl_allreduce", start_allreduce,
	    expect_allreduce, busfactor_allreduce, 1, 1, 1, -1, 1, 0,
	    layout_same, NULL },
	{ { "reduce", NULL }, "mccl_reduce", start_reduce,
	    expect_allreduce, busfactor_one, 1, 1, 1, 0, 1, 0,
	    layout_reduce, NULL },
	{ { "broadcast", NULL }, "mccl_broadcast", start_broadcast,
	    expect_broadcast, busfactor_one, 0, 0, 1, 0, 1, 0,
	    layout_same, NULL },
	{ { "allgather", NULL }, "mccl_allgather", start_allgather,
	    expect_broadcast, busfactor_gather, 0, 1, 1, -1, 1, 1,
	    layout_allgather, want_allgather },
	{ { "reduce_scatter", NULL }, "mccl_reduce_scatter",
	    start_reduce_scatter, expect_allreduce, busfactor_gather, 1, 1, 1,
	    -1, 1, 1, layout_reduce_scatter, want_reduce_scatter },
	{ { "alltoall", NULL }, "mccl_alltoall", start_alltoall,
	    expect_broadcast, busfactor_gather, 0, 1, 1, -1, 1, 1,
	    layout_same, want_alltoall },
	{ { "gather", NULL }, "mccl_gather", start_gather,
	    expect_broadcast, busfactor_gather, 0, 1, 1, 0, 1, 1,
	    layout_gather, want_allgather },
	{ { "scatter", NULL }, "mccl_scatter", start_scatter,
	    expect_broadcast, busfactor_gather, 0, 1, 1, 0, 1, 1,
	    layout_scatter, want_scatter },
	/* the v-collectives with even counts: the cost of the general path */
	{ { "allgatherv", NULL }, "mccl_allgatherv", start_allgatherv,
	    expect_broadcast, busfactor_gather, 0, 1, 1, -1, 0, 1,
	    layout_v, want_allgather },
	{ { "alltoallv", NULL }, "mccl_alltoallv", start_alltoallv,
	    expect_broadcast, busfactor_gather, 0, 1, 1, -1, 0, 1,
	    layout_v, want_alltoall },
	{ { "sendrecv", NULL }, "mccl_send/mccl_recv", start_sendrecv,
	    expect_broadcast, busfactor_one, 0, 1, 1, -1, 0, 0,
	    layout_same, want_sendrecv },
	{ { "barrier", NULL }, "mccl_barrier", start_barrier,
	    NULL, busfactor_zero, 0, 0, 0, -1, 1, 0, NULL, NULL },
};

static const struct output out_text = { text_begin, text_row, text_end };
static const struct output out_json = { json_begin, json_row, json_end };
static const struct output out_csv = { csv_begin, csv_row, NULL };

static const struct format_info formats[] = {
	{ { "json", NULL }, &out_json },
	{ { "csv", NULL }, &out_csv },
};

static const char *const variant_key[2] = { "oop", "ip" };

/* This process's rank, for error messages. */
static char self[16] = "?";

static const char usage_text[] =
"usage: mccl-perf [-h] [-b minbytes] [-e maxbytes] [-f factor | -i stepbytes]\n"
"                 [-n iters] [-w warmup] [-d dtype] [-o op] [-c check]\n"
"                 [-C coll] [-t timeout_ms] [-W bf16|fp16|fp32]\n"
"                 [-M shared|host] [-P partbytes]\n"
"                 [-j file [-F json|csv]]\n"
"                 [-N nprocs [-R total] [-r first] [-J job]]\n";

/* ---- errors ---- */

static void __attribute__((format(printf, 1, 2), noreturn))
usage_error(const char *fmt, ...)
{
	va_list	ap;

	fputs("mccl-perf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	exit(EXIT_USAGE);
}

static void __attribute__((format(printf, 1, 2), noreturn))
fail(const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "mccl-perf: rank %s: ", self);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void __attribute__((noreturn))
die_mccl(const mccl_comm_t *comm, const char *call, mccl_result_t r)
{
	fail("%s: %s: %s", call, mccl_strerror(r), mccl_last_error(comm));
}

static void
set_self(int rank)
{
	snprintf(self, sizeof(self), "%d", rank);
}

/* ---- option parsing ---- */

static void
names_list(char *buf, size_t len, const void *table, size_t n, size_t stride)
{
	const struct named	*e;
	size_t			 i, off = 0;
	int			 w;

	buf[0] = '\0';
	for (i = 0; i < n && off < len; i++) {
		e = (const struct named *)((const char *)table + i * stride);
		w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
		    e->name);
		if (w > 0)
			off += (size_t)w;
	}
}

static const void *
lookup(int opt, const char *what, const char *arg, const void *table,
    size_t n, size_t stride)
{
	const struct named	*e;
	char			 list[256];
	size_t			 i;

	for (i = 0; i < n; i++) {
		e = (const struct named *)((const char *)table + i * stride);
		if (strcmp(arg, e->name) == 0 ||
		    (e->alias != NULL && strcmp(arg, e->alias) == 0))
			return e;
	}
	names_list(list, sizeof(list), table, n, stride);
	usage_error("-%c: unknown %s '%s' (expected %s)", opt, what, arg,
	    list);
}

#define LOOKUP(opt, what, arg, table) \
	lookup(opt, what, arg, table, nitems(table), sizeof((table)[0]))

static long
parse_long(int opt, const char *s, long lo, long hi)
{
	char	*end;
	long	 v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (isspace((unsigned char)*s) || end == s || *end != '\0' ||
	    errno != 0 || v < lo || v > hi)
		usage_error("-%c: bad value '%s' (expected an integer from "
		    "%ld to %ld)", opt, s, lo, hi);
	return v;
}

/* Bytes with an optional K, M or G (binary) suffix, 1 to SIZE_LIMIT. */
static size_t
parse_size(int opt, const char *s)
{
	char			*end;
	unsigned long long	 v;
	unsigned int		 shift = 0;

	errno = 0;
	v = isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
	if (v != 0 && errno == 0) {
		switch (toupper((unsigned char)*end)) {
		case 'K':
			shift = 10;
			break;
		case 'M':
			shift = 20;
			break;
		case 'G':
			shift = 30;
			break;
		}
		end += shift != 0;
	}
	if (v == 0 || errno != 0 || *end != '\0' || v > (SIZE_LIMIT >> shift))
		usage_error("-%c: bad size '%s' (expected 1 to %zuG bytes, "
		    "with an optional K, M or G suffix)", opt, s,
		    SIZE_LIMIT >> 30);
	return (size_t)v << shift;
}

static void
opts_default(struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->minbytes = 8;
	o->maxbytes = 32 << 20;
	o->factor = 2;
	o->iters = 20;
	o->warmup = 5;
	o->check = 1;
	o->timeout_ms = -1;
	o->total = -1;
	o->first = -1;
	o->dtype = LOOKUP('d', "type", "float32", dtypes);
	o->op = LOOKUP('o', "operation", "sum", ops);
	o->memory = LOOKUP('M', "memory", "shared", memories);
	o->coll = LOOKUP('C', "collective", "allreduce", colls);
	o->format = LOOKUP('F', "format", "json", formats);
	o->wire = &wires[0];
	snprintf(o->jobbuf, sizeof(o->jobbuf), "mccl-perf-%ld",
	    (long)getpid());
	o->job = o->jobbuf;
}

static void
opts_check(const struct opts *o, int spawn_opts, int format_set)
{
	size_t esize = mccl_dtype_size(o->dtype->dtype);

	if (o->minbytes > o->maxbytes)
		usage_error("-b: MINBYTES %zu is larger than MAXBYTES %zu",
		    o->minbytes, o->maxbytes);
	if (o->coll->sized && o->maxbytes < esize)
		usage_error("-e: MAXBYTES %zu is less than one %s element",
		    o->maxbytes, o->dtype->n.name);
	if (o->coll->has_op && o->op->op == MCCL_AVG && !o->dtype->is_float)
		usage_error("-o: avg needs a floating-point type, not %s",
		    o->dtype->n.name);
	if (o->coll->has_op && o->op->op >= MCCL_BAND && o->dtype->is_float)
		usage_error("-o: %s needs an integer type, not %s",
		    o->op->n.name, o->dtype->n.name);
	if (format_set && o->path == NULL)
		usage_error("-F: needs -j FILE");
	if (o->partbytes != 0 && o->coll->start != start_allreduce)
		usage_error("-P: parts are for allreduce only, not %s",
		    o->coll->n.name);
	if (o->partbytes != 0 && o->partbytes < esize)
		usage_error("-P: PARTBYTES %zu is less than one %s element",
		    o->partbytes, o->dtype->n.name);
	/* parts are whole elements, as run_parts cuts them */
	if (o->partbytes != 0 && o->maxbytes / esize / (o->partbytes /
	    esize) > PARTS_MAX)
		usage_error("-P: MAXBYTES %zu would make more than %d parts "
		    "of %zu bytes", o->maxbytes, PARTS_MAX, o->partbytes);
	if (spawn_opts && o->nprocs == 0)
		usage_error("-R, -r and -J need -N");
	if (o->nprocs > 0 && (long)o->first + o->nprocs > o->total)
		usage_error("-R: %d ranks cannot hold ranks %d to %d "
		    "(-r %d, -N %d)", o->total, o->first,
		    o->first + o->nprocs - 1, o->first, o->nprocs);
}

static void
parse_opts(struct opts *o, int argc, char **argv)
{
	int	 ch, step_set = 0, spawn_opts = 0, format_set = 0;
	const char *env;

	opts_default(o);
	if ((env = getenv("MCCL_WIRE_DTYPE")) != NULL && *env != '\0')
		o->wire = LOOKUP('W', "MCCL_WIRE_DTYPE", env, wires);
	while ((ch = getopt(argc, argv,
	    "b:C:c:d:e:F:f:hi:J:j:M:N:n:o:P:R:r:t:W:w:"))
	    != -1) {
		switch (ch) {
		case 'b':
			o->minbytes = parse_size(ch, optarg);
			break;
		case 'C':
			o->coll = LOOKUP(ch, "collective", optarg, colls);
			break;
		case 'c':
			o->check = (int)parse_long(ch, optarg, 0, 1);
			break;
		case 'd':
			o->dtype = LOOKUP(ch, "type", optarg, dtypes);
			break;
		case 'e':
			o->maxbytes = parse_size(ch, optarg);
			break;
		case 'F':
			o->format = LOOKUP(ch, "format", optarg, formats);
			format_set = 1;
			break;
		case 'f':
			if (step_set++)
				usage_error("-f: only one of -f and -i");
			o->factor = (unsigned long)parse_long(ch, optarg, 2,
			    FACTOR_MAX);
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case 'i':
			if (step_set++)
				usage_error("-i: only one of -f and -i");
			o->stepbytes = parse_size(ch, optarg);
			break;
		case 'J':
			if (*optarg == '\0')
				usage_error("-J: empty job name");
			o->job = optarg;
			spawn_opts = 1;
			break;
		case 'j':
			o->path = optarg;
			break;
		case 'M':
			o->memory = LOOKUP(ch, "memory", optarg, memories);
			break;
		case 'N':
			o->nprocs = (int)parse_long(ch, optarg, 1, NPROCS_MAX);
			break;
		case 'n':
			o->iters = (int)parse_long(ch, optarg, 1, ITERS_MAX);
			break;
		case 'o':
			o->op = LOOKUP(ch, "operation", optarg, ops);
			break;
		case 'P':
			o->partbytes = parse_size(ch, optarg);
			break;
		case 'R':
			o->total = (int)parse_long(ch, optarg, 1, INT32_MAX);
			spawn_opts = 1;
			break;
		case 'r':
			o->first = (int)parse_long(ch, optarg, 0, INT32_MAX - 1);
			spawn_opts = 1;
			break;
		case 't':
			o->timeout_ms = (int)parse_long(ch, optarg, 1,
			    INT32_MAX);
			break;
		case 'W':		/* the library reads it, every rank */
			o->wire = LOOKUP(ch, "wire", optarg, wires);
			if (setenv("MCCL_WIRE_DTYPE", o->wire->n.name, 1) == -1)
				usage_error("-W: setenv: %s", strerror(errno));
			break;
		case 'w':
			o->warmup = (int)parse_long(ch, optarg, 0, ITERS_MAX);
			break;
		default:
			fputs(usage_text, stderr);
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (o->total < 0)
		o->total = o->nprocs;
	if (o->first < 0)
		o->first = 0;
	opts_check(o, spawn_opts, format_set);
}

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

static double
fold_sum(double a, double b)
{
	return a + b;
}

static double
fold_prod(double a, double b)
{
	return a * b;
}

/* The bitwise ops see the pattern's small non-negative integers. */
static double
fold_band(double a, double b)
{
	return (double)((uint64_t)a & (uint64_t)b);
}

static double
fold_bor(double a, double b)
{
	return (double)((uint64_t)a | (uint64_t)b);
}

static double
fold_bxor(double a, double b)
{
	return (double)((uint64_t)a ^ (uint64_t)b);
}

/*
 * PROD: at most `twos` ranks (2^twos is exact) give a 2 at an index, the
 * others 1.  Otherwise 0..period-1, with period - 1 <= exact_max / nranks
 * so that every partial sum is exact too.
 */
static double
pattern_input(const struct pattern *p, int rank, size_t j)
{
	size_t	 k = j + (size_t)rank;

	if (p->prod)
		return rank < p->twos && k % 3 == 0 ? 2 : 1;
	return (double)(k % p->period);
}

static double
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

static double
expect_broadcast(const struct bench *b, size_t j)
{
	return pattern_input(&b->pat, b->o->coll->root, j);
}

static void
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
	    o->coll->want != NULL || o->coll->root == b->rank;
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

static void
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

static uint64_t
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

/* ---- collectives ---- */

static mccl_result_t
start_allreduce(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	const void	*src = inplace ? b->recvbuf : b->sendbuf;

	return mccl_allreduce(src, b->recvbuf, count, b->o->dtype->dtype,
	    b->o->op->op, b->comm, req);
}

static mccl_result_t
start_broadcast(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	(void)inplace;
	return mccl_broadcast(b->recvbuf, count, b->o->dtype->dtype,
	    b->o->coll->root, b->comm, req);
}

static mccl_result_t
start_barrier(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	(void)count;
	(void)inplace;
	return mccl_barrier(b->comm, req);
}

/* Send and receive in the same places, count elements each. */
static void
layout_same(const struct bench *b, size_t count, int inplace, struct layout *l)
{
	l->recv = b->recvbuf;
	l->send = inplace ? b->recvbuf : b->sendbuf;
	l->scount = l->rcount = count;
}

static void
layout_reduce(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	layout_same(b, count, inplace, l);
	if (b->rank != b->o->coll->root)
		l->rcount = 0;
}

/* In place, the rank's slot of the gathered buffer is its send buffer. */
static void
layout_allgather(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	size_t per = count / (size_t)b->nranks;

	l->recv = b->recvbuf;
	l->rcount = count;
	l->scount = per;
	l->send = inplace ? (uint8_t *)b->recvbuf + (size_t)b->rank * per *
	    b->esize : b->sendbuf;
}

/* In place, the rank's block of its send buffer receives the result. */
static void
layout_reduce_scatter(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	size_t per = count / (size_t)b->nranks;

	l->send = inplace ? b->recvbuf : b->sendbuf;
	l->scount = count;
	l->rcount = per;
	l->recv = inplace ? (uint8_t *)b->recvbuf + (size_t)b->rank * per *
	    b->esize : b->recvbuf;
}

/* At the root, in place, the root's slot of its receive buffer sends. */
static void
layout_gather(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	int root = b->o->coll->root;

	layout_allgather(b, count, inplace && b->rank == root, l);
	if (b->rank != root)
		l->rcount = 0;
}

/* At the root, in place, the root's slot of its send buffer receives. */
static void
layout_scatter(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	size_t per = count / (size_t)b->nranks;
	int root = b->o->coll->root;

	l->send = b->sendbuf;
	l->scount = count;
	l->rcount = per;
	l->recv = inplace && b->rank == root ? (uint8_t *)b->sendbuf +
	    (size_t)root * per * b->esize : b->recvbuf;
}

/* The v-collectives: no in-place form; the whole send buffer goes out. */
static void
layout_v(const struct bench *b, size_t count, int inplace, struct layout *l)
{
	(void)inplace;
	l->send = b->sendbuf;
	l->recv = b->recvbuf;
	l->rcount = count;
	l->scount = b->o->coll->start == start_allgatherv ? count /
	    (size_t)b->nranks : count;
}

static mccl_result_t
start_gather(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_gather(b, count, inplace, &l);
	return mccl_gather(l.send, b->rank == b->o->coll->root ? b->recvbuf :
	    NULL, count / (size_t)b->nranks, b->o->dtype->dtype,
	    b->o->coll->root, b->comm, req);
}

static mccl_result_t
start_scatter(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_scatter(b, count, inplace, &l);
	return mccl_scatter(b->rank == b->o->coll->root ? l.send : NULL,
	    l.recv, l.rcount, b->o->dtype->dtype, b->o->coll->root, b->comm,
	    req);
}

/* Even counts, blocks side by side: arrays k of b->vec, k < narrays. */
static void
vec_even(const struct bench *b, size_t per, int narrays)
{
	size_t n = (size_t)b->nranks;

	for (int k = 0; k < narrays; k += 2)
		for (size_t r = 0; r < n; r++) {
			b->vec[(size_t)k * n + r] = per;
			b->vec[(size_t)(k + 1) * n + r] = r * per;
		}
}

static mccl_result_t
start_allgatherv(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	size_t per = count / (size_t)b->nranks;

	(void)inplace;
	vec_even(b, per, 2);
	return mccl_allgatherv(b->sendbuf, per, b->recvbuf, b->vec,
	    b->vec + b->nranks, b->o->dtype->dtype, b->comm, req);
}

static mccl_result_t
start_alltoallv(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	size_t n = (size_t)b->nranks;

	(void)inplace;
	vec_even(b, count / n, 4);
	return mccl_alltoallv(b->sendbuf, b->vec, b->vec + n, b->recvbuf,
	    b->vec + 2 * n, b->vec + 3 * n, b->o->dtype->dtype, b->comm, req);
}

static mccl_result_t
start_reduce(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_reduce(b, count, inplace, &l);
	return mccl_reduce(l.send, b->rank == b->o->coll->root ? l.recv : NULL,
	    count, b->o->dtype->dtype, b->o->op->op, b->o->coll->root, b->comm,
	    req);
}

static mccl_result_t
start_allgather(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_allgather(b, count, inplace, &l);
	return mccl_allgather(l.send, l.recv, l.scount, b->o->dtype->dtype,
	    b->comm, req);
}

static mccl_result_t
start_reduce_scatter(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_reduce_scatter(b, count, inplace, &l);
	return mccl_reduce_scatter(l.send, l.recv, l.rcount,
	    b->o->dtype->dtype, b->o->op->op, b->comm, req);
}

static mccl_result_t
start_alltoall(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_same(b, count, inplace, &l);
	return mccl_alltoall(l.send, l.recv, count / (size_t)b->nranks,
	    b->o->dtype->dtype, b->comm, req);
}

/* A ring: send to the right, receive from the left; done when both are. */
static mccl_result_t
start_sendrecv(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	mccl_request_t *send;
	mccl_result_t r;
	int n = b->nranks;

	(void)inplace;
	if ((r = mccl_send(b->sendbuf, count, b->o->dtype->dtype,
	    (b->rank + 1) % n, 0, b->comm, &send)) != MCCL_SUCCESS)
		return r;
	if ((r = mccl_recv(b->recvbuf, count, b->o->dtype->dtype,
	    (b->rank + n - 1) % n, 0, b->comm, req)) != MCCL_SUCCESS)
		return r;
	return mccl_wait(send, b->o->timeout_ms);
}

static double
want_allgather(const struct bench *b, size_t count, size_t j)
{
	size_t per = count / (size_t)b->nranks;

	return pattern_input(&b->pat, (int)(j / per), j % per);
}

/* Rank r's block is block r of the root's input. */
static double
want_scatter(const struct bench *b, size_t count, size_t j)
{
	return pattern_input(&b->pat, b->o->coll->root, (size_t)b->rank *
	    (count / (size_t)b->nranks) + j);
}

static double
want_reduce_scatter(const struct bench *b, size_t count, size_t j)
{
	return expect_allreduce(b, (size_t)b->rank * (count /
	    (size_t)b->nranks) + j);
}

/* Block s of the receive buffer is block `rank` of rank s's send buffer. */
static double
want_alltoall(const struct bench *b, size_t count, size_t j)
{
	size_t per = count / (size_t)b->nranks;

	return pattern_input(&b->pat, (int)(j / per), (size_t)b->rank * per +
	    j % per);
}

static double
want_sendrecv(const struct bench *b, size_t count, size_t j)
{
	(void)count;
	return pattern_input(&b->pat, (b->rank + b->nranks - 1) % b->nranks, j);
}

static double
busfactor_allreduce(int nranks)
{
	return 2.0 * (nranks - 1) / nranks;
}

static double
busfactor_gather(int nranks)
{
	return (double)(nranks - 1) / nranks;
}

static double
busfactor_one(int nranks)
{
	(void)nranks;
	return 1;
}

static double
busfactor_zero(int nranks)
{
	(void)nranks;
	return 0;
}

/*
 * Every operation is started with a request and waited for with -t.  The
 * caller passes the request by address: it is set by the start call, which
 * must have run before it is read.
 */
static void
complete(const struct bench *b, const char *call, mccl_result_t r,
    mccl_request_t *const *reqp)
{
	mccl_request_t	*req = *reqp;
	char	 what[64];

	if (r != MCCL_SUCCESS)
		die_mccl(b->comm, call, r);
	r = mccl_wait(req, b->o->timeout_ms);
	if (r != MCCL_SUCCESS) {
		snprintf(what, sizeof(what), "mccl_wait(%s)", call);
		die_mccl(b->comm, what, r);
	}
}

/*
 * -P: the buffer goes as consecutive allreduces of PARTBYTES each, the last
 * taking the remainder, all started before the first is waited for: the
 * way the torch backend sends a large tensor, each part in memory of its
 * own, so the daemon may overlap one part's end with the next one's start.
 */
static void
run_parts(const struct bench *b, size_t count, int inplace)
{
	mccl_request_t	*reqs[PARTS_MAX];
	const uint8_t	*src = inplace ? b->recvbuf : b->sendbuf;
	uint8_t		*dst = b->recvbuf;
	size_t		 step = b->o->partbytes / b->esize;
	size_t		 nparts = count / step, i, off, n;
	mccl_result_t	 r;

	for (i = 0; i < nparts; i++) {
		off = i * step;
		n = i + 1 < nparts ? step : count - off;
		r = mccl_allreduce(src + off * b->esize, dst + off * b->esize,
		    n, b->o->dtype->dtype, b->o->op->op, b->comm, &reqs[i]);
		if (r != MCCL_SUCCESS)
			die_mccl(b->comm, "mccl_allreduce", r);
	}
	for (i = 0; i < nparts; i++)
		complete(b, "mccl_allreduce", MCCL_SUCCESS, &reqs[i]);
}

static void
run_once(const struct bench *b, size_t count, int inplace)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	if (b->o->partbytes != 0 && count >= 2 * (b->o->partbytes / b->esize)) {
		run_parts(b, count, inplace);
		return;
	}
	r = b->o->coll->start(b, count, inplace, &req);
	complete(b, b->o->coll->call, r, &req);
}

static void
barrier(const struct bench *b)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	r = mccl_barrier(b->comm, &req);
	complete(b, "mccl_barrier", r, &req);
}

static void
allreduce(const struct bench *b, void *buf, size_t count, mccl_dtype_t t,
    mccl_op_t op)
{
	mccl_request_t	*req = NULL;
	mccl_result_t	 r;

	r = mccl_allreduce(buf, buf, count, t, op, b->comm, &req);
	complete(b, "mccl_allreduce", r, &req);
}

/* ---- measuring ---- */

static double
now_us(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
variant_runs(const struct bench *b, int inplace)
{
	return inplace ? b->o->coll->has_ip : b->o->coll->has_oop;
}

/* This rank's average time of one operation, in microseconds. */
static double
time_variant(const struct bench *b, size_t count, int inplace)
{
	double	 t0;
	int	 i;

	for (i = 0; i < b->o->warmup; i++)
		run_once(b, count, inplace);
	barrier(b);
	t0 = now_us();
	for (i = 0; i < b->o->iters; i++)
		run_once(b, count, inplace);
	return (now_us() - t0) / b->o->iters;
}

static uint64_t
check_variant(const struct bench *b, size_t count, int inplace)
{
	struct layout l;

	b->o->coll->layout(b, count, inplace, &l);
	if (!inplace)
		memset(b->recvbuf, SENTINEL, count * b->esize);
	pattern_fill(b, l.send, l.scount);
	run_once(b, count, inplace);
	return pattern_wrong(b, l.recv, l.rcount, count);
}

static void
result_set(const struct bench *b, struct result *r, size_t bytes,
    double time_us, uint64_t wrong)
{
	r->time_us = time_us;
	r->algbw = time_us > 0 ? bytes / time_us / 1e3 : 0;
	r->busbw = r->algbw * b->o->coll->busfactor(b->nranks);
	r->wrong = wrong;
}

static void
measure(const struct bench *b, size_t count, struct row *row)
{
	double		 t[2] = { 0, 0 };
	uint64_t	 wrong[2] = { 0, 0 };
	int		 v;

	for (v = 0; v < 2; v++) {
		if (!variant_runs(b, v))
			continue;
		t[v] = time_variant(b, count, v);
		if (b->checked)
			wrong[v] = check_variant(b, count, v);
	}
	/* All ranks report the slowest rank's time and the total wrong. */
	allreduce(b, t, 2, MCCL_FLOAT64, MCCL_MAX);
	if (b->checked)
		allreduce(b, wrong, 2, MCCL_UINT64, MCCL_SUM);
	row->count = count;
	row->bytes = count * b->esize;
	for (v = 0; v < 2; v++) {
		row->res[v].ran = variant_runs(b, v);
		result_set(b, &row->res[v], row->bytes, t[v], wrong[v]);
	}
}

/* Counts of the rows: sizes rounded down to whole elements, no repeats. */
static int
sizes_next(struct sizes *it, size_t *count)
{
	const struct opts	*o = it->b->o;
	size_t			 c;

	if (!o->coll->sized) {
		*count = 0;
		return it->done++ == 0;
	}
	while (it->next <= o->maxbytes) {
		c = it->next / it->b->esize;
		if (o->coll->per_rank)	/* whole blocks for every rank */
			c -= c % (size_t)it->b->nranks;
		if (o->stepbytes != 0)
			it->next += o->stepbytes;
		else
			it->next *= o->factor;
		if (c > 0 && c != it->last) {
			it->last = c;
			*count = c;
			return 1;
		}
	}
	return 0;
}

static void
sizes_init(struct sizes *it, const struct bench *b)
{
	memset(it, 0, sizeof(*it));
	it->b = b;
	it->next = b->o->minbytes;
}

/* ---- progress ---- */

static void
human_size(char *buf, size_t len, size_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double			 v = (double)bytes;
	size_t			 u = 0;

	while (v >= 1024 && u + 1 < nitems(units)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.4g %s", v, units[u]);
}

static void
progress_show(struct bench *b, size_t k, size_t n, size_t bytes)
{
	char	 h[32];

	if (!b->progress || now_us() - b->start_us < PROGRESS_AFTER_US)
		return;
	human_size(h, sizeof(h), bytes);
	fprintf(stderr, "\r\033[K[size %zu/%zu] %s ...", k, n, h);
	b->progress_shown = 1;
}

static void
progress_clear(struct bench *b)
{
	if (b->progress_shown)
		fputs("\r\033[K", stderr);
	b->progress_shown = 0;
}

/* ---- text output, as nccl-tests prints it ---- */

static const char *
dtype_label(const struct dtype_info *d)
{
	return d->n.alias != NULL ? d->n.alias : d->n.name;
}

static void
text_begin(FILE *f, const struct bench *b)
{
	const struct opts	*o = b->o;
	int			 r;

	fprintf(f, "# mccl-perf: %s, job %s, nRanks %d\n", o->coll->n.name,
	    b->job != NULL ? b->job : "?", b->nranks);
	fprintf(f, "# minBytes %zu maxBytes %zu step: ", o->minbytes,
	    o->maxbytes);
	if (o->stepbytes != 0)
		fprintf(f, "%zu(bytes)", o->stepbytes);
	else
		fprintf(f, "%lu(factor)", o->factor);
	fprintf(f, " warmup iters: %d iters: %d validation: %d wire: %s "
	    "memory: %s parts: %zu timeout: ", o->warmup, o->iters, o->check,
	    o->wire->n.name, o->memory->n.name, o->partbytes);
	if (o->timeout_ms < 0)
		fputs("default\n", f);
	else
		fprintf(f, "%d ms\n", o->timeout_ms);
	fputs("#\n# Using ranks\n", f);
	for (r = 0; r < b->nranks; r++)
		fprintf(f, "#  Rank %3d %s\n", r, b->peers + r * PEER_LEN);
	fputs("#\n"
"#                                                              out-of-place                       in-place\n"
"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n",
	    f);
	fflush(f);
}

static void
text_result(FILE *f, const struct bench *b, const struct result *r)
{
	char	 wrong[24];
	int	 prec;

	if (!r->ran) {
		fprintf(f, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
		return;
	}
	if (b->checked)
		snprintf(wrong, sizeof(wrong), "%" PRIu64, r->wrong);
	else
		snprintf(wrong, sizeof(wrong), "N/A");
	prec = r->time_us >= 10000 ? 0 : r->time_us >= 100 ? 1 : 2;
	fprintf(f, "  %7.*f  %6.2f  %6.2f  %5s", prec, r->time_us, r->algbw,
	    r->busbw, wrong);
}

static void
text_row(FILE *f, const struct bench *b, const struct row *row)
{
	const struct coll_info	*c = b->o->coll;
	int			 v;

	fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count,
	    dtype_label(b->o->dtype), c->has_op ? b->o->op->n.name : "-",
	    c->root);
	for (v = 0; v < 2; v++)
		text_result(f, b, &row->res[v]);
	fputc('\n', f);
	fflush(f);
}

static void
text_end(FILE *f, const struct bench *b, const struct summary *s)
{
	if (b->checked)
		fprintf(f, "# Out of bounds values : %" PRIu64 " %s\n",
		    s->wrong, s->wrong != 0 ? "FAILED" : "OK");
	else
		fputs("# Out of bounds values : N/A (not checked)\n", f);
	fprintf(f, "# Avg bus bandwidth    : %g\n#\n",
	    s->nbusbw != 0 ? s->busbw / s->nbusbw : 0);
	fflush(f);
}

/* ---- JSON and CSV output (-j) ---- */

static void
json_begin(FILE *f, const struct bench *b)
{
	const struct opts	*o = b->o;

	fprintf(f, "{\"collective\":\"%s\",\"dtype\":\"%s\",\"wire\":\"%s\","
	    "\"memory\":\"%s\",\"part_bytes\":%zu,\"op\":", o->coll->n.name,
	    o->dtype->n.name, o->wire->n.name, o->memory->n.name,
	    o->partbytes);
	if (o->coll->has_op)
		fprintf(f, "\"%s\"", o->op->n.name);
	else
		fputs("null", f);
	fprintf(f, ",\"nranks\":%d,\"results\":[", b->nranks);
}

static void
json_result(FILE *f, const struct bench *b, int v, const struct result *r)
{
	fprintf(f, ",\"%s\":", variant_key[v]);
	if (!r->ran) {
		fputs("null", f);
		return;
	}
	fprintf(f, "{\"time_us\":%.6g,\"algbw\":%.6g,\"busbw\":%.6g,"
	    "\"wrong\":", r->time_us, r->algbw, r->busbw);
	if (b->checked)
		fprintf(f, "%" PRIu64 "}", r->wrong);
	else
		fputs("null}", f);
}

static void
json_row(FILE *f, const struct bench *b, const struct row *row)
{
	int	 v;

	fprintf(f, "%s\n{\"size\":%zu,\"count\":%zu", row->index ? "," : "",
	    row->bytes, row->count);
	for (v = 0; v < 2; v++)
		json_result(f, b, v, &row->res[v]);
	fputc('}', f);
}

static void
json_end(FILE *f, const struct bench *b, const struct summary *s)
{
	(void)b;
	fprintf(f, "\n],\"avg_busbw\":%.6g}\n",
	    s->nbusbw != 0 ? s->busbw / s->nbusbw : 0);
}

static void
csv_begin(FILE *f, const struct bench *b)
{
	int	 v;

	(void)b;
	fputs("collective,dtype,op,nranks,size,count", f);
	for (v = 0; v < 2; v++)
		fprintf(f, ",%s_time_us,%s_algbw,%s_busbw,%s_wrong",
		    variant_key[v], variant_key[v], variant_key[v],
		    variant_key[v]);
	fputc('\n', f);
}

static void
csv_row(FILE *f, const struct bench *b, const struct row *row)
{
	const struct opts	*o = b->o;
	const struct result	*r;
	int			 v;

	fprintf(f, "%s,%s,%s,%d,%zu,%zu", o->coll->n.name, o->dtype->n.name,
	    o->coll->has_op ? o->op->n.name : "", b->nranks, row->bytes,
	    row->count);
	for (v = 0; v < 2; v++) {
		r = &row->res[v];
		if (!r->ran) {
			fputs(",,,,", f);
			continue;
		}
		fprintf(f, ",%.6g,%.6g,%.6g,", r->time_us, r->algbw, r->busbw);
		if (b->checked)
			fprintf(f, "%" PRIu64, r->wrong);
	}
	fputc('\n', f);
}

/* Rank 0 prints the text table and writes the -j file; others nothing. */
static void
output_begin(const struct bench *b)
{
	if (b->rank != 0)
		return;
	out_text.begin(stdout, b);
	if (b->file != NULL)
		b->o->format->out->begin(b->file, b);
}

static void
output_row(const struct bench *b, const struct row *row)
{
	if (b->rank != 0)
		return;
	out_text.row(stdout, b, row);
	if (b->file != NULL)
		b->o->format->out->row(b->file, b, row);
}

static void
output_end(const struct bench *b, const struct summary *s)
{
	if (b->rank != 0)
		return;
	out_text.end(stdout, b, s);
	if (b->file != NULL && b->o->format->out->end != NULL)
		b->o->format->out->end(b->file, b, s);
}

/* ---- one rank ---- */

static void
comm_init(struct bench *b, int rank)
{
	const struct opts	*o = b->o;
	mccl_result_t		 r;
	const char		*env;

	if (rank >= 0) {
		set_self(rank);
		b->job = o->job;
		r = mccl_comm_init(&b->comm, o->job, o->total, rank);
	} else {
		if ((env = getenv("MCCL_RANK")) != NULL)
			snprintf(self, sizeof(self), "%.15s", env);
		b->job = getenv("MCCL_JOB");
		r = mccl_comm_init_env(&b->comm);
	}
	if (r != MCCL_SUCCESS)
		die_mccl(NULL, rank >= 0 ? "mccl_comm_init" :
		    "mccl_comm_init_env", r);
	b->rank = mccl_comm_rank(b->comm);
	b->nranks = mccl_comm_size(b->comm);
	set_self(b->rank);
}

/*
 * A buffer where -M says: mccl_alloc memory, which the daemon uses in
 * place, or the process's own pages (touched once, as an application's
 * are), which the library copies through its staging memory.
 */
static void *
buf_alloc(const struct bench *b, size_t bytes)
{
	void	*p;
	int	 rc;

	if (b->o->memory->shared) {
		if ((p = mccl_alloc(b->comm, bytes)) == NULL)
			fail("mccl_alloc(%zu bytes): %s", bytes,
			    mccl_last_error(b->comm));
		return p;
	}
	if ((rc = posix_memalign(&p, 4096, bytes ? bytes : 1)) != 0)
		fail("posix_memalign(%zu bytes): %s", bytes, strerror(rc));
	memset(p, 0, bytes);
	return p;
}

static void
buf_free(const struct bench *b, void *p)
{
	if (b->o->memory->shared)
		mccl_free(b->comm, p);
	else
		free(p);
}

/* Each rank fills its own slot and a SUM of bytes gathers them all. */
static void
gather_peers(struct bench *b)
{
	char	 host[PEER_LEN / 2] = "?";
	size_t	 len = (size_t)b->nranks * PEER_LEN;
	int	 r;

	if ((b->peers = calloc(b->nranks, PEER_LEN)) == NULL)
		fail("out of memory");
	(void)gethostname(host, sizeof(host) - 1);
	snprintf(b->peers + (size_t)b->rank * PEER_LEN, PEER_LEN,
	    "Pid %6ld on %s", (long)getpid(), host);
	allreduce(b, b->peers, len, MCCL_UINT8, MCCL_SUM);
	for (r = 0; r < b->nranks; r++)
		b->peers[(size_t)r * PEER_LEN + PEER_LEN - 1] = '\0';
}

static void
bench_open(struct bench *b, const struct opts *o, int rank)
{
	size_t	 bytes;

	memset(b, 0, sizeof(*b));
	b->o = o;
	b->start_us = now_us();
	comm_init(b, rank);
	if ((b->esize = mccl_dtype_size(o->dtype->dtype)) == 0)
		fail("mccl_dtype_size: unknown type %s", o->dtype->n.name);
	b->checked = o->check && o->coll->sized;
	if ((b->vec = calloc(4 * (size_t)b->nranks, sizeof(size_t))) == NULL)
		fail("out of memory");
	if (o->coll->sized) {
		bytes = o->maxbytes / b->esize * b->esize;
		b->recvbuf = buf_alloc(b, bytes);
		if (o->coll->has_oop)
			b->sendbuf = buf_alloc(b, bytes);
		pattern_init(b);
	}
	gather_peers(b);
	if (b->rank == 0 && o->path != NULL &&
	    (b->file = fopen(o->path, "w")) == NULL)
		fail("%s: %s", o->path, strerror(errno));
	b->progress = b->rank == 0 && isatty(STDOUT_FILENO) &&
	    isatty(STDERR_FILENO);
}

static void
bench_run(struct bench *b, struct summary *s)
{
	struct sizes	 it;
	struct row	 row;
	size_t		 count, nrows = 0;
	int		 v;

	for (sizes_init(&it, b); sizes_next(&it, &count); )
		nrows++;
	memset(s, 0, sizeof(*s));
	memset(&row, 0, sizeof(row));
	output_begin(b);
	for (sizes_init(&it, b); sizes_next(&it, &count); row.index++) {
		progress_show(b, row.index + 1, nrows, count * b->esize);
		measure(b, count, &row);
		progress_clear(b);
		output_row(b, &row);
		for (v = 0; v < 2; v++) {
			if (!row.res[v].ran)
				continue;
			s->wrong += row.res[v].wrong;
			s->busbw += row.res[v].busbw;
			s->nbusbw++;
		}
	}
	output_end(b, s);
}

static void
bench_close(struct bench *b)
{
	mccl_result_t	 r;
	int		 bad;

	if (b->file != NULL) {
		bad = ferror(b->file);
		if (fclose(b->file) != 0 || bad)
			fail("%s: write error: %s", b->o->path,
			    strerror(errno));
	}
	if (b->sendbuf != NULL)
		buf_free(b, b->sendbuf);
	if (b->recvbuf != NULL)
		buf_free(b, b->recvbuf);
	free(b->peers);
	free(b->vec);
	if ((r = mccl_comm_destroy(b->comm)) != MCCL_SUCCESS)
		die_mccl(b->comm, "mccl_comm_destroy", r);
}

/* rank < 0: the rank comes from the environment. */
static int
rank_main(const struct opts *o, int rank)
{
	struct bench	 b;
	struct summary	 s;

	bench_open(&b, o, rank);
	bench_run(&b, &s);
	bench_close(&b);
	return s.wrong != 0;
}

/* ---- -N: fork the local ranks ---- */

static void
kill_children(const pid_t *pids, int n, const struct opts *o)
{
	int	 k;

	for (k = 0; k < n; k++) {
		if (pids[k] <= 0)
			continue;
		fprintf(stderr, "mccl-perf: killing rank %d (pid %ld)\n",
		    o->first + k, (long)pids[k]);
		kill(pids[k], SIGKILL);
	}
}

/* Whether the child failed; it said why itself unless a signal hit it. */
static int
child_failed(int rank, int status)
{
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "mccl-perf: rank %d: killed by signal %d "
		    "(%s)\n", rank, WTERMSIG(status),
		    strsignal(WTERMSIG(status)));
		return 1;
	}
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

static int
child_index(const pid_t *pids, int n, pid_t pid)
{
	int	 k;

	for (k = 0; k < n; k++)
		if (pids[k] == pid)
			return k;
	return -1;
}

/*
 * Reap all n children.  Once one failed, the others should fail soon with
 * the job; those still running after the grace period are killed.
 */
static int
reap(const struct opts *o, pid_t *pids, int n)
{
	const struct timespec	 poll = { 0, POLL_NS };
	double			 deadline = 0;
	int			 alive = n, failed = 0, status, k;
	pid_t			 pid;

	while (alive > 0) {
		pid = waitpid(-1, &status, WNOHANG);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0) {
			fprintf(stderr, "mccl-perf: waitpid: %s\n",
			    strerror(errno));
			return 1;
		}
		if (pid == 0) {
			if (deadline > 0 && now_us() > deadline) {
				kill_children(pids, n, o);
				deadline = 0;
			}
			nanosleep(&poll, NULL);
			continue;
		}
		if ((k = child_index(pids, n, pid)) < 0)
			continue;
		pids[k] = 0;
		alive--;
		if (child_failed(o->first + k, status) && !failed++)
			deadline = now_us() + 1e3 * (GRACE_MS +
			    (o->timeout_ms > 0 ? o->timeout_ms : 0));
	}
	return failed != 0;
}

static int
spawn(const struct opts *o)
{
	pid_t	*pids;
	int	 k, failed;

	if ((pids = calloc(o->nprocs, sizeof(*pids))) == NULL) {
		fprintf(stderr, "mccl-perf: out of memory\n");
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	for (k = 0; k < o->nprocs; k++) {
		if ((pids[k] = fork()) == 0)
			exit(rank_main(o, o->first + k));
		if (pids[k] < 0) {
			fprintf(stderr, "mccl-perf: fork: %s\n",
			    strerror(errno));
			pids[k] = 0;
			kill_children(pids, k, o);
			break;
		}
	}
	failed = reap(o, pids, k) || k < o->nprocs;
	free(pids);
	return failed;
}

int
main(int argc, char **argv)
{
	struct opts	 o;

	parse_opts(&o, argc, argv);
	if (o.nprocs == 0)
		return rank_main(&o, -1);
	return spawn(&o);
}
