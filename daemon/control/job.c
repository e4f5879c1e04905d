/*
 * job.c: jobs, from formation to failure (main thread).
 *
 * Formation: every process tells its local daemon "job J, rank r of n".
 * The daemon forwards its set of local ranks to the job's coordinator, a
 * node chosen by hashing (uid, J) over the cluster, so no address is ever
 * configured per job.  When the coordinator holds all n ranks it sends the
 * rank map to every node involved; each starts the job's engine, which opens
 * the data links, and answers its clients once the links are up.
 *
 * Operations: collectives go from the local ranks' submission rings to the
 * job's engine directly (subq.c); sends and receives come here as records
 * and go to the job's p2p thread (p2p.c).  What the threads hand back is
 * counted and freed here.  Any failure fails the whole job on every node
 * (PEER_ABORT) and reaches every local rank (IPC_JOB_FAILED), so no rank
 * is left waiting.
 */
#include <sys/random.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"

#define FORM_GRACE_MS	1000	/* the coordinator's timeout message first */

/* A job forming with this node as coordinator. */
struct coord {
	TAILQ_ENTRY(coord) entry;
	uid_t		 uid;
	char		 name[JOB_NAME_MAX];
	uint32_t	 nranks;
	uint32_t	*rank_node;	/* cluster node of each rank, or NONE */
	uint32_t	 nclaimed;
	uint32_t	 timeout_ms;
	struct event	*ev_timeout;
};

/* A data link that arrived before the job's rank map. */
struct early_link {
	TAILQ_ENTRY(early_link) entry;
	int		 fd;
	uint64_t	 job_id;
	uint32_t	 node;
	uint32_t	 stream;
	struct event	*ev_timeout;
};

#define NONE	UINT32_MAX
#define EARLY_LINKS_PER_NODE 64	/* data links of jobs not formed here yet */

static TAILQ_HEAD(, early_link) early_links =
    TAILQ_HEAD_INITIALIZER(early_links);

static void	job_fail(struct job *, int, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static void	job_recv_query(uint32_t, const struct peer_job_query *);
static int	job_recv_info(uint32_t, const struct peer_job_query *,
		    const uint8_t *, size_t);
static void	job_free(struct job *);
static void	job_engine_cb(int, short, void *);
static void	job_fail_clients(struct job *, enum job_state);
static void	job_reap(struct job *);

static const char *job_state_names[] = { "forming", "linking", "ready",
    "failed" };


static void
ms_to_tv(uint32_t ms, struct timeval *tv)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

static uint32_t
coordinator_of(uid_t uid, const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ uid;

	for (const char *p = name; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ULL;
	return (uint32_t)(h % md.conf.nnodes);
}

/* Jobs on this node; those c may see when c is not NULL. */
int
job_count(const struct client *c)
{
	struct job *j;
	int n = 0;

	TAILQ_FOREACH(j, &md.jobs, entry)
		n += c == NULL || client_sees(c, j->uid);
	return n;
}

static struct job *
job_find_forming(uid_t uid, const char *name)
{
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (j->state == JOB_FORMING && j->uid == uid &&
		    strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

static struct job *
job_find_id(uint64_t id)
{
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (j->id == id && id != 0)
			return j;
	return NULL;
}

/* ---- formation: the local side ---- */

static void
job_send_join(struct job *j)
{
	struct peer_join m;
	uint32_t *ranks;
	uint8_t *trailer;
	uint32_t n = 0;

	ranks = calloc(j->nlocal + 1, sizeof(*ranks));
	trailer = calloc(j->nlocal + 1, 4);
	if (ranks == NULL || trailer == NULL)
		goto out;
	for (uint32_t r = 0; j->state == JOB_FORMING && r < j->nranks &&
	    n < j->nlocal; r++)
		if (j->clients[r] != NULL)
			ranks[n++] = r;
	memset(&m, 0, sizeof(m));
	m.uid = (uint32_t)j->uid;
	m.nranks = j->nranks;
	m.node = md.conf.node_index;
	m.nlocal = n;
	m.timeout_ms = j->timeout_ms;
	wire_strlcpy(m.job, j->name, sizeof(m.job));
	wire_put_u32s(trailer, ranks, n);
	if (peer_send(j->coordinator, PEER_JOIN, &m, trailer, 4 * n) == -1)
		log_debug("job %s: coordinator %s not reachable yet", j->name,
		    peer_name(j->coordinator));
out:
	free(ranks);
	free(trailer);
}

static void
job_form_timeout_cb(int fd, short events, void *arg)
{
	struct job *j = arg;

	(void)fd;
	(void)events;
	job_fail(j, MCCL_ERR_TIMEOUT, "job %s: no rank map from coordinator "
	    "node %s within %u ms (%s)", j->name, peer_name(j->coordinator),
	    j->timeout_ms, peer_is_up(j->coordinator) ? "it is up" :
	    "it is unreachable");
}

static struct job *
job_new(const struct client *c, const struct ipc_join *m)
{
	struct job *j;
	struct timeval tv;

	if ((j = calloc(1, sizeof(*j))) == NULL ||
	    (j->clients = calloc(m->nranks, sizeof(*j->clients))) == NULL) {
		free(j);
		return NULL;
	}
	j->uid = c->uid;
	wire_strlcpy(j->name, m->job, sizeof(j->name));
	j->nranks = m->nranks;
	j->state = JOB_FORMING;
	j->timeout_ms = m->timeout_ms ? m->timeout_ms : md.conf.init_timeout_ms;
	j->coordinator = coordinator_of(j->uid, j->name);
	j->eng_abort_fd = -1;
	TAILQ_INIT(&j->eng_out);
	j->ev_timeout = evtimer_new(md.base, job_form_timeout_cb, j);
	ms_to_tv(j->timeout_ms > UINT32_MAX - FORM_GRACE_MS ? UINT32_MAX :
	    j->timeout_ms + FORM_GRACE_MS, &tv);
	evtimer_add(j->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&md.jobs, j, entry);
	log_debug("job %s (uid %u): forming, %u ranks, coordinator %s",
	    j->name, (unsigned)j->uid, j->nranks, peer_name(j->coordinator));
	return j;
}

static const char *
join_check(const struct client *c, const struct ipc_join *m, const struct job *j,
    char *err, size_t errlen)
{
	if (c->job != NULL)
		snprintf(err, errlen, "this connection is already rank %u of "
		    "job %s", c->rank, c->job->name);
	else if (c->joined)
		snprintf(err, errlen, "this connection was in a job: a "
		    "connection joins one job");

	else if (proto_job_name_check(m->job, err, errlen) == -1)
		;
	else if (m->nranks == 0 || m->nranks > PEER_RANKS_MAX)
		snprintf(err, errlen, "job %s: nranks %u is out of range "
		    "(1..%u)", m->job, m->nranks, PEER_RANKS_MAX);
	else if (m->rank >= m->nranks)
		snprintf(err, errlen, "job %s: rank %u is out of range for "
		    "nranks %u", m->job, m->rank, m->nranks);
	else if (j != NULL && j->nranks != m->nranks)
		snprintf(err, errlen, "job %s: rank %u says nranks is %u, but "
		    "ranks already joined said %u", m->job, m->rank, m->nranks,
		    j->nranks);
	else if (j != NULL && j->clients[m->rank] != NULL)
		snprintf(err, errlen, "job %s: rank %u is already held by "
		    "process %d on node %s", m->job, m->rank,
		    (int)j->clients[m->rank]->pid, md.conf.node_name);
	else if (c->bell == NULL)
		snprintf(err, errlen, "no doorbell: a connection registers its "
		    "doorbell (IPC_BELL) before it joins a job");
	else
		return NULL;
	return err;
}

static uint32_t
uid_jobs(uid_t uid)
{
	struct job *j;
	uint32_t n = 0;

	TAILQ_FOREACH(j, &md.jobs, entry)
		n += j->uid == uid;
	return n;
}

void
job_client_join(struct client *c, const struct ipc_join *m)
{
	struct job *j = job_find_forming(c->uid, m->job);
	char err[ERR_MAX];

	if (join_check(c, m, j, err, sizeof(err)) != NULL) {
		log_info("%s: %s", c->desc, err);
		client_error(c, MCCL_ERR_INVALID_ARGUMENT, IPC_JOIN, err);
		return;
	}
	if (j == NULL && uid_jobs(c->uid) >= md.conf.max_jobs_per_uid) {
		snprintf(err, sizeof(err), "job %s: uid %u already has %u jobs "
		    "on node %s (max_jobs_per_uid)", m->job, (unsigned)c->uid,
		    md.conf.max_jobs_per_uid, md.conf.node_name);
		log_info("%s", err);
		client_error(c, MCCL_ERR_NO_MEMORY, IPC_JOIN, err);
		return;
	}
	if (j == NULL && (j = job_new(c, m)) == NULL) {
		client_error(c, MCCL_ERR_NO_MEMORY, IPC_JOIN, "out of memory");
		return;
	}
	if (m->timeout_ms > j->timeout_ms)
		j->timeout_ms = m->timeout_ms;
	j->clients[m->rank] = c;
	j->nlocal++;
	c->job = j;
	c->joined = 1;
	c->rank = m->rank;
	log_info("job %s: rank %u of %u joined (%s)", j->name, m->rank,
	    j->nranks, c->desc);
	job_send_join(j);
}

/* ---- formation: the coordinator ---- */

static struct coord *
coord_find(uid_t uid, const char *name)
{
	struct coord *k;

	TAILQ_FOREACH(k, &md.coords, entry)
		if (k->uid == uid && strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

static void
coord_free(struct coord *k)
{
	TAILQ_REMOVE(&md.coords, k, entry);
	event_free(k->ev_timeout);
	free(k->rank_node);
	free(k);
}

static void
coord_send_fail(const struct coord *k, uint32_t node, uint32_t rank, int code,
    const char *msg)
{
	struct peer_join_fail f;

	memset(&f, 0, sizeof(f));
	f.uid = (uint32_t)k->uid;
	f.rank = rank;
	f.code = (uint32_t)code;
	wire_strlcpy(f.job, k->name, sizeof(f.job));
	peer_send(node, PEER_JOIN_FAIL, &f, msg, strnlen(msg, PEER_TEXT_MAX));
}

/* "2, 5, 7" (at most a line of) the ranks nobody claimed. */
static void
coord_missing(const struct coord *k, char *buf, size_t len)
{
	size_t pos = 0;

	buf[0] = '\0';
	for (uint32_t r = 0; r < k->nranks && pos + 16 < len; r++)
		if (k->rank_node[r] == NONE)
			pos += (size_t)snprintf(buf + pos, len - pos, "%s%u",
			    pos ? ", " : "", r);
	if (pos + 16 >= len)
		snprintf(buf + pos, len - pos, ", ...");
}

static void
coord_timeout_cb(int fd, short events, void *arg)
{
	struct coord *k = arg;
	char missing[128], msg[ERR_MAX];
	uint8_t *sent;

	(void)fd;
	(void)events;
	coord_missing(k, missing, sizeof(missing));
	snprintf(msg, sizeof(msg), "job %s: %u of %u ranks never joined "
	    "within %u ms: rank%s %s", k->name, k->nranks - k->nclaimed,
	    k->nranks, k->timeout_ms, k->nranks - k->nclaimed > 1 ? "s" : "",
	    missing);
	log_info("%s", msg);
	if ((sent = calloc(md.conf.nnodes, 1)) != NULL) {
		for (uint32_t r = 0; r < k->nranks; r++) {
			uint32_t n = k->rank_node[r];

			if (n != NONE && !sent[n]) {
				sent[n] = 1;
				coord_send_fail(k, n, PEER_ALL_RANKS,
				    MCCL_ERR_TIMEOUT, msg);
			}
		}
		free(sent);
	}
	coord_free(k);
}

static struct coord *
coord_new(const struct peer_join *m)
{
	struct coord *k;
	struct timeval tv;

	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->rank_node = malloc(m->nranks * sizeof(uint32_t))) == NULL) {
		free(k);
		return NULL;
	}
	k->uid = m->uid;
	wire_strlcpy(k->name, m->job, sizeof(k->name));
	k->nranks = m->nranks;
	for (uint32_t r = 0; r < k->nranks; r++)
		k->rank_node[r] = NONE;
	k->timeout_ms = m->timeout_ms;
	k->ev_timeout = evtimer_new(md.base, coord_timeout_cb, k);
	ms_to_tv(k->timeout_ms, &tv);
	evtimer_add(k->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&md.coords, k, entry);
	return k;
}

static void
coord_form(struct coord *k)
{
	struct peer_formed f;
	uint8_t *trailer, *sent;

	memset(&f, 0, sizeof(f));
	while (f.job_id == 0)
		if (getrandom(&f.job_id, sizeof(f.job_id), 0) != sizeof(f.job_id))
			f.job_id = ((uint64_t)rand() << 32) ^ (uint64_t)now_ns();
	f.uid = (uint32_t)k->uid;
	f.nranks = k->nranks;
	f.lanes = md.conf.streams_per_peer;
	wire_strlcpy(f.job, k->name, sizeof(f.job));
	trailer = malloc((size_t)k->nranks * 4);
	sent = calloc(md.conf.nnodes, 1);
	if (trailer != NULL && sent != NULL) {
		wire_put_u32s(trailer, k->rank_node, k->nranks);
		log_info("job %s: all %u ranks joined, id %016llx", k->name,
		    k->nranks, (unsigned long long)f.job_id);
		for (uint32_t r = 0; r < k->nranks; r++)
			if (!sent[k->rank_node[r]]) {
				sent[k->rank_node[r]] = 1;
				peer_send(k->rank_node[r], PEER_FORMED, &f,
				    trailer, (size_t)k->nranks * 4);
			}
	}
	free(trailer);
	free(sent);
	coord_free(k);
}

/* Replace node's claims with the ranks it just sent. */
static void
coord_claim(struct coord *k, uint32_t node, const uint32_t *ranks, uint32_t n)
{
	char msg[ERR_MAX];

	for (uint32_t r = 0; r < k->nranks; r++)
		if (k->rank_node[r] == node) {
			k->rank_node[r] = NONE;
			k->nclaimed--;
		}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t holder = k->rank_node[ranks[i]];

		if (holder == NONE) {
			k->rank_node[ranks[i]] = node;
			k->nclaimed++;
			continue;
		}
		snprintf(msg, sizeof(msg), "job %s: rank %u is already held by "
		    "a process on node %s", k->name, ranks[i], peer_name(holder));
		coord_send_fail(k, node, ranks[i], MCCL_ERR_INVALID_ARGUMENT,
		    msg);
	}
}

static int
coord_join(uint32_t from, const struct peer_join *m, const uint8_t *trailer,
    size_t tlen)
{
	struct coord *k = coord_find(m->uid, m->job);
	uint32_t *ranks;
	char msg[ERR_MAX];

	if (m->node != from || (uint64_t)tlen != (uint64_t)m->nlocal * 4 ||
	    m->nranks == 0 || m->nranks > PEER_RANKS_MAX ||
	    coordinator_of(m->uid, m->job) != md.conf.node_index)
		return -1;
	if ((ranks = calloc(m->nlocal + 1, sizeof(*ranks))) == NULL)
		return 0;
	wire_get_u32s(ranks, trailer, m->nlocal);
	for (uint32_t i = 0; i < m->nlocal; i++)
		if (ranks[i] >= m->nranks) {
			free(ranks);
			return -1;
		}
	if (k != NULL && k->nranks != m->nranks) {
		snprintf(msg, sizeof(msg), "job %s: the ranks on node %s say "
		    "nranks is %u, but ranks already joined said %u", m->job,
		    peer_name(from), m->nranks, k->nranks);
		coord_send_fail(k, from, PEER_ALL_RANKS,
		    MCCL_ERR_INVALID_ARGUMENT, msg);
	} else if (k != NULL || (m->nlocal > 0 && (k = coord_new(m)) != NULL)) {
		if (m->timeout_ms > k->timeout_ms)
			k->timeout_ms = m->timeout_ms;
		coord_claim(k, from, ranks, m->nlocal);
		if (k->nclaimed == k->nranks)
			coord_form(k);
		else if (k->nclaimed == 0)
			coord_free(k);
	}
	free(ranks);
	return 0;
}

/* ---- formation: the rank map arrives ---- */

/* Node order: the ranks of position 0, then of position 1, ... */
static int
job_slots(struct job *j)
{
	uint32_t slot = 0;

	j->rank_slot = calloc(j->nranks, sizeof(uint32_t));
	j->pos_first = calloc(j->nnodes, sizeof(uint32_t));
	j->pos_count = calloc(j->nnodes, sizeof(uint32_t));
	if (j->rank_slot == NULL || j->pos_first == NULL || j->pos_count == NULL)
		return -1;
	for (uint32_t r = 0; r < j->nranks; r++)
		j->pos_count[j->rank_pos[r]]++;
	for (uint32_t p = 0; p < j->nnodes; p++) {
		j->pos_first[p] = slot;
		slot += j->pos_count[p];
	}
	j->slots_are_ranks = 1;
	memset(j->pos_count, 0, j->nnodes * sizeof(uint32_t));
	for (uint32_t r = 0; r < j->nranks; r++) {
		uint32_t p = j->rank_pos[r];

		j->rank_slot[r] = j->pos_first[p] + j->pos_count[p]++;
		j->slots_are_ranks &= j->rank_slot[r] == r;
	}
	return 0;
}

static int
job_topology(struct job *j, const uint32_t *rank_node)
{
	uint32_t *pos_of = calloc(md.conf.nnodes, sizeof(uint32_t));
	uint32_t n = 0, l = 0;

	if (pos_of == NULL)
		return -1;
	for (uint32_t r = 0; r < j->nranks; r++)
		pos_of[rank_node[r]] = 1;
	for (uint32_t i = 0; i < md.conf.nnodes; i++)
		pos_of[i] = pos_of[i] ? n++ : NONE;
	j->nnodes = n;
	j->node_index = calloc(n, sizeof(uint32_t));
	j->names = calloc(n, sizeof(char *));
	j->rank_pos = calloc(j->nranks, sizeof(uint32_t));
	j->local_ranks = calloc(j->nlocal + 1, sizeof(uint32_t));
	if (j->node_index == NULL || j->names == NULL || j->rank_pos == NULL ||
	    j->local_ranks == NULL) {
		free(pos_of);
		return -1;
	}
	for (uint32_t i = 0; i < md.conf.nnodes; i++)
		if (pos_of[i] != NONE) {
			j->node_index[pos_of[i]] = i;
			j->names[pos_of[i]] = md.conf.nodes[i].name;
		}
	j->me = pos_of[md.conf.node_index];
	for (uint32_t r = 0; r < j->nranks; r++) {
		j->rank_pos[r] = pos_of[rank_node[r]];
		if (rank_node[r] == md.conf.node_index && j->clients[r] != NULL) {
			j->clients[r]->local_index = l;
			j->local_ranks[l++] = r;
		}
	}
	free(pos_of);
	if (l != j->nlocal)
		return -1;
	return job_slots(j);
}

static void
early_link_free(struct early_link *e, int close_fd)
{
	TAILQ_REMOVE(&early_links, e, entry);
	event_free(e->ev_timeout);
	if (close_fd)
		close(e->fd);
	free(e);
}

static void
job_adopt_early_links(struct job *j)
{
	struct early_link *e, *next;

	for (e = TAILQ_FIRST(&early_links); e != NULL; e = next) {
		next = TAILQ_NEXT(e, entry);
		if (e->job_id != j->id)
			continue;
		job_data_link(e->fd, &(struct peer_data_hello){ e->job_id,
		    e->node, e->stream });
		early_link_free(e, 0);
	}
}

static void
job_formed(const struct peer_formed *m, const uint32_t *rank_node)
{
	struct job *j = job_find_forming(m->uid, m->job);
	char err[ERR_MAX];

	if (j == NULL || j->nranks != m->nranks) {
		log_info("job %s: rank map for a job no longer here", m->job);
		return;
	}
	evtimer_del(j->ev_timeout);
	j->id = m->job_id;
	j->nlanes = m->lanes;
	j->state = JOB_LINKING;
	if (job_topology(j, rank_node) == -1) {
		job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: the rank map does "
		    "not match the ranks on node %s (one disconnected while "
		    "the job formed)", j->name, md.conf.node_name);
		return;
	}
	log_info("job %s: formed, id %016llx, %u ranks on %u nodes, %u here",
	    j->name, (unsigned long long)j->id, j->nranks, j->nnodes,
	    j->nlocal);
	/* The engine and p2p threads tell the main loop through ev_engine. */
	if ((j->ev_engine = event_new(md.base, -1, 0, job_engine_cb, j)) ==
	    NULL)
		snprintf(err, sizeof(err), "out of memory");
	if (j->ev_engine == NULL || p2p_init(j, err, sizeof(err)) == -1 ||
	    engine_start(j, err, sizeof(err)) == -1 ||
	    p2p_start(j, err, sizeof(err)) == -1) {
		job_fail(j, MCCL_ERR_INTERNAL, "job %s: %s", j->name, err);
		return;
	}
	job_adopt_early_links(j);
}

static int
job_recv_formed(const struct peer_formed *m, const uint8_t *trailer,
    size_t tlen)
{
	uint32_t *rank_node;

	if (m->nranks == 0 || m->nranks > PEER_RANKS_MAX ||
	    m->lanes == 0 || m->lanes > PEER_LANES_MAX ||
	    (uint64_t)tlen != (uint64_t)m->nranks * 4)
		return -1;
	if ((rank_node = malloc(tlen)) == NULL)
		return 0;
	wire_get_u32s(rank_node, trailer, m->nranks);
	for (uint32_t r = 0; r < m->nranks; r++)
		if (rank_node[r] >= md.conf.nnodes) {
			free(rank_node);
			return -1;
		}
	job_formed(m, rank_node);
	free(rank_node);
	return 0;
}

static void
job_recv_join_fail(const struct peer_join_fail *m, const char *msg)
{
	struct job *j = job_find_forming(m->uid, m->job);
	struct client *c;

	if (j == NULL)
		return;
	if (m->rank == PEER_ALL_RANKS) {
		job_fail(j, (int)m->code, "%s", msg);
		return;
	}
	if (m->rank >= j->nranks || (c = j->clients[m->rank]) == NULL)
		return;
	log_info("job %s: %s", j->name, msg);
	client_error(c, m->code, IPC_JOIN, msg);
	j->clients[m->rank] = NULL;
	j->nlocal--;
	c->job = NULL;
	if (j->nlocal == 0)
		job_free(j);
}

static int
job_spans(const struct job *j, uint32_t node)
{
	for (uint32_t p = 0; p < j->nnodes; p++)
		if (j->node_index[p] == node)
			return 1;
	return 0;
}

int
job_peer_msg(uint32_t from, uint16_t type, const void *msg,
    const uint8_t *trailer, size_t tlen)
{
	char text[PEER_TEXT_MAX + 1];
	struct job *j;

	snprintf(text, sizeof(text), "%.*s", (int)tlen, (const char *)trailer);
	switch (type) {
	case PEER_JOIN:
		return coord_join(from, msg, trailer, tlen);
	case PEER_FORMED:
		/* Only the job's coordinator speaks for its formation. */
		if (from != coordinator_of(((const struct peer_formed *)msg)->uid,
		    ((const struct peer_formed *)msg)->job))
			return -1;
		return job_recv_formed(msg, trailer, tlen);
	case PEER_JOIN_FAIL:
		if (from != coordinator_of(
		    ((const struct peer_join_fail *)msg)->uid,
		    ((const struct peer_join_fail *)msg)->job))
			return -1;
		job_recv_join_fail(msg, text);
		return 0;
	case PEER_JOB_QUERY:
		job_recv_query(from, msg);
		return 0;
	case PEER_JOB_INFO:
		return job_recv_info(from, msg, trailer, tlen);
	case PEER_ABORT:
		if ((j = job_find_id(((const struct peer_abort *)msg)->job_id)) &&
		    job_spans(j, from))
			job_fail(j, (int)((const struct peer_abort *)msg)->code,
			    "%s", text);
		return 0;
	}
	return -1;
}

/* ---- peers coming and going ---- */

void
job_peer_up(uint32_t node)
{
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (j->state == JOB_FORMING && j->coordinator == node)
			job_send_join(j);
}

void
job_peer_down(uint32_t node, const char *why)
{
	struct job *j, *next;
	struct coord *k, *knext;

	for (j = TAILQ_FIRST(&md.jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (j->state != JOB_FORMING && j->state != JOB_FAILED &&
		    job_spans(j, node))
			job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: node %s is "
			    "down: %s", j->name, peer_name(node), why);
		/* Its claims died with it: waiting out the init timeout
		   would only delay the same failure. */
		else if (j->state == JOB_FORMING && j->coordinator == node)
			job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: node %s, "
			    "which coordinates its formation, is down: %s",
			    j->name, peer_name(node), why);
	}
	for (k = TAILQ_FIRST(&md.coords); k != NULL; k = knext) {
		knext = TAILQ_NEXT(k, entry);
		coord_claim(k, node, NULL, 0);
		if (k->nclaimed == 0)
			coord_free(k);
	}
}

/* ---- data links ---- */

static void
early_link_timeout_cb(int fd, short events, void *arg)
{
	struct early_link *e = arg;

	(void)fd;
	(void)events;
	log_warnx("job %016llx: data link from node %s, but no such job "
	    "formed here", (unsigned long long)e->job_id, peer_name(e->node));
	early_link_free(e, 1);
}

static int
early_links_from(uint32_t node)
{
	struct early_link *e;
	int n = 0;

	TAILQ_FOREACH(e, &early_links, entry)
		n += e->node == node;
	return n;
}

void
job_data_link(int fd, const struct peer_data_hello *m)
{
	struct job *j = job_find_id(m->job_id);
	struct early_link *e;
	struct timeval tv;

	if (m->node >= md.conf.nnodes || m->node >= md.conf.node_index) {
		log_warnx("peer: data link claims node index %u: refused",
		    m->node);
		close(fd);
		return;
	}
	if (m->stream != PEER_STREAM_P2P &&
	    PEER_LANE_OF(m->stream) >= PEER_LANES_MAX) {
		log_warnx("peer: data link of unknown stream %u from node %s",
		    m->stream, peer_name(m->node));
		close(fd);
		return;
	}
	if (j != NULL) {
		for (uint32_t p = 0; p < j->nnodes; p++)
			if (j->node_index[p] == m->node &&
			    engine_adopt_link(j, p, m->stream ==
			    PEER_STREAM_P2P ? j->nlanes :
			    PEER_LANE_OF(m->stream), fd) == 0)
				return;
		log_warnx("job %s: unexpected data link from node %s", j->name,
		    peer_name(m->node));
		close(fd);
		return;
	}
	if (early_links_from(m->node) >= EARLY_LINKS_PER_NODE) {
		log_warnx("peer: node %s already has %d data links of jobs not "
		    "formed here: refusing one more (job %016llx)",
		    peer_name(m->node), EARLY_LINKS_PER_NODE,
		    (unsigned long long)m->job_id);
		close(fd);
		return;
	}
	if ((e = calloc(1, sizeof(*e))) == NULL) {
		close(fd);
		return;
	}
	e->fd = fd;
	e->job_id = m->job_id;
	e->node = m->node;
	e->stream = m->stream;
	e->ev_timeout = evtimer_new(md.base, early_link_timeout_cb, e);
	ms_to_tv(md.conf.connect_timeout_ms, &tv);
	evtimer_add(e->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&early_links, e, entry);
}

/* ---- operations ---- */

/*
 * An op has ended: count it, and answer a send or receive.  A collective
 * that ended well was answered through the doorbells; one that failed
 * failed the job, which told every rank (IPC_JOB_FAILED).
 */
static void
op_finish(struct op *op, int code, const char *err)
{
	struct job *j = op->job;

	if (proto_coll_p2p(op->desc.coll)) {
		struct client *c = j->clients[op->p2p_rank];

		for (uint32_t i = 0; i < j->nlocal; i++)
			if (op->parts[i].submitted && c != NULL)
				client_op_done(c, op, op->parts[i].req, code, err);
	}
	if (code == 0)
		j->ops_completed++;
	if (op->ready_ns != 0)
		metrics_op_done(op->desc.coll, op->algo_run, code,
		    now_ns() - op->ready_ns);
	op_free(op);
}

/* Fail the job because of this op, and answer it. */
static void
op_reject(struct client *c, const struct ipc_op *m, int code, const char *why)
{
	struct job *j = c->job;

	job_fail(j, code, "job %s: rank %u: op %llu (%s): %s", j->name, c->rank,
	    (unsigned long long)m->seq, proto_coll_name(m->coll), why);
	client_op_done(c, NULL, m->seq, j->code, j->err);
}

/* A send or recv: it involves this rank alone, so it starts at once. */
static void
job_p2p(struct client *c, const struct ipc_op *m)
{
	struct job *j = c->job;
	uint32_t ms = m->timeout_ms ? m->timeout_ms : md.conf.op_timeout_ms;
	char err[ERR_MAX];
	struct op *op;

	if (m->coll == COLL_SEND && m->tag == IPC_ANY_TAG) {
		op_reject(c, m, MCCL_ERR_INVALID_ARGUMENT, "a send needs a tag, "
		    "not MCCL_ANY_TAG");
		return;
	}
	if ((op = op_new(j)) == NULL) {
		op_reject(c, m, MCCL_ERR_NO_MEMORY, "out of memory");
		return;
	}
	op->desc = *m;
	op->p2p_rank = c->rank;
	if (op_attach(op, c->local_index, c->segs, c->rank, m, err,
	    sizeof(err)) == -1) {
		op_free(op);
		op_reject(c, m, MCCL_ERR_INVALID_ARGUMENT, err);
		return;
	}
	op->ready_ns = now_ns();
	op->deadline_ns = op->ready_ns + (uint64_t)ms * 1000000;
	p2p_submit(j, op);
}

/* Every IPC_OP gets exactly one IPC_OP_DONE, whatever happens. */
void
job_client_op(struct client *c, const struct ipc_op *m)
{
	struct job *j = c->job;
	char err[ERR_MAX];

	c->inflight++;
	if (j != NULL)
		job_collect(j);
	if (j == NULL || j->state == JOB_FORMING || j->state == JOB_LINKING) {
		client_op_done(c, NULL, m->seq, MCCL_ERR_INVALID_ARGUMENT,
		    "operation before the job was formed");
		return;
	}
	if (j->state == JOB_FAILED) {
		client_op_done(c, NULL, m->seq, j->code, j->err);
		return;
	}
	/* Collectives take seqs too, on the ring: they rise, with gaps. */
	if (m->seq <= c->last_seq) {
		snprintf(err, sizeof(err), "op %llu follows op %llu: seqs must "
		    "rise", (unsigned long long)m->seq,
		    (unsigned long long)c->last_seq);
		op_reject(c, m, MCCL_ERR_PROTOCOL, err);
		return;
	}
	c->last_seq = m->seq;
	if (c->inflight > md.conf.max_pending_ops) {
		snprintf(err, sizeof(err), "over the limit of %u operations in "
		    "flight (max_pending_ops)", md.conf.max_pending_ops);
		op_reject(c, m, MCCL_ERR_NO_MEMORY, err);
	} else if (j->nleft > 0)
		op_reject(c, m, MCCL_ERR_PEER_FAILED, "a rank on this node has "
		    "left the job");
	else if (op_check(j->nranks, m, err, sizeof(err)) != NULL)
		op_reject(c, m, MCCL_ERR_INVALID_ARGUMENT, err);
	else if (!proto_coll_p2p(m->coll))
		op_reject(c, m, MCCL_ERR_PROTOCOL, "a collective in an IPC_OP "
		    "record: collectives go through the submission ring");
	else
		job_p2p(c, m);
}

/* ---- the engine reports ---- */

static void
job_links_reported(struct job *j, int ok, int code, const char *err)
{
	struct ipc_joined m;

	if (!ok) {
		job_fail(j, code, "job %s: %s", j->name, err);
		return;
	}
	if (j->state != JOB_LINKING)
		return;
	j->state = JOB_READY;
	for (uint32_t i = 0; i < j->nlocal; i++) {
		struct client *c = j->clients[j->local_ranks[i]];

		if (c == NULL)
			continue;
		m = (struct ipc_joined){ j->id, j->nranks, c->rank, j->nnodes,
		    j->nlocal };
		client_send(c, IPC_JOINED, &m, NULL, 0);
	}
	log_info("job %s: ready", j->name);
	monitor_event("job_formed", &j->uid, json_pack("{s:s, s:i, s:i, s:i}",
	    "job", j->name, "uid", (int)j->uid, "nranks", (int)j->nranks,
	    "nnodes", (int)j->nnodes));
	mccld_status_update();
}

static void
job_engine_cb(int fd, short events, void *arg)
{
	struct job *j = arg;
	struct op_list done = TAILQ_HEAD_INITIALIZER(done);
	struct op *op;
	int links, code = 0, report;
	char err[ERR_MAX];

	(void)fd;
	(void)events;
	if (j->dying) {
		job_reap(j);
		return;
	}
	pthread_mutex_lock(&j->eng_mtx);
	TAILQ_CONCAT(&done, &j->eng_out, entry);
	links = j->eng_link_state;
	if ((report = links != 0 && !j->eng_links_reported)) {
		j->eng_links_reported = 1;
		code = j->eng_link_code;
		wire_strlcpy(err, j->eng_link_err, sizeof(err));
	}
	pthread_mutex_unlock(&j->eng_mtx);
	if (report)
		job_links_reported(j, links == 1, code, err);
	/*
	 * An op that ended well did, even if the job failed since: a send
	 * whose bytes the transport took before its peer died is answered
	 * as sent.  A failed one fails the job, and says the job's reason.
	 */
	while ((op = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, op, entry);
		if (op->code != 0)
			job_fail(j, op->code, "job %s: op %llu (%s): %s", j->name,
			    (unsigned long long)op->desc.seq,
			    proto_coll_name(op->desc.coll), op->err);
		op_finish(op, op->code != 0 ? j->code : 0, j->err);
	}
	if (j->state == JOB_FAILED && !j->fail_told)	/* the engine stopped */
		job_fail_clients(j, JOB_READY);
}

/*
 * Take what the engine handed back without waking us (engine_idle): before
 * anything that counts a client's operations in flight or shows them.
 */
void
job_collect(struct job *j)
{
	if (j->ev_engine != NULL)
		job_engine_cb(-1, 0, j);
}

void
job_collect_all(void)
{
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		job_collect(j);
}

/* ---- failure and departure ---- */

static void
job_tell_peers(struct job *j)
{
	struct peer_abort a = { j->id, (uint32_t)j->code, md.conf.node_index };

	for (uint32_t p = 0; p < j->nnodes; p++)
		if (p != j->me)
			peer_send(j->node_index[p], PEER_ABORT, &a, j->err,
			    strlen(j->err));
}

/*
 * Ranks still joining get the error as JOIN's answer.  Ranks of a formed
 * job get IPC_JOB_FAILED, which fails whatever they have pending, in their
 * rings or not yet submitted; but only once the engine has ended the op it
 * was running (eng_stopped): one that ended well is answered through the
 * doorbells before the failure, so a rank whose op completed on every
 * node is never told it failed.
 */
static void
job_fail_clients(struct job *j, enum job_state was)
{
	struct ipc_job_failed f = { (uint32_t)j->code };
	int stopped = 1;

	if (was != JOB_FORMING && was != JOB_LINKING && j->eng_running) {
		pthread_mutex_lock(&j->eng_mtx);
		stopped = j->eng_stopped || j->eng_exited;
		pthread_mutex_unlock(&j->eng_mtx);
	}
	if (!stopped || j->fail_told)
		return;
	j->fail_told = 1;
	for (uint32_t r = 0; r < j->nranks; r++) {
		if (j->clients[r] == NULL)
			continue;
		if (was == JOB_FORMING || was == JOB_LINKING)
			client_error(j->clients[r], (uint32_t)j->code, IPC_JOIN,
			    j->err);
		else
			client_send(j->clients[r], IPC_JOB_FAILED, &f, j->err,
			    strnlen(j->err, IPC_TEXT_MAX));
	}
}

/* Fail the job here and on every node of it; the first reason wins. */
static void
job_fail(struct job *j, int code, const char *fmt, ...)
{
	enum job_state was = j->state;
	uint64_t one = 1;
	va_list ap;

	if (was == JOB_FAILED)
		return;
	j->state = JOB_FAILED;
	j->code = code;
	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	log_warnx("%s", j->err);
	monitor_event("job_failed", &j->uid, json_pack("{s:s, s:i, s:s}",
	    "job", j->name, "uid", (int)j->uid, "reason", j->err));
	evtimer_del(j->ev_timeout);
	if (was == JOB_FORMING)
		job_send_join(j);	/* withdraws our ranks */
	if (j->id != 0)
		job_tell_peers(j);
	if (j->eng_running) {
		pthread_mutex_lock(&j->eng_mtx);
		__atomic_store_n(&j->eng_aborted, 1, __ATOMIC_RELEASE);
		subq_wake(j);
		pthread_mutex_unlock(&j->eng_mtx);
		if (write(j->eng_abort_fd, &one, sizeof(one)) == -1)
			log_warn("job %s: waking the engine", j->name);
	}
	job_fail_clients(j, was);
	mccld_status_update();
}

void
job_client_abort(struct client *c)
{
	if (c->job != NULL)
		job_fail(c->job, MCCL_ERR_ABORTED, "job %s: aborted by rank %u "
		    "(%s) on node %s", c->job->name, c->rank, c->desc,
		    md.conf.node_name);
}

/* Its threads are gone: free what is left of the job. */
static void
job_destroy(struct job *j)
{
	struct op *op;

	p2p_finish(j);
	engine_finish(j);
	subq_detach(j);
	while ((op = TAILQ_FIRST(&j->eng_out)) != NULL) {
		TAILQ_REMOVE(&j->eng_out, op, entry);
		op_free(op);
	}
	if (j->ev_engine != NULL)	/* an engine that never started */
		event_free(j->ev_engine);
	event_free(j->ev_timeout);
	free(j->clients);
	free(j->local_ranks);
	free(j->node_index);
	free(j->names);
	free(j->rank_pos);
	free(j->rank_slot);
	free(j->pos_first);
	free(j->pos_count);
	free(j);
}

/*
 * A dying job is destroyed once both of its threads have returned; each
 * wakes us (job_engine_cb) as it goes.  The main loop never waits for a
 * thread: one stuck connecting to a frozen node must not stall it.
 */
static void
job_reap(struct job *j)
{
	if (!p2p_exited(j) || !engine_exited(j))
		return;
	TAILQ_REMOVE(&md.dying, j, entry);
	job_destroy(j);
}

/* The daemon is exiting: wait for the threads (told to quit, and aborted). */
void
job_reap_all(void)
{
	struct job *j;

	while ((j = TAILQ_FIRST(&md.dying)) != NULL) {
		TAILQ_REMOVE(&md.dying, j, entry);
		job_destroy(j);
	}
}

static void
job_free(struct job *j)
{
	if (j->state == JOB_READY)
		monitor_event("job_finished", &j->uid, json_pack("{s:s, s:i, "
		    "s:I}", "job", j->name, "uid", (int)j->uid, "ops_completed",
		    (json_int_t)j->ops_completed));
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->clients[r] != NULL)
			j->clients[r]->job = NULL;
	TAILQ_REMOVE(&md.jobs, j, entry);
	evtimer_del(j->ev_timeout);
	j->dying = 1;
	TAILQ_INSERT_TAIL(&md.dying, j, entry);
	p2p_quit(j);
	engine_quit(j);
	job_reap(j);
	mccld_status_update();
}

/* A local rank detached: orderly (LEAVE) or not (its connection closed). */
void
job_client_gone(struct client *c, int orderly)
{
	struct job *j = c->job;

	if (j == NULL)
		return;
	job_collect(j);
	c->job = NULL;
	j->clients[c->rank] = NULL;
	if (j->state == JOB_FORMING) {
		log_info("job %s: rank %u left before the job formed", j->name,
		    c->rank);
		j->nlocal--;
		job_send_join(j);
		if (j->nlocal == 0)
			job_free(j);
		return;
	}
	if (j->sq != NULL) {	/* the engine stops waiting for it */
		__atomic_store_n(&j->sq[c->local_index].left, 1,
		    __ATOMIC_RELEASE);
		engine_wake(j);
	}
	if (!orderly || c->inflight > 0 || (j->sq != NULL &&
	    subq_pending(j, c->local_index)))
		job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: rank %u (%s) on node "
		    "%s %s", j->name, c->rank, c->desc, md.conf.node_name,
		    orderly ? "left with operations pending" :
		    "disconnected (process died?)");
	log_info("job %s: rank %u left", j->name, c->rank);
	if (++j->nleft == j->nlocal)
		job_free(j);
}

void
job_shutdown(const char *why)
{
	struct job *j, *next;

	for (j = TAILQ_FIRST(&md.jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		job_fail(j, MCCL_ERR_ABORTED, "job %s: mccld on node %s is "
		    "shutting down (%s)", j->name, md.conf.node_name, why);
	}
}

/* ---- mcclctl job NAME: every node's view, and a diagnosis ---- */

#define QUERY_MS	1000	/* for the other nodes to answer */

struct query {
	TAILQ_ENTRY(query) entry;
	uint32_t	 qid;
	struct client	*client;	/* mcclctl, waiting */
	uint64_t	 job_id;
	uint32_t	 waiting;	/* answers still to come */
	json_t		*nodes;		/* each node's answer, by position */
	json_t		*job;		/* name, id, state, ... */
	struct event	*ev_timeout;
};

static TAILQ_HEAD(, query) queries = TAILQ_HEAD_INITIALIZER(queries);
static uint32_t next_qid;

/* This node's part: its ranks and what they have done. */
static json_t *
job_snapshot(struct job *j)
{
	json_t *ranks = json_array(), *inflight = json_null();

	job_collect(j);
	for (uint32_t i = 0; i < j->nlocal; i++) {
		uint32_t r = j->local_ranks[i];
		struct client *c = j->clients[r];

		json_array_append_new(ranks, json_pack("{s:i, s:I, s:I, s:b}",
		    "rank", (int)r, "submitted", (json_int_t)(j->sq != NULL ?
		    subq_submitted(j, i) : 0),
		    "completed", (json_int_t)j->ops_completed, "connected",
		    c != NULL));
	}
	if (j->eng_running) {
		pthread_mutex_lock(&j->eng_mtx);
		if (j->eng_current != NULL)
			inflight = json_pack("{s:I, s:s}", "seq",
			    (json_int_t)j->eng_current->desc.seq, "coll",
			    proto_coll_name(j->eng_current->desc.coll));
		pthread_mutex_unlock(&j->eng_mtx);
	}
	return json_pack("{s:s, s:s, s:o, s:o, s:s?}", "node",
	    md.conf.node_name, "state", job_state_names[j->state], "ranks",
	    ranks, "in_flight", inflight, "error",
	    j->state == JOB_FAILED ? j->err : NULL);
}

static void
query_free(struct query *q)
{
	TAILQ_REMOVE(&queries, q, entry);
	event_free(q->ev_timeout);
	json_decref(q->nodes);
	json_decref(q->job);
	free(q);
}

static void
diag_add(json_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
diag_add(json_t *d, const char *fmt, ...)
{
	char line[ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	json_array_append_new(d, json_string(line));
}

/* Ranks behind the others, or gone; nodes that did not answer or fail. */
static json_t *
query_diagnose(const struct query *q)
{
	json_t *d = json_array(), *n, *r;
	json_int_t most = 0;
	size_t i, k;

	json_array_foreach(q->nodes, i, n)
		json_array_foreach(json_object_get(n, "ranks"), k, r)
			if (json_integer_value(json_object_get(r, "submitted")) >
			    most)
				most = json_integer_value(json_object_get(r,
				    "submitted"));
	json_array_foreach(q->nodes, i, n) {
		const char *node = json_string_value(json_object_get(n, "node"));

		if (json_object_get(n, "ranks") == NULL) {
			diag_add(d, "node %s did not answer: is it down? (see "
			    "mcclctl peers)", node);
			continue;
		}
		if (json_is_string(json_object_get(n, "error")))
			diag_add(d, "on node %s the job failed: %s", node,
			    json_string_value(json_object_get(n, "error")));
		json_array_foreach(json_object_get(n, "ranks"), k, r) {
			json_int_t sub = json_integer_value(json_object_get(r,
			    "submitted"));
			int rank = (int)json_integer_value(json_object_get(r,
			    "rank"));

			if (!json_is_true(json_object_get(r, "connected")))
				diag_add(d, "rank %d on node %s has left or died",
				    rank, node);
			else if (sub < most)
				diag_add(d, "rank %d on node %s is behind: it "
				    "submitted %lld collectives, others %lld",
				    rank, node, (long long)sub, (long long)most);
		}
	}
	if (json_array_size(d) == 0)
		diag_add(d, "no problem seen: every rank submitted %lld "
		    "collectives", (long long)most);
	return d;
}

static void
query_answer(struct query *q)
{
	struct ipc_ctl_reply r = { 0 };
	char *text;

	json_object_set_new(q->job, "nodes", json_incref(q->nodes));
	json_object_set_new(q->job, "diagnosis", query_diagnose(q));
	text = json_dumps(q->job, JSON_COMPACT);
	if (text == NULL || strlen(text) > IPC_MSG_MAX - WIRE_HDR_LEN - 4)
		client_error(q->client, MCCL_ERR_NO_MEMORY, IPC_CTL,
		    "reply too large");
	else
		client_send(q->client, IPC_CTL_REPLY, &r, text, strlen(text));
	free(text);
	query_free(q);
}

static void
query_timeout_cb(int fd, short events, void *arg)
{
	(void)fd;
	(void)events;
	query_answer(arg);
}

/* mcclctl job NAME: answered once every node of the job has, or at 1 s. */
int
job_ctl_query(struct client *c, const char *name, char *err, size_t errlen)
{
	struct peer_job_query m;
	struct timeval tv = { QUERY_MS / 1000, (QUERY_MS % 1000) * 1000 };
	struct query *q;
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (strcmp(j->name, name) == 0 && j->id != 0 &&
		    client_sees(c, j->uid))
			break;
	if (j == NULL) {
		snprintf(err, errlen, "no formed job named \"%s\" on node %s",
		    name, md.conf.node_name);
		return -1;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	q->qid = ++next_qid;
	q->client = c;
	q->job_id = j->id;
	q->nodes = json_array();
	q->job = json_pack("{s:s, s:i, s:i, s:s}", "name", j->name, "nranks",
	    (int)j->nranks, "nnodes", (int)j->nnodes, "state",
	    job_state_names[j->state]);
	json_object_set_new(q->job, "id", json_sprintf("%016llx",
	    (unsigned long long)j->id));
	m = (struct peer_job_query){ j->id, q->qid };
	for (uint32_t p = 0; p < j->nnodes; p++) {
		if (p == j->me)
			json_array_append_new(q->nodes, job_snapshot(j));
		else {
			json_array_append_new(q->nodes, json_pack("{s:s}",
			    "node", j->names[p]));
			if (peer_send(j->node_index[p], PEER_JOB_QUERY, &m, NULL,
			    0) == 0)
				q->waiting++;
		}
	}
	q->ev_timeout = evtimer_new(md.base, query_timeout_cb, q);
	TAILQ_INSERT_TAIL(&queries, q, entry);
	if (q->waiting == 0)
		query_answer(q);
	else
		evtimer_add(q->ev_timeout, &tv);
	return 0;
}

/* A client gone: forget what it was waiting for. */
void
job_ctl_forget(const struct client *c)
{
	struct query *q, *next;

	for (q = TAILQ_FIRST(&queries); q != NULL; q = next) {
		next = TAILQ_NEXT(q, entry);
		if (q->client == c)
			query_free(q);
	}
}

static void
job_recv_query(uint32_t from, const struct peer_job_query *m)
{
	struct job *j = job_find_id(m->job_id);
	json_t *snap;
	char *text;

	if (j == NULL || !job_spans(j, from))
		return;
	snap = job_snapshot(j);
	if ((text = json_dumps(snap, JSON_COMPACT)) != NULL &&
	    strlen(text) < PEER_MSG_MAX - 256)
		peer_send(from, PEER_JOB_INFO, m, text, strlen(text));
	free(text);
	json_decref(snap);
}

static int
job_recv_info(uint32_t from, const struct peer_job_query *m,
    const uint8_t *trailer, size_t tlen)
{
	struct job *j;
	struct query *q;
	json_t *snap;

	TAILQ_FOREACH(q, &queries, entry)
		if (q->qid == m->qid && q->job_id == m->job_id)
			break;
	if (q == NULL || (j = job_find_id(m->job_id)) == NULL)
		return 0;	/* late: the query timed out */
	if ((snap = json_loadb((const char *)trailer, tlen, 0, NULL)) == NULL ||
	    !json_is_object(snap))
		return -1;
	for (uint32_t p = 0; p < j->nnodes; p++)
		if (j->node_index[p] == from)
			json_array_set_new(q->nodes, p, snap);
	if (--q->waiting == 0) {
		evtimer_del(q->ev_timeout);
		query_answer(q);
	}
	return 0;
}

/* ---- mcclctl ---- */


static json_t *
job_ctl_one(struct job *j)
{
	json_t *ranks = json_array(), *inflight = json_null();
	char id[20];

	job_collect(j);
	snprintf(id, sizeof(id), "%016llx", (unsigned long long)j->id);
	for (uint32_t r = 0; r < j->nranks; r++)
		if (j->clients[r] != NULL)
			json_array_append_new(ranks, json_integer(r));
	if (j->eng_running) {
		pthread_mutex_lock(&j->eng_mtx);
		if (j->eng_current != NULL)
			inflight = json_pack("{s:I, s:s, s:I}", "seq",
			    (json_int_t)j->eng_current->desc.seq, "coll",
			    proto_coll_name(j->eng_current->desc.coll), "count",
			    (json_int_t)j->eng_current->desc.count);
		pthread_mutex_unlock(&j->eng_mtx);
	}
	return json_pack("{s:s, s:s, s:i, s:s, s:i, s:o, s:i, s:i, s:I, s:o, "
	    "s:s?}",
	    "name", j->name, "id", id, "uid", (int)j->uid,
	    "state", job_state_names[j->state], "nranks", (int)j->nranks,
	    "local_ranks", ranks, "nlocal", (int)(j->nlocal - j->nleft),
	    "nnodes", (int)j->nnodes, "ops_completed",
	    (json_int_t)j->ops_completed, "op_in_flight", inflight,
	    "error", j->state == JOB_FAILED ? j->err : NULL);
}

/* mcclctl abort NAME: fail every job of that name here and everywhere. */
json_t *
job_ctl_abort(const struct client *c, const char *name, char *err,
    size_t errlen)
{
	struct job *j, *next;
	int n = 0;

	for (j = TAILQ_FIRST(&md.jobs); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (strcmp(j->name, name) != 0 || j->state == JOB_FAILED)
			continue;
		job_fail(j, MCCL_ERR_ABORTED, "job %s: aborted by mcclctl "
		    "(uid %u) on node %s", j->name, (unsigned)c->uid,
		    md.conf.node_name);
		n++;
	}
	if (n == 0) {
		snprintf(err, errlen, "no running job named \"%s\" on node %s",
		    name, md.conf.node_name);
		return NULL;
	}
	return json_pack("{s:s, s:i}", "job", name, "aborted", n);
}

json_t *
job_ctl_list(const struct client *c)
{
	json_t *list = json_array();
	struct job *j;

	TAILQ_FOREACH(j, &md.jobs, entry)
		if (client_sees(c, j->uid))
			json_array_append_new(list, job_ctl_one(j));
	return json_pack("{s:o}", "jobs", list);
}
