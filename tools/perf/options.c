/*
 * options.c: mccl-perf's command line, and the tables its names are
 * looked up in: one row per type, wire, memory, operation, collective and
 * output format.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

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

static const struct format_info formats[] = {
	{ { "json", NULL }, &out_json },
	{ { "csv", NULL }, &out_csv },
};

static const char usage_text[] =
"usage: mccl-perf [-h] [-b minbytes] [-e maxbytes] [-f factor | -i stepbytes]\n"
"                 [-n iters] [-w warmup] [-N cycles] [-d dtype] [-o op]\n"
"                 [-r root] [-c check] [-a average] [-z blocking]\n"
"                 [-C cputime] [-T timeout_s] [-t 1] [-g 1] [-G 0]\n"
"                 [--coll coll] [--timeout-ms ms] [-W bf16|fp16|fp32]\n"
"                 [--memory shared|host] [-P partbytes]\n"
"                 [-j file [-F json|csv]]\n"
"                 [--nprocs n [--total n] [--first rank] [--job name]]\n"
"the letters are nccl-tests' and mean what they mean there; mccl-perf(1)\n";

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

/* ---- option parsing ---- */

/* MCCL's own options have long names only, past nccl-tests' letters. */
enum { OPT_COLL = 256, OPT_TIMEOUT_MS, OPT_MEMORY, OPT_NPROCS, OPT_TOTAL,
	OPT_FIRST, OPT_JOB };

static const struct option longopts[] = {
	/* nccl-tests' */
	{ "nthreads", required_argument, NULL, 't' },
	{ "ngpus", required_argument, NULL, 'g' },
	{ "minbytes", required_argument, NULL, 'b' },
	{ "maxbytes", required_argument, NULL, 'e' },
	{ "stepbytes", required_argument, NULL, 'i' },
	{ "stepfactor", required_argument, NULL, 'f' },
	{ "iters", required_argument, NULL, 'n' },
	{ "warmup_iters", required_argument, NULL, 'w' },
	{ "run_cycles", required_argument, NULL, 'N' },
	{ "check", required_argument, NULL, 'c' },
	{ "op", required_argument, NULL, 'o' },
	{ "datatype", required_argument, NULL, 'd' },
	{ "root", required_argument, NULL, 'r' },
	{ "blocking", required_argument, NULL, 'z' },
	{ "timeout", required_argument, NULL, 'T' },
	{ "cudagraph", required_argument, NULL, 'G' },
	{ "report_cputime", required_argument, NULL, 'C' },
	{ "average", required_argument, NULL, 'a' },
	{ "help", no_argument, NULL, 'h' },
	/* MCCL's */
	{ "coll", required_argument, NULL, OPT_COLL },
	{ "timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS },
	{ "wire", required_argument, NULL, 'W' },
	{ "memory", required_argument, NULL, OPT_MEMORY },
	{ "part-bytes", required_argument, NULL, 'P' },
	{ "json", required_argument, NULL, 'j' },
	{ "format", required_argument, NULL, 'F' },
	{ "nprocs", required_argument, NULL, OPT_NPROCS },
	{ "total", required_argument, NULL, OPT_TOTAL },
	{ "first", required_argument, NULL, OPT_FIRST },
	{ "job", required_argument, NULL, OPT_JOB },
	{ NULL, 0, NULL, 0 }
};

/* "-b", or "--coll" for an option with a long name only. */
static const char *
opt_name(int opt)
{
	static char buf[32];

	for (const struct option *l = longopts; opt > 255 && l->name; l++)
		if (l->val == opt) {
			snprintf(buf, sizeof(buf), "--%s", l->name);
			return buf;
		}
	snprintf(buf, sizeof(buf), "-%c", opt);
	return buf;
}


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
	usage_error("%s: unknown %s '%s' (expected %s)", opt_name(opt), what, arg,
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
		usage_error("%s: bad value '%s' (expected an integer from "
		    "%ld to %ld)", opt_name(opt), s, lo, hi);
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
		usage_error("%s: bad size '%s' (expected 1 to %zuG bytes, "
		    "with an optional K, M or G suffix)", opt_name(opt), s,
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
	o->blocking = 1;
	o->average = AVERAGE_MAX;
	o->cycles = 1;
	o->timeout_ms = -1;
	o->total = -1;
	o->first = -1;
	o->dtype = LOOKUP('d', "type", "float32", dtypes);
	o->op = LOOKUP('o', "operation", "sum", ops);
	o->memory = LOOKUP(OPT_MEMORY, "memory", "shared", memories);
	o->coll = LOOKUP(OPT_COLL, "collective", "allreduce", colls);
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
		usage_error("--total, --first and --job need --nprocs");
	if (o->nprocs > 0 && (long)o->first + o->nprocs > o->total)
		usage_error("--total: %d ranks cannot hold ranks %d to %d "
		    "(--first %d, --nprocs %d)", o->total, o->first,
		    o->first + o->nprocs - 1, o->first, o->nprocs);
	if (o->root != 0 && o->coll->root < 0)
		usage_error("-r: %s has no root", o->coll->n.name);
	if (o->nprocs > 0 && o->root >= o->total)
		usage_error("-r %d: the job has %d ranks", o->root, o->total);
}

/* -t, -g, -G: nccl-tests' threads, GPUs and CUDA graphs; here one rank is
   one process on the host. */
static void
only(int ch, const char *arg, long want, const char *why)
{
	if (parse_long(ch, arg, 0, INT32_MAX) != want)
		usage_error("-%c %s: only %ld: %s", ch, arg, want, why);
}

/* The options nccl-tests has too, with its meanings; 0 if ch is not one. */
static int
nccl_opt(struct opts *o, int ch, const char *arg)
{
	switch (ch) {
	case 'a':
		o->average = (int)parse_long(ch, arg, AVERAGE_RANK0,
		    AVERAGE_MAX);
		return 1;
	case 'C':
		o->cputime = (int)parse_long(ch, arg, 0, 1);
		return 1;
	case 'c':
		o->check = parse_long(ch, arg, 0, ITERS_MAX) != 0;
		return 1;
	case 'G':
		only(ch, arg, 0, "mccl-perf runs no CUDA graphs");
		return 1;
	case 'g':
		only(ch, arg, 1, "a rank of mccl-perf is one process on the "
		    "host (torch's backend is the way to GPUs)");
		return 1;
	case 'N':
		o->cycles = (int)parse_long(ch, arg, 0, INT32_MAX);
		return 1;
	case 'r':
		o->root = (int)parse_long(ch, arg, 0, INT32_MAX - 1);
		return 1;
	case 'T':
		o->timeout_ms = (int)parse_long(ch, arg, 1, INT32_MAX / 1000) *
		    1000;
		return 1;
	case 't':
		only(ch, arg, 1, "one rank a process (--nprocs forks more)");
		return 1;
	case 'z':
		o->blocking = (int)parse_long(ch, arg, 0, 1);
		return 1;
	}
	return 0;
}

void
parse_opts(struct opts *o, int argc, char **argv)
{
	int	 ch, step_set = 0, spawn_opts = 0, format_set = 0;
	const char *env;

	opts_default(o);
	if ((env = getenv("MCCL_WIRE_DTYPE")) != NULL && *env != '\0')
		o->wire = LOOKUP('W', "MCCL_WIRE_DTYPE", env, wires);
	while ((ch = getopt_long(argc, argv,
	    "a:b:C:c:d:e:F:f:G:g:hi:j:N:n:o:P:r:T:t:W:w:z:", longopts, NULL))
	    != -1) {
		if (nccl_opt(o, ch, optarg))
			continue;
		switch (ch) {
		case 'b':
			o->minbytes = parse_size(ch, optarg);
			break;
		case OPT_COLL:
			o->coll = LOOKUP(ch, "collective", optarg, colls);
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
		case OPT_JOB:
			if (*optarg == '\0')
				usage_error("--job: empty job name");
			o->job = optarg;
			spawn_opts = 1;
			break;
		case 'j':
			o->path = optarg;
			break;
		case OPT_MEMORY:
			o->memory = LOOKUP(ch, "memory", optarg, memories);
			break;
		case OPT_NPROCS:
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
		case OPT_TOTAL:
			o->total = (int)parse_long(ch, optarg, 1, INT32_MAX);
			spawn_opts = 1;
			break;
		case OPT_FIRST:
			o->first = (int)parse_long(ch, optarg, 0,
			    INT32_MAX - 1);
			spawn_opts = 1;
			break;
		case OPT_TIMEOUT_MS:
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
