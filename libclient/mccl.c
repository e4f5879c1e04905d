/*
 * mccl.c: libmccl, the client library (see mccl.h for the API contract).
 *
 * A communicator is one connection to the local daemon and one doorbell
 * page shared with it (struct ipc_doorbell).  A collective is a descriptor
 * in the page's submission ring, which the job's engine thread takes
 * directly; when it ends well the engine stores its seq in the page and
 * wakes a futex: no record and no hop through the daemon's main loop
 * either way.  Sends and receives are records (IPC_OP, answered by
 * OP_DONE), and so are replies and failures (IPC_JOB_FAILED).
 * Whichever thread needs progress waits (one at a time) and completes
 * requests; the others wait on a condition variable.  Every wait has a
 * deadline derived from the daemon's own timeouts.
 */
#include <sys/mman.h>
#include <sys/syscall.h>

#include <linux/futex.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mccl.h"
#include "conn.h"
#include "spin.h"

#define ERRLEN			1024
#define CONNECT_TIMEOUT_MS	5000
#define STATS_TIMEOUT_MS	5000	/* mccl_comm_stats: the daemons answer */
#define DAEMON_MARGIN_MS	5000	/* beyond the daemon's own deadline */
#define BELL_NAP_MS		200	/* longest doorbell sleep: then see
					   whether the daemon is still there */

struct lseg {
	struct lseg	*next;
	uint32_t	 id;
	uint8_t		*base;
	size_t		 size;
	int		 staging;	/* the library's own, for other pointers */
	int		 busy;		/* staging: in use by a pending op */
};

struct mccl_request {
	struct mccl_request *next;
	struct mccl_comm *comm;
	uint64_t	 seq;
	uint64_t	 deadline_ms;
	int		 collective;	/* answered through the doorbell */
	int		 done;
	mccl_result_t	 code;
	struct lseg	*stage;		/* copy out of it on completion */
	struct lseg	*vstage;	/* the v-collectives' vector */
	mccl_status_t	*status;	/* a receive's, set as it completes */
	void		*out;
	size_t		 out_bytes;
	size_t		 out_off;
	const uint64_t	*out_counts;	/* v-collectives: the receive blocks, */
	const uint64_t	*out_displs;	/* in vstage, in elements */
	size_t		 out_esize;
};

struct sync_reply {
	int		 have;
	uint16_t	 type;
	mccl_result_t	 code;
	struct ipc_joined joined;
	char		 text[ERRLEN];
};

struct mccl_comm {
	uint32_t	 magic;		/* COMM_MAGIC while alive */
	struct mccl_comm *next_dead;	/* in the graveyard, once destroyed */
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;
	int		 reading;	/* a thread is reading the socket */
	int		 fd;
	char		 path[108];	/* the daemon's socket */
	char		 job[JOB_NAME_MAX];
	int		 rank;
	int		 nranks;
	struct ipc_hello_ok hello;
	struct ipc_joined joined;
	uint32_t	 op_timeout_ms;
	uint8_t		 algo;		/* MCCL_ALGO, for every op */
	uint8_t		 wire;		/* float32 sums' wire: MCCL_BFLOAT16,
					   MCCL_FLOAT16, or 0 (as they are) */
	int32_t		 spin_us;	/* MCCL_SPIN_US; SPIN_AUTO */
	long		 ncpu;		/* online, at init */
	int		 xmem;		/* MCCL_XMEM */
	uint64_t	 next_seq;
	uint64_t	 sq_head;	/* descriptors put in the ring */
	uint64_t	 nsplits;
	uint32_t	 next_seg_id;
	struct lseg	*segs;
	struct ipc_doorbell *bell;	/* in a segment of segs */
	struct mccl_request *pending;	/* oldest first, so by seq */
	struct mccl_request *pending_tail;
	struct sync_reply reply;
	mccl_result_t	 failed;	/* sticky: the communicator is broken */
	char		 err[ERRLEN];
	struct ipc_msg	*msg;		/* the reader's receive buffer */
};

static _Thread_local char init_error[ERRLEN];

static const size_t dtype_sizes[MCCL_NUM_DTYPES] = { 1, 1, 4, 4, 8, 8, 2, 2,
    4, 8 };

_Static_assert(MCCL_NUM_RESULTS == PROTO_NUM_RESULTS,
    "the wire carries every mccl_result_t");

const char *
mccl_strerror(mccl_result_t r)
{
	return proto_result_name((int)r);
}

size_t
mccl_dtype_size(mccl_dtype_t dtype)
{
	return (unsigned)dtype < MCCL_NUM_DTYPES ? dtype_sizes[dtype] : 0;
}

const char *
mccl_last_error(const mccl_comm_t *comm)
{
	return comm == NULL ? init_error : comm->err;
}

int
mccl_comm_rank(const mccl_comm_t *comm)
{
	return comm == NULL ? -1 : comm->rank;
}

int
mccl_comm_size(const mccl_comm_t *comm)
{
	return comm == NULL ? -1 : comm->nranks;
}

static mccl_result_t	comm_check(const mccl_comm_t *);
static struct lseg	*seg_create(mccl_comm_t *, size_t, int);

/* Record an error on comm (lock held) and return its code. */
static mccl_result_t
comm_error(mccl_comm_t *comm, mccl_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* MCCL_DEBUG: WARN prints every error as it is set, INFO also the job. */
enum { DEBUG_NONE, DEBUG_WARN, DEBUG_INFO };
static int debug_level;

static int
env_debug(char *err, size_t errlen)
{
	const char *s = getenv("MCCL_DEBUG");

	if (s == NULL || *s == '\0')
		debug_level = DEBUG_NONE;
	else if (strcasecmp(s, "WARN") == 0)
		debug_level = DEBUG_WARN;
	else if (strcasecmp(s, "INFO") == 0)
		debug_level = DEBUG_INFO;
	else {
		snprintf(err, errlen, "MCCL_DEBUG=%s: expected WARN or INFO", s);
		return -1;
	}
	return 0;
}

static void
debug_warn(int rank, mccl_result_t code, const char *msg)
{
	if (debug_level >= DEBUG_WARN)
		fprintf(stderr, "MCCL WARN: pid %d rank %d: %s: %s\n",
		    (int)getpid(), rank, mccl_strerror(code), msg);
}

static mccl_result_t
comm_error(mccl_comm_t *comm, mccl_result_t code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(comm->err, sizeof(comm->err), fmt, ap);
	va_end(ap);
	if (code != MCCL_SUCCESS)
		debug_warn(comm->rank, code, comm->err);
	return code;
}

/* The staging segments r held go back to the communicator. */
static void
request_unstage(struct mccl_request *r)
{
	if (r->stage != NULL)
		r->stage->busy = 0;
	if (r->vstage != NULL)
		r->vstage->busy = 0;
}

/* The communicator is unusable from now on: fail everything pending. */
static mccl_result_t
comm_break(mccl_comm_t *comm, mccl_result_t code)
{
	if (comm->failed == MCCL_SUCCESS)
		comm->failed = code;
	for (struct mccl_request *r = comm->pending; r != NULL; r = r->next) {
		r->done = 1;
		r->code = comm->failed;
		request_unstage(r);
	}
	comm->pending = comm->pending_tail = NULL;
	pthread_cond_broadcast(&comm->cond);
	return comm->failed;
}

static uint64_t
env_ms(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return dflt;
	errno = 0;
	v = strtoull(s, &end, 10);
	return errno != 0 || *end != '\0' || v == 0 || v > UINT32_MAX ? dflt : v;
}

/*
 * MCCL_XMEM: 0 keeps the daemon out of this process's memory; 1 (unset or
 * empty) lets it in where that pays (op_in_xmem); 2 for every allreduce
 * from XMEM_MIN_BYTES, for tests and measurements.  -1 with why in err.
 */
static int
env_xmem(char *err, size_t errlen)
{
	const char *s = getenv("MCCL_XMEM");

	if (s == NULL || *s == '\0')
		return 1;
	if (strlen(s) == 1 && *s >= '0' && *s <= '2')
		return *s - '0';
	snprintf(err, errlen, "MCCL_XMEM is \"%s\": it must be 0, 1 or 2", s);
	return -1;
}

/* MCCL_ALGO: the allreduce algorithm; unset or empty is auto. */
static int
env_algo(char *err, size_t len)
{
	const char *s = getenv("MCCL_ALGO");
	int algo;

	if (s == NULL || *s == '\0')
		return ALGO_AUTO;
	if ((algo = proto_algo_parse(s)) == -1)
		snprintf(err, len, "MCCL_ALGO=%.32s: expected " ALGO_NAMES, s);
	return algo;
}

/* A wire format by name, as MCCL_WIRE_DTYPE gives it: 0 is float32. */
static int
wire_parse(const char *s)
{
	static const struct {
		const char	*name;
		int		 wire;
	} names[] = { { "fp32", 0 }, { "float32", 0 }, { "", 0 },
	    { "bf16", MCCL_BFLOAT16 }, { "bfloat16", MCCL_BFLOAT16 },
	    { "fp16", MCCL_FLOAT16 }, { "float16", MCCL_FLOAT16 } };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return names[i].wire;
	return -1;
}

/* MCCL_WIRE_DTYPE: the float32 sums' wire; unset or empty is float32. */
static int
env_wire(char *err, size_t len)
{
	const char *s = getenv("MCCL_WIRE_DTYPE");
	int wire;

	if (s == NULL)
		return 0;
	if ((wire = wire_parse(s)) == -1)
		snprintf(err, len, "MCCL_WIRE_DTYPE=%.32s: expected bf16, fp16 "
		    "or fp32", s);
	return wire;
}

/* MCCL_SPIN_US: the doorbell spin (spin.h); unset or empty is auto. */
static int
env_spin(int32_t *us, char *err, size_t len)
{
	const char *s = getenv("MCCL_SPIN_US");
	char why[128];

	*us = SPIN_AUTO;
	if (s == NULL || *s == '\0')
		return 0;
	if (spin_parse(s, us, why, sizeof(why)) == -1) {
		snprintf(err, len, "MCCL_SPIN_US=%s", why);
		return -1;
	}
	return 0;
}

/* ---- receiving ---- */

/* Unlink r from the pending list, whatever its place, and complete it. */
/*
 * A staged op's result to the caller's buffer: a v-collective's receive
 * blocks alone (libmccl(3): nothing between them is written), else its
 * whole extent.
 */
static void
request_copy_out(const struct mccl_request *r)
{
	const uint8_t *from = r->stage->base + r->out_off;
	uint8_t *to = r->out;

	if (r->out_counts == NULL) {
		memcpy(to, from, r->out_bytes);
		return;
	}
	for (int i = 0; i < r->comm->nranks; i++) {
		size_t off = (size_t)r->out_displs[i] * r->out_esize;

		memcpy(to + off, from + off, (size_t)r->out_counts[i] *
		    r->out_esize);
	}
}

static void
request_complete(mccl_comm_t *comm, struct mccl_request *r, mccl_result_t code)
{
	struct mccl_request **pp, *prev = NULL;

	for (pp = &comm->pending; *pp != NULL && *pp != r; pp = &(*pp)->next)
		prev = *pp;
	if (*pp == r) {
		*pp = r->next;
		if (comm->pending_tail == r)
			comm->pending_tail = prev;
	}
	r->next = NULL;
	r->done = 1;
	r->code = code;
	if (r->stage != NULL && code == MCCL_SUCCESS && r->out_bytes > 0)
		request_copy_out(r);
	request_unstage(r);
}

/* Collectives complete in order; sends and receives may overtake them. */
static mccl_result_t
dispatch_op_done(mccl_comm_t *comm, const struct ipc_msg *m)
{
	struct mccl_request *r;
	mccl_result_t code = (mccl_result_t)m->u.op_done.code;

	for (r = comm->pending; r != NULL; r = r->next)
		if (r->seq == m->u.op_done.seq)
			break;
	if (r == NULL)
		return comm_break(comm, comm_error(comm, MCCL_ERR_PROTOCOL,
		    "daemon completed op %llu, which is not pending",
		    (unsigned long long)m->u.op_done.seq));
	if (code >= MCCL_NUM_RESULTS)
		code = MCCL_ERR_PROTOCOL;
	if (code != MCCL_SUCCESS) {
		comm_error(comm, code, "%.*s", (int)m->trailer_len, m->trailer);
		return comm_break(comm, code);
	}
	if (r->status != NULL) {
		r->status->source = (int)m->u.op_done.source;
		r->status->tag = (int)m->u.op_done.tag;
	}
	request_complete(comm, r, MCCL_SUCCESS);
	return MCCL_SUCCESS;
}

static mccl_result_t
dispatch(mccl_comm_t *comm, const struct ipc_msg *m)
{
	struct sync_reply *s = &comm->reply;
	mccl_result_t code;

	if (m->hdr.type == IPC_OP_DONE)
		return dispatch_op_done(comm, m);
	if (m->hdr.type == IPC_JOB_FAILED) {
		code = m->u.job_failed.code < MCCL_NUM_RESULTS &&
		    m->u.job_failed.code != 0 ?
		    (mccl_result_t)m->u.job_failed.code : MCCL_ERR_PROTOCOL;
		return comm_break(comm, comm_error(comm, code, "%.*s",
		    (int)m->trailer_len, m->trailer));
	}
	if (m->hdr.type != IPC_SEG_OK && m->hdr.type != IPC_JOINED &&
	    m->hdr.type != IPC_ERROR)
		return comm_break(comm, comm_error(comm, MCCL_ERR_PROTOCOL,
		    "unexpected %s from the daemon", m->type->name));
	s->have = 1;
	s->type = m->hdr.type;
	s->code = MCCL_SUCCESS;
	if (m->hdr.type == IPC_ERROR) {
		s->code = m->u.error.code < MCCL_NUM_RESULTS && m->u.error.code ?
		    (mccl_result_t)m->u.error.code : MCCL_ERR_PROTOCOL;
		snprintf(s->text, sizeof(s->text), "%.*s", (int)m->trailer_len,
		    m->trailer);
	} else if (m->hdr.type == IPC_JOINED)
		s->joined = m->u.joined;
	return MCCL_SUCCESS;
}

static uint64_t
bell_done_seq(const mccl_comm_t *comm)
{
	return __atomic_load_n(&comm->bell->done_seq, __ATOMIC_ACQUIRE);
}

/* Complete the pending collectives the doorbell says ended well. */
static void
bell_collect(mccl_comm_t *comm)
{
	struct mccl_request *r, *next;
	uint64_t done;

	if (comm->bell == NULL)
		return;
	done = bell_done_seq(comm);
	for (r = comm->pending; r != NULL && r->seq <= done; r = next) {
		next = r->next;
		if (r->collective)
			request_complete(comm, r, MCCL_SUCCESS);
	}
}

/*
 * Spin on the doorbell for its word to move past `word`, for the spin
 * budget (spin.h) or timeout_ms, whichever is shorter: 1 if it moved.
 * Records move the word too, so a reply is seen as soon as a completion.
 */
static int
bell_spin(const struct ipc_doorbell *b, uint32_t word, uint64_t timeout_ms,
    int32_t spin_us)
{
	uint64_t budget = spin_budget_ns(spin_us), until;
	struct timespec ts;

	if (budget == 0 || timeout_ms == 0)
		return 0;
	if (budget > timeout_ms * 1000000)
		budget = timeout_ms * 1000000;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	until = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec +
	    budget;
	do {
		for (int k = 0; k < 64; k++) {
			if (__atomic_load_n(&b->word, __ATOMIC_ACQUIRE) != word)
				return 1;
			spin_pause();
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec <
	    until);
	return 0;
}

/*
 * Wait for the daemon (without comm->lock): for a record, or, with a
 * doorbell, for its word to move past `word` (read before the caller last
 * looked at done_seq), for at most timeout_ms.  Records also move the word,
 * so one futex covers both; the naps are bounded so that a daemon that
 * died, and so rings no more, is noticed by the socket.
 */
static int
comm_wait_daemon(mccl_comm_t *comm, uint32_t word, uint64_t timeout_ms,
    char *err, size_t errlen)
{
	struct ipc_doorbell *b = comm->bell;
	struct timespec ts;
	uint64_t nap;
	int rc;

	if (b == NULL)
		return conn_recv(comm->fd, (int)timeout_ms, comm->msg, err,
		    errlen);
	if ((rc = conn_recv(comm->fd, 0, comm->msg, err, errlen)) !=
	    MCCL_ERR_TIMEOUT)
		return rc;
	snprintf(err, errlen, "no answer from the daemon yet");
	if (bell_spin(b, word, timeout_ms, comm->spin_us))
		return MCCL_ERR_TIMEOUT;	/* rung: the caller collects */
	nap = timeout_ms < BELL_NAP_MS ? timeout_ms : BELL_NAP_MS;
	ts = (struct timespec){ (time_t)(nap / 1000),
	    (long)(nap % 1000) * 1000000 };
	__atomic_add_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &b->word, FUTEX_WAIT, word, &ts, NULL, 0);
	__atomic_sub_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
	return MCCL_ERR_TIMEOUT;
}

/*
 * Make progress until *flag is set or deadline_ms (CLOCK_MONOTONIC ms)
 * passes.  Whatever the daemon has already sent is taken in even when the
 * deadline has passed on entry (mccl_test): only waiting is cut short.
 * Called and returns with comm->lock held.
 */
static mccl_result_t
comm_progress(mccl_comm_t *comm, const int *flag, uint64_t deadline_ms)
{
	char err[ERRLEN];
	uint32_t word = 0;
	uint64_t now, wait_ms;
	int rc, drained = 0;

	for (;;) {
		if (comm->bell != NULL)
			word = __atomic_load_n(&comm->bell->word,
			    __ATOMIC_SEQ_CST);
		bell_collect(comm);
		if (*flag)
			break;
		if (comm->failed != MCCL_SUCCESS)
			return comm->failed;
		now = conn_now_ms();
		if (now >= deadline_ms && (drained || comm->reading))
			return MCCL_ERR_TIMEOUT;
		/* Past the deadline: one look that does not wait. */
		wait_ms = now >= deadline_ms ? 0 : deadline_ms - now;
		drained = wait_ms == 0;
		if (comm->reading) {
			struct timespec ts = { (time_t)(deadline_ms / 1000),
			    (long)(deadline_ms % 1000) * 1000000 };

			pthread_cond_timedwait(&comm->cond, &comm->lock, &ts);
			continue;
		}
		comm->reading = 1;
		pthread_mutex_unlock(&comm->lock);
		rc = comm_wait_daemon(comm, word, wait_ms, err, sizeof(err));
		pthread_mutex_lock(&comm->lock);
		comm->reading = 0;
		pthread_cond_broadcast(&comm->cond);
		if (rc == MCCL_SUCCESS) {
			dispatch(comm, comm->msg);
			drained = 0;	/* there may be more */
		} else if (rc == MCCL_ERR_TIMEOUT && comm->bell != NULL &&
		    __atomic_load_n(&comm->bell->word, __ATOMIC_SEQ_CST) != word)
			drained = 0;	/* rung meanwhile: collect it */
		else if (rc != MCCL_ERR_TIMEOUT)
			return comm_break(comm, comm_error(comm, rc,
			    "daemon connection lost: %s", err));
	}
	return MCCL_SUCCESS;
}

/* Send a request and wait for its reply (SEG_OK, JOINED or ERROR). */
static mccl_result_t
comm_request(mccl_comm_t *comm, uint16_t type, const void *msg, int pass_fd,
    uint64_t timeout_ms)
{
	char err[ERRLEN];
	mccl_result_t rc;

	comm->reply.have = 0;
	if ((rc = conn_send(comm->fd, type, msg, NULL, 0, pass_fd, err,
	    sizeof(err))) != MCCL_SUCCESS)
		return comm_break(comm, comm_error(comm, rc, "%s", err));
	rc = comm_progress(comm, &comm->reply.have, conn_now_ms() + timeout_ms);
	if (rc == MCCL_ERR_TIMEOUT)
		return comm_error(comm, rc, "no answer from the daemon within "
		    "%llu ms", (unsigned long long)timeout_ms);
	if (rc != MCCL_SUCCESS)
		return rc;
	if (comm->reply.type == IPC_ERROR)
		return comm_error(comm, comm->reply.code, "%s", comm->reply.text);
	return MCCL_SUCCESS;
}

/* ---- communicators ---- */

#define COMM_MAGIC	0x6d63636cU	/* "mccl": a live communicator */

/*
 * Destroyed communicators keep their (small) struct, reused by the next
 * mccl_comm_init, so that a call on a destroyed one gets a clear error
 * instead of touching freed memory.
 */
static pthread_mutex_t	 graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static mccl_comm_t	*graveyard;

static mccl_comm_t *
comm_new(void)
{
	pthread_condattr_t ca;
	mccl_comm_t *comm;

	pthread_mutex_lock(&graveyard_lock);
	if ((comm = graveyard) != NULL)
		graveyard = comm->next_dead;
	pthread_mutex_unlock(&graveyard_lock);
	if (comm == NULL && (comm = malloc(sizeof(*comm))) == NULL)
		return NULL;
	memset(comm, 0, sizeof(*comm));
	if ((comm->msg = malloc(sizeof(*comm->msg))) == NULL) {
		free(comm);
		return NULL;
	}
	pthread_mutex_init(&comm->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&comm->cond, &ca);
	pthread_condattr_destroy(&ca);
	comm->fd = -1;
	comm->next_seq = 1;
	comm->next_seg_id = 1;
	comm->magic = COMM_MAGIC;
	return comm;
}

static void
comm_free(mccl_comm_t *comm)
{
	struct lseg *s, *next;

	for (s = comm->segs; s != NULL; s = next) {
		next = s->next;
		munmap(s->base, s->size);
		free(s);
	}
	if (comm->fd != -1)
		close(comm->fd);
	pthread_mutex_destroy(&comm->lock);
	pthread_cond_destroy(&comm->cond);
	free(comm->msg);
	comm->magic = 0;
	pthread_mutex_lock(&graveyard_lock);
	comm->next_dead = graveyard;
	graveyard = comm;
	pthread_mutex_unlock(&graveyard_lock);
}

static mccl_result_t
init_fail(mccl_comm_t *comm, mccl_result_t code, const char *msg)
{
	snprintf(init_error, sizeof(init_error), "%s", msg);
	debug_warn(-1, code, msg);
	if (comm != NULL)
		comm_free(comm);
	return code;
}

/*
 * The doorbell: a page of its own, registered like a staging segment but
 * never lent to an operation (busy for good).
 */
static mccl_result_t
comm_bell(mccl_comm_t *comm)
{
	struct ipc_bell m;
	struct lseg *s;
	mccl_result_t rc;

	if ((s = seg_create(comm, IPC_BELL_SIZE, 1)) == NULL)
		return comm->failed ? comm->failed : MCCL_ERR_NO_MEMORY;
	s->busy = 1;
	m.seg_id = s->id;
	if ((rc = comm_request(comm, IPC_BELL, &m, -1, CONNECT_TIMEOUT_MS)) !=
	    MCCL_SUCCESS)
		return rc;
	comm->bell = (struct ipc_doorbell *)(void *)s->base;
	return MCCL_SUCCESS;
}

static mccl_result_t
comm_join(mccl_comm_t *comm, const char *job, int nranks, int rank)
{
	struct ipc_join m;
	uint64_t timeout = env_ms("MCCL_INIT_TIMEOUT_MS",
	    comm->hello.init_timeout_ms);
	mccl_result_t rc;

	memset(&m, 0, sizeof(m));
	m.nranks = (uint32_t)nranks;
	m.rank = (uint32_t)rank;
	m.timeout_ms = (uint32_t)timeout;
	snprintf(m.job, sizeof(m.job), "%s", job);
	if ((rc = comm_request(comm, IPC_JOIN, &m, -1, timeout +
	    DAEMON_MARGIN_MS)) != MCCL_SUCCESS)
		return rc;
	if (comm->reply.type != IPC_JOINED)
		return comm_error(comm, MCCL_ERR_PROTOCOL, "daemon answered "
		    "JOIN with message %u", comm->reply.type);
	comm->joined = comm->reply.joined;
	return MCCL_SUCCESS;
}

mccl_result_t
mccl_comm_init(mccl_comm_t **commp, const char *job, int nranks, int rank)
{
	char path[108], err[ERRLEN];
	mccl_comm_t *comm;
	mccl_result_t rc;
	int32_t spin_us;
	int algo, wire, xmem, code;

	if (commp == NULL)
		return init_fail(NULL, MCCL_ERR_INVALID_ARGUMENT, "comm is NULL");
	*commp = NULL;
	if (job == NULL)
		return init_fail(NULL, MCCL_ERR_INVALID_ARGUMENT, "job name is "
		    "NULL");
	if (proto_job_name_check(job, err, sizeof(err)) == -1)
		return init_fail(NULL, MCCL_ERR_INVALID_ARGUMENT, err);
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		snprintf(err, sizeof(err), "rank %d is out of range for nranks "
		    "%d", rank, nranks);
		return init_fail(NULL, MCCL_ERR_INVALID_ARGUMENT, err);
	}
	if (env_debug(err, sizeof(err)) == -1 ||
	    (algo = env_algo(err, sizeof(err))) == -1 ||
	    (wire = env_wire(err, sizeof(err))) == -1 ||
	    (xmem = env_xmem(err, sizeof(err))) == -1 ||
	    env_spin(&spin_us, err, sizeof(err)) == -1)
		return init_fail(NULL, MCCL_ERR_INVALID_ARGUMENT, err);
	if ((comm = comm_new()) == NULL)
		return init_fail(NULL, MCCL_ERR_NO_MEMORY, "out of memory");
	comm->spin_us = spin_us;
	comm->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	comm->xmem = xmem;
	conn_socket_path(path, sizeof(path));
	if ((comm->fd = conn_open(path, CONNECT_TIMEOUT_MS, xmem != 0,
	    &comm->hello, &code, err, sizeof(err))) == -1)
		return init_fail(comm, (mccl_result_t)code, err);
	snprintf(comm->job, sizeof(comm->job), "%s", job);
	snprintf(comm->path, sizeof(comm->path), "%s", path);
	comm->rank = rank;
	comm->nranks = nranks;
	comm->algo = (uint8_t)algo;
	comm->wire = (uint8_t)wire;
	comm->op_timeout_ms = (uint32_t)env_ms("MCCL_OP_TIMEOUT_MS",
	    comm->hello.op_timeout_ms);
	pthread_mutex_lock(&comm->lock);
	if ((rc = comm_bell(comm)) == MCCL_SUCCESS)
		rc = comm_join(comm, job, nranks, rank);
	pthread_mutex_unlock(&comm->lock);
	if (rc != MCCL_SUCCESS)
		return init_fail(comm, rc, comm->err);
	if (debug_level >= DEBUG_INFO)
		fprintf(stderr, "MCCL INFO: pid %d rank %d of %d, job %s: the "
		    "daemon at %s (%s), node %s (%u of %u)\n", (int)getpid(),
		    rank, nranks, job, path, conn_socket_origin(path, 0),
		    comm->hello.node_name, comm->hello.node_index,
		    comm->hello.nnodes);
	*commp = comm;
	return MCCL_SUCCESS;
}

/* The first of the variables that is set. */
static const char *
env_first(const char *const *names)
{
	const char *v;

	for (; *names != NULL; names++)
		if ((v = getenv(*names)) != NULL && *v != '\0')
			return v;
	return NULL;
}

/* A job name from the launcher's environment (see mccl.h). */
static const char *
env_job(char *buf, size_t len)
{
	static const char *const direct[] = { "MCCL_JOB", NULL };
	static const char *const ompi[] = { "OMPI_MCA_orte_hnp_uri",
	    "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", NULL };
	const char *v, *w;

	if ((v = env_first(direct)) != NULL)
		return v;
	/* torchrun says "none" without --rdzv-id: not a name of this job. */
	if ((v = getenv("TORCHELASTIC_RUN_ID")) != NULL && *v != '\0' &&
	    strcmp(v, "none") != 0) {
		snprintf(buf, len, "torch-%s", v);
		return buf;
	}
	if ((v = getenv("MASTER_ADDR")) && (w = getenv("MASTER_PORT"))) {
		snprintf(buf, len, "torch-%s:%s", v, w);
		return buf;
	}
	if ((v = getenv("SLURM_JOB_ID")) != NULL) {
		w = getenv("SLURM_STEP_ID");
		snprintf(buf, len, "slurm-%s.%s", v, w ? w : "0");
		return buf;
	}
	if ((v = env_first(ompi)) != NULL) {
		/* The URI holds addresses and may be long: name it by hash. */
		uint64_t h = 1469598103934665603ULL;

		for (w = v; *w != '\0'; w++)
			h = (h ^ (uint8_t)*w) * 1099511628211ULL;
		snprintf(buf, len, "ompi-%016llx", (unsigned long long)h);
		return buf;
	}
	return NULL;
}

static int
env_int(const char *const *names, int *v)
{
	const char *s = env_first(names);
	char *end;
	long l;

	if (s == NULL)
		return -1;
	errno = 0;
	l = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || l < 0 || l > 0x7fffffff)
		return -1;
	*v = (int)l;
	return 0;
}

mccl_result_t
mccl_comm_init_env(mccl_comm_t **commp)
{
	static const char *const rank_vars[] = { "MCCL_RANK", "RANK",
	    "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", NULL };
	static const char *const size_vars[] = { "MCCL_NRANKS", "WORLD_SIZE",
	    "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", NULL };
	char buf[JOB_NAME_MAX];
	const char *job = env_job(buf, sizeof(buf));
	int rank, nranks;

	if (job == NULL || env_int(rank_vars, &rank) == -1 ||
	    env_int(size_vars, &nranks) == -1)
		return init_fail(NULL, MCCL_ERR_INVALID_ARGUMENT, "no job, rank "
		    "or nranks in the environment: set MCCL_JOB, MCCL_RANK and "
		    "MCCL_NRANKS, or run under torchrun, Slurm or mpirun");
	return mccl_comm_init(commp, job, nranks, rank);
}

mccl_result_t
mccl_comm_destroy(mccl_comm_t *comm)
{
	struct mccl_request *r, *next;
	char err[ERRLEN];

	mccl_result_t rc;

	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	pthread_mutex_lock(&comm->lock);
	/* Requests still pending die with the communicator. */
	for (r = comm->pending; r != NULL; r = next) {
		next = r->next;
		free(r);
	}
	comm->pending = NULL;
	if (comm->failed == MCCL_SUCCESS)
		conn_send(comm->fd, IPC_LEAVE, NULL, NULL, 0, -1, err,
		    sizeof(err));
	pthread_mutex_unlock(&comm->lock);
	comm_free(comm);
	return MCCL_SUCCESS;
}

/* ---- shared memory ---- */

static struct lseg *
seg_create(mccl_comm_t *comm, size_t bytes, int staging)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = (bytes + page - 1) / page * page;
	struct ipc_seg_add m;
	struct lseg *s;
	int fd;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		comm_error(comm, MCCL_ERR_NO_MEMORY, "out of memory");
		return NULL;
	}
	if ((fd = memfd_create("mccl", MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1 ||
	    ftruncate(fd, (off_t)size) == -1 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ==
	    -1 || (s->base = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0)) == MAP_FAILED) {
		comm_error(comm, MCCL_ERR_NO_MEMORY, "cannot create a %zu-byte "
		    "shared segment: %s", size, strerror(errno));
		if (fd != -1)
			close(fd);
		free(s);
		return NULL;
	}
	s->id = comm->next_seg_id++;
	s->size = size;
	s->staging = staging;
	m.seg_id = s->id;
	m.size = size;
	if (comm_request(comm, IPC_SEG_ADD, &m, fd, CONNECT_TIMEOUT_MS) !=
	    MCCL_SUCCESS) {
		close(fd);
		munmap(s->base, size);
		free(s);
		return NULL;
	}
	close(fd);
	s->next = comm->segs;
	comm->segs = s;
	return s;
}

void *
mccl_alloc(mccl_comm_t *comm, size_t bytes)
{
	struct lseg *s = NULL;

	if (comm_check(comm) != MCCL_SUCCESS)
		return NULL;
	pthread_mutex_lock(&comm->lock);
	if (comm->failed != MCCL_SUCCESS)
		;	/* comm->err still says why it failed */
	else if (bytes == 0)
		comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "mccl_alloc of 0 "
		    "bytes");
	else
		s = seg_create(comm, bytes, 0);
	pthread_mutex_unlock(&comm->lock);
	return s == NULL ? NULL : s->base;
}

static void
seg_destroy(mccl_comm_t *comm, struct lseg **prev)
{
	struct lseg *s = *prev;
	struct ipc_seg_del m = { s->id };
	char err[ERRLEN];

	*prev = s->next;
	conn_send(comm->fd, IPC_SEG_DEL, &m, NULL, 0, -1, err, sizeof(err));
	munmap(s->base, s->size);
	free(s);
}

void
mccl_free(mccl_comm_t *comm, void *ptr)
{
	struct lseg **prev;

	if (comm_check(comm) != MCCL_SUCCESS || ptr == NULL)
		return;
	pthread_mutex_lock(&comm->lock);
	for (prev = &comm->segs; *prev != NULL; prev = &(*prev)->next)
		if ((*prev)->base == ptr && !(*prev)->staging) {
			seg_destroy(comm, prev);
			break;
		}
	pthread_mutex_unlock(&comm->lock);
}

/* The segment holding [p, p + bytes), if it is mccl_alloc memory. */
static struct lseg *
seg_lookup(mccl_comm_t *comm, const void *p, size_t bytes, uint64_t *off)
{
	const uint8_t *b = p;

	for (struct lseg *s = comm->segs; s != NULL; s = s->next)
		if (!s->staging && b >= s->base && b < s->base + s->size &&
		    bytes <= (size_t)(s->base + s->size - b)) {
			*off = (uint64_t)(b - s->base);
			return s;
		}
	return NULL;
}

static struct lseg *
stage_get(mccl_comm_t *comm, size_t bytes)
{
	size_t want = 1 << 16;

	for (struct lseg *s = comm->segs; s != NULL; s = s->next)
		if (s->staging && !s->busy && s->size >= bytes)
			return s;
	while (want < bytes)
		want *= 2;
	return seg_create(comm, want, 1);
}

/* ---- operations ---- */

struct op_args {
	uint8_t		 coll;
	mccl_dtype_t	 dtype;
	mccl_op_t	 redop;
	int		 root;		/* or the peer of a send or receive */
	size_t		 count;
	const void	*send;
	void		*recv;
	int		 tag;
	const uint64_t	*vec;		/* v-collectives (proto_vec_len) */
	size_t		 sendcount;	/* allgatherv: the caller's */
	mccl_status_t	*status;	/* a receive's, or NULL */
};

/* Stage [send, recv] through the library's segment: see mccl.h. */
static mccl_result_t
op_stage(mccl_comm_t *comm, const struct op_args *a, size_t sb, size_t rb,
    struct ipc_op *m, struct mccl_request *r)
{
	const uint8_t *s = a->send, *d = a->recv;
	int send_in_recv = sb && rb && s >= d && s + sb <= d + rb;
	int recv_in_send = sb && rb && d >= s && d + rb <= s + sb;
	size_t total = send_in_recv ? rb : recv_in_send ? sb : sb + rb;

	if ((r->stage = stage_get(comm, total)) == NULL)
		return comm->failed ? comm->failed : MCCL_ERR_NO_MEMORY;
	r->stage->busy = 1;
	if (send_in_recv) {
		memcpy(r->stage->base, d, rb);
		m->send_off = (uint64_t)(s - d);
		m->recv_off = 0;
	} else if (recv_in_send) {
		memcpy(r->stage->base, s, sb);
		m->send_off = 0;
		m->recv_off = (uint64_t)(d - s);
	} else {
		if (sb > 0)
			memcpy(r->stage->base, s, sb);
		m->send_off = 0;
		m->recv_off = sb;
	}
	m->send_seg = sb ? r->stage->id : 0;
	m->recv_seg = rb ? r->stage->id : 0;
	r->out = a->recv;
	r->out_bytes = rb;
	r->out_off = (size_t)m->recv_off;
	return MCCL_SUCCESS;
}

/*
 * A large allreduce whose buffers are not all mccl_alloc memory: the daemon
 * reads and writes them where they are, if it said it can (see mccl.h).
 * From here its passes run on several threads; below, the library's
 * memcpy beat the kernel's copy (1 MiB: 1.06-1.20 x the staged time on 2
 * cores, tools/bench/results/xmem-16core.md).
 */
#define XMEM_MIN_BYTES	(4u << 20)
/*
 * A rank alone on its node saves no copy that way (the daemon's read
 * replaces the library's; with several, it replaces the library's and the
 * daemon's own): it gains only where the daemon's threads share the copy.
 * Measured: 0.52-0.72 x the staged time on 16 CPUs, 1.06-1.08 x on 2.
 */
#define XMEM_LONE_MIN_CPUS	4

static int
op_in_xmem(const mccl_comm_t *comm, const struct op_args *a, size_t bytes)
{
	return comm->hello.xmem && a->coll == COLL_ALLREDUCE &&
	    bytes >= XMEM_MIN_BYTES && (comm->xmem == 2 ||
	    comm->joined.nlocal > 1 || comm->ncpu >= XMEM_LONE_MIN_CPUS);
}

/*
 * Place the buffers: zero copy when both are mccl_alloc memory, one copy
 * each way when the daemon reaches ours, else staged.
 */
static mccl_result_t
op_place(mccl_comm_t *comm, const struct op_args *a, size_t sb, size_t rb,
    struct ipc_op *m, struct mccl_request *r)
{
	struct lseg *ss = NULL, *rs = NULL;

	if (sb > 0)
		ss = seg_lookup(comm, a->send, sb, &m->send_off);
	if (rb > 0)
		rs = seg_lookup(comm, a->recv, rb, &m->recv_off);
	if ((sb == 0 || ss != NULL) && (rb == 0 || rs != NULL)) {
		m->send_seg = ss ? ss->id : 0;
		m->recv_seg = rs ? rs->id : 0;
		return MCCL_SUCCESS;
	}
	if (op_in_xmem(comm, a, rb)) {
		m->flags |= IPC_OP_XMEM;
		m->send_seg = m->recv_seg = 0;
		m->send_off = (uint64_t)(uintptr_t)a->send;
		m->recv_off = (uint64_t)(uintptr_t)a->recv;
		return MCCL_SUCCESS;
	}
	return op_stage(comm, a, sb, rb, m, r);
}

static void
pending_push(mccl_comm_t *comm, struct mccl_request *r)
{
	if (comm->pending_tail != NULL)
		comm->pending_tail->next = r;
	else
		comm->pending = r;
	comm->pending_tail = r;
}

static mccl_result_t
request_wait(struct mccl_request *r, uint64_t deadline_ms)
{
	mccl_comm_t *comm = r->comm;
	mccl_result_t rc;

	rc = comm_progress(comm, &r->done, deadline_ms);
	if (r->done)
		return r->code;
	if (rc == MCCL_ERR_TIMEOUT)
		comm_error(comm, rc, "op %llu not complete within the wait's "
		    "timeout", (unsigned long long)r->seq);
	else	/* the communicator failed: so did the request */
		request_complete(comm, r, rc);
	return rc;
}

/* The oldest collective still pending: it ends only after being taken. */
static struct mccl_request *
oldest_collective(const mccl_comm_t *comm)
{
	struct mccl_request *r;

	for (r = comm->pending; r != NULL && !r->collective; r = r->next)
		;
	return r;
}

/*
 * Put a collective's descriptor in the submission ring (ipc.h), once it
 * has a free slot, and wake the engine if it sleeps on the ring.  The wait
 * lets other threads submit: m gets its seq only once it has the slot.
 */
static mccl_result_t
ring_submit(mccl_comm_t *comm, struct ipc_op *m, uint64_t deadline_ms)
{
	struct ipc_doorbell *b = comm->bell;
	struct mccl_request *r;
	mccl_result_t rc;

	while (comm->sq_head - __atomic_load_n(&b->sq_tail, __ATOMIC_ACQUIRE) >=
	    IPC_SQ_SLOTS) {
		if ((r = oldest_collective(comm)) == NULL)
			return comm_break(comm, comm_error(comm,
			    MCCL_ERR_PROTOCOL, "the submission ring is full, "
			    "but no collective is pending"));
		rc = comm_progress(comm, &r->done, deadline_ms);
		if (rc == MCCL_ERR_TIMEOUT)
			return comm_error(comm, rc, "the submission ring stayed "
			    "full (%u collectives) until the op's deadline",
			    IPC_SQ_SLOTS);
		if (rc != MCCL_SUCCESS)
			return rc;
	}
	m->seq = comm->next_seq++;
	b->sq[comm->sq_head % IPC_SQ_SLOTS] = *m;
	comm->sq_head++;
	/* Dekker with the engine: it sets sq_sleeping, then reads sq_head. */
	__atomic_store_n(&b->sq_head, comm->sq_head, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&b->sq_sleeping, __ATOMIC_SEQ_CST) != 0) {
		__atomic_add_fetch(&b->sq_bell, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &b->sq_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
	}
	return MCCL_SUCCESS;
}

/* A v-collective's vector goes to a staging segment of its own. */
static mccl_result_t
op_vec(mccl_comm_t *comm, const struct op_args *a, struct ipc_op *m,
    struct mccl_request *r)
{
	size_t n = proto_vec_len(a->coll, (uint32_t)comm->nranks);

	if (n == 0)
		return MCCL_SUCCESS;
	if ((r->vstage = stage_get(comm, n * sizeof(uint64_t))) == NULL)
		return comm->failed ? comm->failed : MCCL_ERR_NO_MEMORY;
	r->vstage->busy = 1;
	memcpy(r->vstage->base, a->vec, n * sizeof(uint64_t));
	m->vec_seg = r->vstage->id;
	m->vec_off = 0;
	proto_vec_recv_blocks(a->coll, (uint32_t)comm->nranks,
	    (const uint64_t *)(void *)r->vstage->base, &r->out_counts,
	    &r->out_displs);
	r->out_esize = mccl_dtype_size(a->dtype);
	return MCCL_SUCCESS;
}

static mccl_result_t
op_submit(mccl_comm_t *comm, const struct op_args *a, size_t sb, size_t rb,
    mccl_request_t **req)
{
	struct mccl_request *r;
	struct ipc_op m;
	char err[ERRLEN];
	mccl_result_t rc;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return comm_error(comm, MCCL_ERR_NO_MEMORY, "out of memory");
	memset(&m, 0, sizeof(m));
	if ((rc = op_place(comm, a, sb, rb, &m, r)) != MCCL_SUCCESS) {
		free(r);
		return rc;
	}
	r->comm = comm;
	r->status = a->status;
	r->collective = !proto_coll_p2p(a->coll);
	r->deadline_ms = conn_now_ms() + comm->op_timeout_ms + DAEMON_MARGIN_MS;
	m.coll = a->coll;
	m.dtype = (uint8_t)a->dtype;
	m.redop = (uint8_t)a->redop;
	m.algo = comm->algo;
	if (proto_coll_reduces(a->coll) && a->dtype == MCCL_FLOAT32 &&
	    (a->redop == MCCL_SUM || a->redop == MCCL_AVG))
		m.wire = comm->wire;
	m.root = a->coll == COLL_RECV && a->root == MCCL_ANY_SOURCE ?
	    IPC_ANY_SOURCE : (uint32_t)a->root;
	m.count = a->count;
	m.timeout_ms = comm->op_timeout_ms;
	m.tag = a->tag == MCCL_ANY_TAG ? IPC_ANY_TAG : (uint32_t)a->tag;
	if (r->collective) {
		if ((rc = op_vec(comm, a, &m, r)) != MCCL_SUCCESS ||
		    (rc = ring_submit(comm, &m, r->deadline_ms)) !=
		    MCCL_SUCCESS) {
			request_unstage(r);
			free(r);
			return rc;
		}
		r->seq = m.seq;
		pending_push(comm, r);
	} else {
		r->seq = m.seq = comm->next_seq++;
		pending_push(comm, r);
		if ((rc = conn_send(comm->fd, IPC_OP, &m, NULL, 0, -1, err,
		    sizeof(err))) != MCCL_SUCCESS)
			comm_break(comm, comm_error(comm, rc, "%s", err));
	}
	if (req != NULL) {
		*req = r;
		return MCCL_SUCCESS;
	}
	rc = request_wait(r, r->deadline_ms);
	if (r->done)
		free(r);
	return rc;
}

/* A v-collective's vector, and the extents of its buffers from it. */
static mccl_result_t
op_check_vec(mccl_comm_t *comm, const struct op_args *a, size_t es,
    uint64_t *sb, uint64_t *rb)
{
	char err[ERRLEN];

	if (a->coll == COLL_ALLGATHERV && a->sendcount != a->vec[comm->rank])
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "sendcount "
		    "%zu, but recvcounts[%d] is %llu: they must be equal",
		    a->sendcount, comm->rank,
		    (unsigned long long)a->vec[comm->rank]);
	if (proto_vec_bytes(a->coll, a->count, es, (uint32_t)comm->nranks,
	    (uint32_t)comm->rank, a->vec, sb, rb, err, sizeof(err)) == -1)
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "%s", err);
	return MCCL_SUCCESS;
}

/* Check every argument; on failure comm->err says which and why. */
static mccl_result_t
op_check(mccl_comm_t *comm, const struct op_args *a, uint64_t *sb,
    uint64_t *rb)
{
	size_t es = mccl_dtype_size(a->dtype);
	mccl_result_t rc;

	if (comm->failed != MCCL_SUCCESS)
		return comm->failed;	/* comm->err still says why */
	if (a->coll != COLL_BARRIER && es == 0)
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "dtype %d is "
		    "not a valid mccl_dtype_t", (int)a->dtype);
	if (proto_coll_reduces(a->coll) && (unsigned)a->redop >= MCCL_NUM_OPS)
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "op %d is not "
		    "a valid mccl_op_t", (int)a->redop);
	if (proto_coll_reduces(a->coll) && a->redop == MCCL_AVG &&
	    a->dtype < MCCL_FLOAT16)
		return comm_error(comm, MCCL_ERR_UNSUPPORTED, "MCCL_AVG needs a "
		    "floating-point dtype, not an integer one");
	if (proto_coll_reduces(a->coll) && a->redop >= MCCL_BAND &&
	    a->dtype >= MCCL_FLOAT16)
		return comm_error(comm, MCCL_ERR_UNSUPPORTED, "%s needs an "
		    "integer dtype, not a floating-point one", a->redop ==
		    MCCL_BAND ? "MCCL_BAND" : a->redop == MCCL_BOR ? "MCCL_BOR" :
		    "MCCL_BXOR");
	if (proto_coll_has_root(a->coll) && (a->root < 0 ||
	    a->root >= comm->nranks) && !(a->coll == COLL_RECV &&
	    a->root == MCCL_ANY_SOURCE))
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "%s %d is "
		    "out of range for %d ranks", proto_coll_p2p(a->coll) ?
		    "peer" : "root", a->root, comm->nranks);
	if (proto_coll_p2p(a->coll) && a->tag < 0 &&
	    (a->tag != MCCL_ANY_TAG || a->coll == COLL_SEND))
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "tag %d: a "
		    "send needs a tag >= 0, a receive one >= 0 or MCCL_ANY_TAG",
		    a->tag);
	if (a->vec != NULL) {
		if ((rc = op_check_vec(comm, a, es, sb, rb)) != MCCL_SUCCESS)
			return rc;
	} else if (proto_op_bytes(a->coll, a->count, es,
	    (uint32_t)comm->nranks, (uint32_t)comm->rank, (uint32_t)a->root,
	    sb, rb) == -1 || *sb > SIZE_MAX / 2 || *rb > SIZE_MAX / 2)
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "count %zu "
		    "is too large", a->count);
	if ((*sb > 0 && a->send == NULL) || (*rb > 0 && a->recv == NULL))
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "%s is NULL "
		    "with count %zu", *sb > 0 && a->send == NULL ? "sendbuf" :
		    "recvbuf", a->count);
	if (!proto_bufs_ok(a->coll, (uint32_t)comm->rank,
	    (uintptr_t)a->send, *sb, (uintptr_t)a->recv, *rb))
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "sendbuf and "
		    "recvbuf overlap, but not in this collective's in-place "
		    "form%s", a->vec != NULL ? " (it has none)" : "");
	return MCCL_SUCCESS;
}

/* Refuse NULL and destroyed communicators. */
static mccl_result_t
comm_check(const mccl_comm_t *comm)
{
	if (comm == NULL) {
		snprintf(init_error, sizeof(init_error), "comm is NULL");
		return MCCL_ERR_INVALID_ARGUMENT;
	}
	if (comm->magic != COMM_MAGIC) {
		snprintf(init_error, sizeof(init_error), "communicator was "
		    "destroyed");
		return MCCL_ERR_INVALID_ARGUMENT;
	}
	return MCCL_SUCCESS;
}

/* Validate and run (or start) one operation. */
static mccl_result_t
op_start(mccl_comm_t *comm, const struct op_args *a, mccl_request_t **req)
{
	uint64_t sb, rb;
	mccl_result_t rc;

	if (req != NULL)
		*req = NULL;
	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	pthread_mutex_lock(&comm->lock);
	if ((rc = op_check(comm, a, &sb, &rb)) == MCCL_SUCCESS)
		rc = op_submit(comm, a, (size_t)sb, (size_t)rb, req);
	pthread_mutex_unlock(&comm->lock);
	return rc;
}

mccl_result_t
mccl_allreduce(const void *sendbuf, void *recvbuf, size_t count,
    mccl_dtype_t dtype, mccl_op_t op, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_ALLREDUCE, .dtype = dtype,
	    .redop = op, .count = count, .send = sendbuf, .recv = recvbuf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_broadcast(void *buf, size_t count, mccl_dtype_t dtype, int root,
    mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_BROADCAST, .dtype = dtype,
	    .root = root, .count = count, .send = buf, .recv = buf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_reduce(const void *sendbuf, void *recvbuf, size_t count,
    mccl_dtype_t dtype, mccl_op_t op, int root, mccl_comm_t *comm,
    mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_REDUCE, .dtype = dtype, .redop = op,
	    .root = root, .count = count, .send = sendbuf, .recv = recvbuf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
    mccl_dtype_t dtype, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_ALLGATHER, .dtype = dtype,
	    .count = sendcount, .send = sendbuf, .recv = recvbuf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
    mccl_dtype_t dtype, mccl_op_t op, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_REDUCE_SCATTER, .dtype = dtype,
	    .redop = op, .count = recvcount, .send = sendbuf,
	    .recv = recvbuf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_alltoall(const void *sendbuf, void *recvbuf, size_t count,
    mccl_dtype_t dtype, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_ALLTOALL, .dtype = dtype,
	    .count = count, .send = sendbuf, .recv = recvbuf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
    mccl_dtype_t dtype, int root, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_GATHER, .dtype = dtype, .root = root,
	    .count = sendcount, .send = sendbuf, .recv = recvbuf };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
    mccl_dtype_t dtype, int root, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_SCATTER, .dtype = dtype,
	    .root = root, .count = recvcount, .send = sendbuf,
	    .recv = recvbuf };

	return op_start(comm, &a, req);
}

/*
 * The vector of a v-collective from the caller's arrays of nranks each
 * (NULL arrays refused), and allgatherv's count, the sum of recvcounts.
 */
static mccl_result_t
vec_build(mccl_comm_t *comm, const size_t *const *arrays, int narrays,
    uint64_t **vec, size_t *sum)
{
	static const char *const names[] = { "the first", "the second",
	    "the third", "the fourth" };
	size_t n;

	*vec = NULL;
	if (comm_check(comm) != MCCL_SUCCESS)
		return MCCL_ERR_INVALID_ARGUMENT;
	n = (size_t)comm->nranks;
	for (int k = 0; k < narrays; k++)
		if (arrays[k] == NULL) {
			pthread_mutex_lock(&comm->lock);
			comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "%s count or "
			    "displacement array is NULL", names[k]);
			pthread_mutex_unlock(&comm->lock);
			return MCCL_ERR_INVALID_ARGUMENT;
		}
	if ((*vec = calloc(n * (size_t)narrays, sizeof(uint64_t))) == NULL)
		return MCCL_ERR_NO_MEMORY;
	*sum = 0;
	for (int k = 0; k < narrays; k++)
		for (size_t r = 0; r < n; r++)
			(*vec)[(size_t)k * n + r] = arrays[k][r];
	for (size_t r = 0; r < n; r++)	/* wraps only past what is checked */
		*sum += arrays[0][r];
	return MCCL_SUCCESS;
}

mccl_result_t
mccl_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
    const size_t *recvcounts, const size_t *displs, mccl_dtype_t dtype,
    mccl_comm_t *comm, mccl_request_t **req)
{
	const size_t *arrays[] = { recvcounts, displs };
	struct op_args a = { .coll = COLL_ALLGATHERV, .dtype = dtype,
	    .send = sendbuf, .recv = recvbuf, .sendcount = sendcount };
	uint64_t *vec;
	mccl_result_t rc;

	if (req != NULL)
		*req = NULL;
	if ((rc = vec_build(comm, arrays, 2, &vec, &a.count)) != MCCL_SUCCESS)
		return rc;
	a.vec = vec;
	rc = op_start(comm, &a, req);
	free(vec);
	return rc;
}

mccl_result_t
mccl_alltoallv(const void *sendbuf, const size_t *sendcounts,
    const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
    const size_t *rdispls, mccl_dtype_t dtype, mccl_comm_t *comm,
    mccl_request_t **req)
{
	const size_t *arrays[] = { sendcounts, sdispls, recvcounts, rdispls };
	struct op_args a = { .coll = COLL_ALLTOALLV, .dtype = dtype,
	    .send = sendbuf, .recv = recvbuf };
	uint64_t *vec;
	size_t unused;
	mccl_result_t rc;

	if (req != NULL)
		*req = NULL;
	if ((rc = vec_build(comm, arrays, 4, &vec, &unused)) != MCCL_SUCCESS)
		return rc;
	a.vec = vec;
	rc = op_start(comm, &a, req);
	free(vec);
	return rc;
}

mccl_result_t
mccl_send(const void *buf, size_t count, mccl_dtype_t dtype, int peer, int tag,
    mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_SEND, .dtype = dtype, .root = peer,
	    .count = count, .send = buf, .tag = tag };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_recv(void *buf, size_t count, mccl_dtype_t dtype, int peer, int tag,
    mccl_comm_t *comm, mccl_request_t **req)
{
	return mccl_recv_status(buf, count, dtype, peer, tag, NULL, comm, req);
}

mccl_result_t
mccl_recv_status(void *buf, size_t count, mccl_dtype_t dtype, int peer,
    int tag, mccl_status_t *status, mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_RECV, .dtype = dtype, .root = peer,
	    .count = count, .recv = buf, .tag = tag, .status = status };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_barrier(mccl_comm_t *comm, mccl_request_t **req)
{
	struct op_args a = { .coll = COLL_BARRIER, .dtype = MCCL_UINT8 };

	return op_start(comm, &a, req);
}

mccl_result_t
mccl_wait(mccl_request_t *req, int timeout_ms)
{
	mccl_comm_t *comm;
	mccl_result_t rc;
	uint64_t deadline;

	if (req == NULL)
		return MCCL_ERR_INVALID_ARGUMENT;
	comm = req->comm;
	deadline = timeout_ms < 0 ? req->deadline_ms : conn_now_ms() +
	    (uint64_t)timeout_ms;
	pthread_mutex_lock(&comm->lock);
	rc = request_wait(req, deadline);
	pthread_mutex_unlock(&comm->lock);
	if (req->done)
		free(req);
	return rc;
}

mccl_result_t
mccl_test(mccl_request_t *req, int *done)
{
	mccl_comm_t *comm;
	mccl_result_t rc;

	if (req == NULL || done == NULL)
		return MCCL_ERR_INVALID_ARGUMENT;
	comm = req->comm;
	pthread_mutex_lock(&comm->lock);
	rc = request_wait(req, conn_now_ms());
	pthread_mutex_unlock(&comm->lock);
	*done = req->done;
	if (!req->done)
		return rc == MCCL_ERR_TIMEOUT ? MCCL_SUCCESS : rc;
	free(req);
	return rc;
}

mccl_result_t
mccl_comm_set_timeout(mccl_comm_t *comm, int op_timeout_ms)
{
	mccl_result_t rc;

	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	pthread_mutex_lock(&comm->lock);
	if (op_timeout_ms < 0)
		rc = comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "op_timeout_ms "
		    "%d: must be 0 (the daemon's) or more", op_timeout_ms);
	else
		comm->op_timeout_ms = op_timeout_ms > 0 ?
		    (uint32_t)op_timeout_ms : comm->hello.op_timeout_ms;
	pthread_mutex_unlock(&comm->lock);
	return rc;
}

mccl_result_t
mccl_comm_set_wire_dtype(mccl_comm_t *comm, mccl_dtype_t wire)
{
	mccl_result_t rc;

	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	pthread_mutex_lock(&comm->lock);
	if (wire != MCCL_FLOAT32 && wire != MCCL_BFLOAT16 &&
	    wire != MCCL_FLOAT16)
		rc = comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "wire dtype "
		    "%d: must be MCCL_FLOAT32, MCCL_BFLOAT16 or MCCL_FLOAT16",
		    (int)wire);
	else
		comm->wire = wire == MCCL_FLOAT32 ? 0 : (uint8_t)wire;
	pthread_mutex_unlock(&comm->lock);
	return rc;
}

/*
 * The daemons' view of comm's job, as `mcclctl -j job NAME` prints it, on
 * a connection of its own: the communicator's stays free for its ops.
 */
static mccl_result_t
stats_query(mccl_comm_t *comm, struct ipc_msg *m, char **doc, size_t *len,
    char *err, size_t errlen)
{
	struct ipc_ctl req = { CTL_JOB };
	struct ipc_hello_ok ok;
	int fd, code = MCCL_ERR_CONNECT;
	mccl_result_t rc = MCCL_SUCCESS;

	if ((fd = conn_open(comm->path, STATS_TIMEOUT_MS, 0, &ok, &code, err,
	    errlen)) == -1)
		return (mccl_result_t)code;
	if ((rc = conn_send(fd, IPC_CTL, &req, comm->job, strlen(comm->job),
	    -1, err, errlen)) == MCCL_SUCCESS)
		rc = conn_recv_doc(fd, STATS_TIMEOUT_MS, m, doc, len, err,
		    errlen);
	close(fd);
	if (rc == MCCL_SUCCESS && *doc == NULL && m->hdr.type == IPC_ERROR) {
		snprintf(err, errlen, "%.*s", (int)m->trailer_len,
		    (const char *)m->trailer);
		rc = m->u.error.code < MCCL_NUM_RESULTS ?
		    (mccl_result_t)m->u.error.code : MCCL_ERR_PROTOCOL;
	} else if (rc == MCCL_SUCCESS && *doc == NULL) {
		snprintf(err, errlen, "the daemon answered %s", m->type->name);
		rc = MCCL_ERR_PROTOCOL;
	}
	return rc;
}

mccl_result_t
mccl_comm_stats(mccl_comm_t *comm, char *buf, size_t len)
{
	struct ipc_msg *m;
	char err[ERRLEN], *doc = NULL;
	size_t n = 0;
	mccl_result_t rc;

	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	snprintf(err, sizeof(err), "out of memory");
	if ((m = malloc(sizeof(*m))) == NULL)
		rc = MCCL_ERR_NO_MEMORY;
	else if ((rc = stats_query(comm, m, &doc, &n, err, sizeof(err))) ==
	    MCCL_SUCCESS && (buf == NULL || n >= len)) {
		snprintf(err, sizeof(err), "the job's stats take %zu bytes, "
		    "the buffer has %zu", n + 1, len);
		rc = MCCL_ERR_INVALID_ARGUMENT;
	} else if (rc == MCCL_SUCCESS)
		memcpy(buf, doc, n + 1);
	free(doc);
	free(m);
	if (rc != MCCL_SUCCESS) {
		pthread_mutex_lock(&comm->lock);
		comm_error(comm, rc, "stats: %s", err);
		pthread_mutex_unlock(&comm->lock);
	}
	return rc;
}

/* ---- abort and split ---- */

mccl_result_t
mccl_comm_abort(mccl_comm_t *comm)
{
	char err[ERRLEN];
	mccl_result_t rc;

	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	pthread_mutex_lock(&comm->lock);
	if (comm->failed == MCCL_SUCCESS)
		conn_send(comm->fd, IPC_ABORT, NULL, NULL, 0, -1, err,
		    sizeof(err));
	comm_error(comm, MCCL_ERR_ABORTED, "job %s: aborted by this rank (%d)",
	    comm->job, comm->rank);
	comm_break(comm, MCCL_ERR_ABORTED);
	pthread_mutex_unlock(&comm->lock);
	return MCCL_SUCCESS;
}

/* The new rank and size of this rank's color group, from all (color, key). */
static void
split_place(const int32_t *all, int nranks, int me, int *newrank, int *newsize)
{
	int color = all[2 * me], key = all[2 * me + 1];

	*newrank = 0;
	*newsize = 0;
	for (int r = 0; r < nranks; r++) {
		if (all[2 * r] != color)
			continue;
		(*newsize)++;
		if (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < me))
			(*newrank)++;
	}
}

mccl_result_t
mccl_comm_split(mccl_comm_t *comm, int color, int key, mccl_comm_t **newcomm)
{
	int32_t mine[2] = { color, key }, *all;
	char job[JOB_NAME_MAX];
	int newrank, newsize;
	mccl_result_t rc;

	if ((rc = comm_check(comm)) != MCCL_SUCCESS)
		return rc;
	if (newcomm == NULL)
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT,
		    "newcomm is NULL");
	*newcomm = NULL;
	if (color < 0 && color != MCCL_UNDEFINED)
		return comm_error(comm, MCCL_ERR_INVALID_ARGUMENT, "color %d: "
		    "must be >= 0 or MCCL_UNDEFINED", color);
	if ((all = calloc((size_t)comm->nranks, 2 * sizeof(int32_t))) == NULL)
		return comm_error(comm, MCCL_ERR_NO_MEMORY, "out of memory");
	rc = mccl_allgather(mine, all, 2, MCCL_INT32, comm, NULL);
	if (rc == MCCL_SUCCESS && color != MCCL_UNDEFINED) {
		split_place(all, comm->nranks, comm->rank, &newrank, &newsize);
		/* The parent's id is unique per formation: so is this name. */
		snprintf(job, sizeof(job), "%016llx.split%llu.%d",
		    (unsigned long long)comm->joined.job_id,
		    (unsigned long long)comm->nsplits, color);
		rc = mccl_comm_init(newcomm, job, newsize, newrank);
		if (rc != MCCL_SUCCESS)
			comm_error(comm, rc, "split: %s", mccl_last_error(NULL));
		else
			(*newcomm)->wire = comm->wire;	/* as its parent */
	}
	comm->nsplits++;
	free(all);
	return rc;
}
