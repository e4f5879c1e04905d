/*
 * main.c: a rank of mccl-perf: its errors, communicator and buffers, the
 * sizes it runs; -N's fork of the local ranks and their supervision.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

/* This process's rank, for error messages. */
static char self[16] = "?";

/* ---- errors ---- */

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

void
die_mccl(const mccl_comm_t *comm, const char *call, mccl_result_t r)
{
	fail("%s: %s: %s", call, mccl_strerror(r), mccl_last_error(comm));
}

static void
set_self(int rank)
{
	snprintf(self, sizeof(self), "%d", rank);
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
	b->root = o->coll->root < 0 ? -1 : o->root;
	if (b->root >= b->nranks)
		fail("-r %d: the job has %d ranks", o->root, b->nranks);
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

	uint64_t wrong = 0;

	bench_open(&b, o, rank);
	for (int cycle = 0; o->cycles == 0 || cycle < o->cycles; cycle++) {
		bench_run(&b, &s);
		wrong += s.wrong;
	}
	bench_close(&b);
	return wrong != 0;
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
