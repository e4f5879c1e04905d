/*
 * perf.h: mccl-perf, the MCCL benchmark, modelled on nccl-tests'
 * all_reduce_perf (tools/perf/).  Every rank is one process: started by
 * the user with MCCL_JOB, MCCL_RANK and MCCL_NRANKS set, or forked with
 * -N.  Each rank times its own iterations of one collective over a range
 * of sizes and checks one extra iteration against a pattern whose result
 * is exact in every type; the ranks agree on the slowest time and the
 * total of wrong elements, and global rank 0 prints the table (and writes
 * it as JSON or CSV with -j).  Only the public API of mccl.h is used.
 *
 * Its files, down the way the data goes:
 *   options.c   the command line and the tables of types, operations,
 *               collectives and formats
 *   main.c      a rank's life (its communicator and buffers) and -N's fork
 *   measure.c   each size run, timed, checked and agreed on by the ranks
 *   colls.c     each collective: how it starts, where its data lies, what
 *               it must give
 *   pattern.c   the check pattern, and elements of any type
 *   report.c    the table, and JSON or CSV
 */
#ifndef MCCL_PERF_H
#define MCCL_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mccl.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

#define EXIT_USAGE	2
#define SIZE_LIMIT	((size_t)1 << 40)	/* so size * FACTOR_MAX never overflows */
#define FACTOR_MAX	1024
#define ITERS_MAX	1000000000L
#define NPROCS_MAX	4096
#define PARTS_MAX	4096		/* -P: operations in flight per size */
#define PENDING_MAX	(1 << 20)	/* -z 0: operations in flight */

/* -a: which rank's time a row shows, as nccl-tests' */
enum { AVERAGE_RANK0, AVERAGE_MEAN, AVERAGE_MIN, AVERAGE_MAX };
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
	int			 root;		/* -r, of rooted collectives */
	int			 blocking;	/* -z 1: wait for each op */
	int			 cputime;	/* -C 1: the process's CPU time */
	int			 average;	/* -a: AVERAGE_* */
	int			 cycles;	/* -N; 0: until stopped */
	int			 timeout_ms;	/* -1: the operation's own */
	int			 nprocs;	/* --nprocs; 0: one rank from the env */
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
	int			 root;		/* -r for a rooted collective, or -1 */
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

/* main.c: an MCCL call's failure, which ends the rank */
void	die_mccl(const mccl_comm_t *, const char *, mccl_result_t)
	    __attribute__((noreturn));

/* options.c: the command line, and the tables its names are looked up in */
void	parse_opts(struct opts *, int, char **);

/* pattern.c: elements of any type, and the check pattern */
double	fold_sum(double, double);
double	fold_prod(double, double);
double	fold_band(double, double);
double	fold_bor(double, double);
double	fold_bxor(double, double);
double	pattern_input(const struct pattern *, int, size_t);
double	expect_allreduce(const struct bench *, size_t);
double	expect_broadcast(const struct bench *, size_t);
void	pattern_init(struct bench *);
void	pattern_fill(const struct bench *, void *, size_t);
uint64_t pattern_wrong(const struct bench *, const void *, size_t, size_t);

/* colls.c: each collective's start, layout, expected values, bus factor */
mccl_result_t start_allreduce(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_broadcast(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_barrier(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_reduce(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_allgather(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_reduce_scatter(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_alltoall(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_sendrecv(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_gather(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_scatter(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_allgatherv(const struct bench *, size_t, int,
	    mccl_request_t **);
mccl_result_t start_alltoallv(const struct bench *, size_t, int,
	    mccl_request_t **);
void	layout_same(const struct bench *, size_t, int, struct layout *);
void	layout_reduce(const struct bench *, size_t, int, struct layout *);
void	layout_allgather(const struct bench *, size_t, int, struct layout *);
void	layout_reduce_scatter(const struct bench *, size_t, int,
	    struct layout *);
void	layout_gather(const struct bench *, size_t, int, struct layout *);
void	layout_scatter(const struct bench *, size_t, int, struct layout *);
void	layout_v(const struct bench *, size_t, int, struct layout *);
double	want_allgather(const struct bench *, size_t, size_t);
double	want_scatter(const struct bench *, size_t, size_t);
double	want_reduce_scatter(const struct bench *, size_t, size_t);
double	want_alltoall(const struct bench *, size_t, size_t);
double	want_sendrecv(const struct bench *, size_t, size_t);
double	busfactor_allreduce(int);
double	busfactor_gather(int);
double	busfactor_one(int);
double	busfactor_zero(int);

/* measure.c: running, timing and checking a collective, size by size */
double	now_us(void);
void	allreduce(const struct bench *, void *, size_t, mccl_dtype_t,
	    mccl_op_t);
void	measure(const struct bench *, size_t, struct row *);
void	sizes_init(struct sizes *, const struct bench *);
int	sizes_next(struct sizes *, size_t *);
void	progress_show(struct bench *, size_t, size_t, size_t);
void	progress_clear(struct bench *);

/* report.c: the table on stdout, and JSON or CSV to a file (-j) */
extern const struct output out_json, out_csv;
void	output_begin(const struct bench *);
void	output_row(const struct bench *, const struct row *);
void	output_end(const struct bench *, const struct summary *);

#endif
