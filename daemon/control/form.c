/*
 * form.c: a job's formation (main thread).
 *
 * Every process tells its local daemon "job J, rank r of n".  The daemon
 * forwards its set of local ranks to the job's coordinator, a node chosen
 * by hashing (uid, J) over the cluster, so no address is ever configured
 * per job.  When the coordinator holds all n ranks it sends the rank map to
 * every node involved; each starts the job's engine, which opens the data
 * links, and answers its clients once the links are up.  Data links that
 * arrive before the rank map wait here for it.
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
#include "control/job.h"
#include "engine/check.h"

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
	struct link_cost cost;		/* the worst of the joined nodes' */
	struct event	*ev_timeout;
	uint32_t	 creator;	/* the node whose join made it */
};
static TAILQ_HEAD(, coord) coords = TAILQ_HEAD_INITIALIZER(coords);

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

/*
 * Jobs forming here that each node's joins made, and whether its refusal
 * past max_forming_jobs_per_peer was logged (once, until its count is 0).
 */
static uint32_t	forming[CONF_NODES_MAX];
static uint8_t	forming_refused[CONF_NODES_MAX];

/* A job's formation timeout: the client's or peer's, within the daemon's. */
static uint32_t
form_timeout(uint32_t asked)
{
	uint32_t ms = asked ? asked : conf->init_timeout_ms;

	return ms < conf->max_init_timeout_ms ? ms :
	    conf->max_init_timeout_ms;
}

/* ---- formation: the local side ---- */

void
job_send_join(struct job *j)
{
	struct peer_join m;
	struct link_cost cost;
	uint32_t *ranks;
	uint8_t *trailer;
	uint32_t n = 0;

	ranks = calloc(j->comm.nlocal + 1, sizeof(*ranks));
	trailer = calloc(j->comm.nlocal + 1, 4);
	if (ranks == NULL || trailer == NULL)
		goto out;
	for (uint32_t r = 0; j->state == JOB_FORMING && r < j->comm.nranks &&
	    n < j->comm.nlocal; r++)
		if (j->clients[r] != NULL)
			ranks[n++] = r;
	memset(&m, 0, sizeof(m));
	m.uid = (uint32_t)j->comm.uid;
	m.nranks = j->comm.nranks;
	m.node = conf->node_index;
	m.nlocal = n;
	m.timeout_ms = j->timeout_ms;
	wire_strlcpy(m.job, j->comm.name, sizeof(m.job));
	linkcost_mine(j->comm.uid, &cost);
	m.alpha_ns = cost.alpha_ns;
	m.beta_ps = cost.beta_ps;
	m.gamma_ps = cost.gamma_ps;
	m.beta_pair_ps = cost.beta_pair_ps;
	wire_put_u32s(trailer, ranks, n);
	if (peer_send(j->coordinator, PEER_JOIN, &m, trailer, 4 * n) == -1)
		log_debug("job %s: coordinator %s not reachable yet", j->comm.name,
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
	    "node %s within %u ms (%s)", j->comm.name, peer_name(j->coordinator),
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
	j->comm.uid = c->uid;
	wire_strlcpy(j->comm.name, m->job, sizeof(j->comm.name));
	j->comm.nranks = m->nranks;
	j->state = JOB_FORMING;
	j->timeout_ms = form_timeout(m->timeout_ms);
	j->coordinator = coordinator_of(j->comm.uid, j->comm.name);
	j->ev_timeout = evtimer_new(ctl_base, job_form_timeout_cb, j);
	ms_to_tv(j->timeout_ms > UINT32_MAX - FORM_GRACE_MS ? UINT32_MAX :
	    j->timeout_ms + FORM_GRACE_MS, &tv);
	evtimer_add(j->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&jobs, j, entry);
	job_watch_start();
	log_debug("job %s (uid %u): forming, %u ranks, coordinator %s",
	    j->comm.name, (unsigned)j->comm.uid, j->comm.nranks, peer_name(j->coordinator));
	return j;
}

static const char *
join_check(const struct client *c, const struct ipc_join *m, const struct job *j,
    char *err, size_t errlen)
{
	if (c->job != NULL)
		snprintf(err, errlen, "this connection is already rank %u of "
		    "job %s", c->rank, c->job->comm.name);
	else if (c->joined)
		snprintf(err, errlen, "this connection was in a job: a "
		    "connection joins one job");

	else if (proto_job_name_check(m->job, err, errlen) == -1)
		;
	else if (m->nranks == 0 || m->nranks > conf->max_ranks_per_job)
		snprintf(err, errlen, "job %s: nranks %u is out of range "
		    "(1..%u, max_ranks_per_job)", m->job, m->nranks,
		    conf->max_ranks_per_job);
	else if (m->rank >= m->nranks)
		snprintf(err, errlen, "job %s: rank %u is out of range for "
		    "nranks %u", m->job, m->rank, m->nranks);
	else if (j != NULL && j->comm.nranks != m->nranks)
		snprintf(err, errlen, "job %s: rank %u says nranks is %u, but "
		    "ranks already joined said %u", m->job, m->rank, m->nranks,
		    j->comm.nranks);
	else if (j != NULL && j->clients[m->rank] != NULL)
		snprintf(err, errlen, "job %s: rank %u is already held by "
		    "process %d on node %s", m->job, m->rank,
		    (int)j->clients[m->rank]->pid, conf->node_name);
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

	TAILQ_FOREACH(j, &jobs, entry)
		n += j->comm.uid == uid;
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
	if (j == NULL && uid_jobs(c->uid) >= conf->max_jobs_per_uid) {
		snprintf(err, sizeof(err), "job %s: uid %u already has %u jobs "
		    "on node %s (max_jobs_per_uid)", m->job, (unsigned)c->uid,
		    conf->max_jobs_per_uid, conf->node_name);
		log_info("%s", err);
		client_error(c, MCCL_ERR_NO_MEMORY, IPC_JOIN, err);
		return;
	}
	if (j == NULL && (j = job_new(c, m)) == NULL) {
		client_error(c, MCCL_ERR_NO_MEMORY, IPC_JOIN, "out of memory");
		return;
	}
	if (form_timeout(m->timeout_ms) > j->timeout_ms)
		j->timeout_ms = form_timeout(m->timeout_ms);
	j->clients[m->rank] = c;
	j->comm.nlocal++;
	c->job = j;
	c->joined = 1;
	c->rank = m->rank;
	log_info("job %s: rank %u of %u joined (%s)", j->comm.name, m->rank,
	    j->comm.nranks, c->desc);
	job_send_join(j);
}

/* ---- formation: the coordinator ---- */

static struct coord *
coord_find(uid_t uid, const char *name)
{
	struct coord *k;

	TAILQ_FOREACH(k, &coords, entry)
		if (k->uid == uid && strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

static void
coord_free(struct coord *k)
{
	if (k->creator < CONF_NODES_MAX && --forming[k->creator] == 0)
		forming_refused[k->creator] = 0;
	TAILQ_REMOVE(&coords, k, entry);
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
	if ((sent = calloc(conf->nnodes, 1)) != NULL) {
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
coord_new(uint32_t from, const struct peer_join *m)
{
	struct coord *k;
	struct timeval tv;

	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->rank_node = malloc(m->nranks * sizeof(uint32_t))) == NULL) {
		free(k);
		return NULL;
	}
	k->creator = from;
	forming[from]++;
	k->uid = m->uid;
	wire_strlcpy(k->name, m->job, sizeof(k->name));
	k->nranks = m->nranks;
	for (uint32_t r = 0; r < k->nranks; r++)
		k->rank_node[r] = NONE;
	k->timeout_ms = form_timeout(m->timeout_ms);
	k->ev_timeout = evtimer_new(ctl_base, coord_timeout_cb, k);
	ms_to_tv(k->timeout_ms, &tv);
	evtimer_add(k->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&coords, k, entry);
	return k;
}

/* Jobs forming with this node as their coordinator. */
int
coord_count(void)
{
	struct coord *k;
	int n = 0;

	TAILQ_FOREACH(k, &coords, entry)
		n++;
	return n;
}

/*
 * The links per pair of nodes a job formed now gets.  auto: one per four
 * cores, 2 to 4: each lane of a large allreduce is a thread of its own
 * (copies, reductions and TCP), and measured on 16 cores, 4 of them
 * filled a 40 Gbit/s link where 2 reached 0.7 of it; a small machine
 * keeps cores for the application.
 */
uint32_t
job_lanes_max(void)
{
	long ncpu;

	if (conf->streams_per_peer != STREAMS_AUTO)
		return conf->streams_per_peer;
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	return ncpu >= 16 ? 4 : ncpu >= 12 ? 3 : 2;
}

/*
 * The lanes of a job formed now: streams_per_peer if set, else auto's, by
 * the cores, and no more than the job's link needs (algo_lanes).
 */
static uint32_t
job_lanes(const struct link_cost *cost)
{
	uint32_t most = job_lanes_max();

	if (conf->streams_per_peer != STREAMS_AUTO)
		return most;
	return algo_lanes(cost, most);
}

static void
coord_form(struct coord *k)
{
	struct peer_formed f;
	uint8_t *trailer, *sent;

	memset(&f, 0, sizeof(f));
	while (f.job_id == 0) {
		if (getrandom(&f.job_id, sizeof(f.job_id), 0) != sizeof(f.job_id))
			f.job_id = ((uint64_t)rand() << 32) ^ (uint64_t)now_ns();
		f.job_id &= ~PEER_CHECK_JOB;	/* mcclctl check's links */
	}
	f.uid = (uint32_t)k->uid;
	f.nranks = k->nranks;
	f.lanes = job_lanes(&k->cost);
	f.alpha_ns = k->cost.alpha_ns;
	f.beta_ps = k->cost.beta_ps;
	f.gamma_ps = k->cost.gamma_ps;
	f.beta_pair_ps = k->cost.beta_pair_ps;
	wire_strlcpy(f.job, k->name, sizeof(f.job));
	trailer = malloc((size_t)k->nranks * 4);
	sent = calloc(conf->nnodes, 1);
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

/*
 * What one node's joins may hold here: jobs of at most max_ranks_per_job
 * ranks, at most max_forming_jobs_per_peer of them forming at once (so
 * at most their product of 4-byte rank map entries).  A refusal fails the
 * job on that node, saying why, and is logged once per node.
 */
static int
coord_refused(uint32_t from, const struct peer_join *m)
{
	struct coord fake;
	char msg[ERR_MAX];

	if (m->nranks <= conf->max_ranks_per_job &&
	    forming[from] < conf->max_forming_jobs_per_peer)
		return 0;
	if (m->nranks > conf->max_ranks_per_job)
		snprintf(msg, sizeof(msg), "job %s: %u ranks, more than the %u "
		    "of coordinator node %s's max_ranks_per_job", m->job,
		    m->nranks, conf->max_ranks_per_job, conf->node_name);
	else
		snprintf(msg, sizeof(msg), "job %s: node %s already has %u "
		    "jobs forming at coordinator node %s "
		    "(max_forming_jobs_per_peer)", m->job, peer_name(from),
		    forming[from], conf->node_name);
	if (!forming_refused[from]) {
		forming_refused[from] = 1;
		log_warnx("peer: node %s: %s; further refusals of its jobs are "
		    "not logged while it has jobs forming", peer_name(from), msg);
	}
	memset(&fake, 0, sizeof(fake));
	fake.uid = m->uid;
	wire_strlcpy(fake.name, m->job, sizeof(fake.name));
	coord_send_fail(&fake, from, PEER_ALL_RANKS, MCCL_ERR_NO_MEMORY, msg);
	return 1;
}

int
coord_join(uint32_t from, const struct peer_join *m, const uint8_t *trailer,
    size_t tlen)
{
	struct coord *k = coord_find(m->uid, m->job);
	uint32_t *ranks;
	char msg[ERR_MAX];

	if (m->node != from || (uint64_t)tlen != (uint64_t)m->nlocal * 4 ||
	    m->nranks == 0 || m->nranks > PEER_RANKS_MAX ||
	    coordinator_of(m->uid, m->job) != conf->node_index)
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
	} else if (k == NULL && m->nlocal > 0 && coord_refused(from, m)) {
		;
	} else if (k != NULL || (m->nlocal > 0 &&
	    (k = coord_new(from, m)) != NULL)) {
		struct link_cost c = { m->alpha_ns, m->beta_ps, m->gamma_ps,
		    m->beta_pair_ps };

		if (form_timeout(m->timeout_ms) > k->timeout_ms)
			k->timeout_ms = form_timeout(m->timeout_ms);
		linkcost_worst(&k->cost, &c);
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

	j->comm.rank_slot = calloc(j->comm.nranks, sizeof(uint32_t));
	j->comm.pos_first = calloc(j->comm.nnodes, sizeof(uint32_t));
	j->comm.pos_count = calloc(j->comm.nnodes, sizeof(uint32_t));
	if (j->comm.rank_slot == NULL || j->comm.pos_first == NULL || j->comm.pos_count == NULL)
		return -1;
	for (uint32_t r = 0; r < j->comm.nranks; r++)
		j->comm.pos_count[j->comm.rank_pos[r]]++;
	for (uint32_t p = 0; p < j->comm.nnodes; p++) {
		j->comm.pos_first[p] = slot;
		slot += j->comm.pos_count[p];
	}
	j->comm.slots_are_ranks = 1;
	memset(j->comm.pos_count, 0, j->comm.nnodes * sizeof(uint32_t));
	for (uint32_t r = 0; r < j->comm.nranks; r++) {
		uint32_t p = j->comm.rank_pos[r];

		j->comm.rank_slot[r] = j->comm.pos_first[p] + j->comm.pos_count[p]++;
		j->comm.slots_are_ranks &= j->comm.rank_slot[r] == r;
	}
	return 0;
}

static int
job_topology(struct job *j, const uint32_t *rank_node)
{
	uint32_t *pos_of = calloc(conf->nnodes, sizeof(uint32_t));
	uint32_t n = 0, l = 0;

	if (pos_of == NULL)
		return -1;
	for (uint32_t r = 0; r < j->comm.nranks; r++)
		pos_of[rank_node[r]] = 1;
	for (uint32_t i = 0; i < conf->nnodes; i++)
		pos_of[i] = pos_of[i] ? n++ : NONE;
	j->comm.nnodes = n;
	j->comm.node_index = calloc(n, sizeof(uint32_t));
	j->comm.names = calloc(n, sizeof(char *));
	j->comm.conf.nodes = calloc(n, sizeof(struct conf_node));
	j->comm.rank_pos = calloc(j->comm.nranks, sizeof(uint32_t));
	j->comm.local_ranks = calloc(j->comm.nlocal + 1, sizeof(uint32_t));
	if (j->comm.node_index == NULL || j->comm.names == NULL || j->comm.conf.nodes ==
	    NULL || j->comm.rank_pos == NULL || j->comm.local_ranks == NULL) {
		free(pos_of);
		return -1;
	}
	for (uint32_t i = 0; i < conf->nnodes; i++)
		if (pos_of[i] != NONE) {
			j->comm.node_index[pos_of[i]] = i;
			j->comm.conf.nodes[pos_of[i]] = conf->nodes[i];
			j->comm.names[pos_of[i]] = j->comm.conf.nodes[pos_of[i]].name;
		}
	j->comm.me = pos_of[conf->node_index];
	for (uint32_t r = 0; r < j->comm.nranks; r++) {
		j->comm.rank_pos[r] = pos_of[rank_node[r]];
		if (rank_node[r] == conf->node_index && j->clients[r] != NULL) {
			j->clients[r]->local_index = l;
			j->comm.local_ranks[l++] = r;
		}
	}
	free(pos_of);
	if (l != j->comm.nlocal)
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
		if (e->job_id != j->comm.id)
			continue;
		job_data_link(e->fd, &(struct peer_data_hello){ e->job_id,
		    e->node, e->stream });
		early_link_free(e, 0);
	}
}

/*
 * What the job's threads read of the settings, as they are now: their
 * copy, before any starts (the job's nodes are job_topology's).
 */
static void
job_settings(struct job *j)
{
	job_tunables(&j->comm.conf.tun);
	j->comm.conf.chunk_bytes = conf->chunk_bytes;
	j->comm.conf.node_index = conf->node_index;
	wire_strlcpy(j->comm.conf.node_name, conf->node_name,
	    sizeof(j->comm.conf.node_name));
}

/* The engine, on the local ranks' rings and segments. */
static int
job_engine_start(struct job *j, char *err, size_t errlen)
{
	struct engine_rank *ranks;
	int rc;

	if ((ranks = calloc(j->comm.nlocal, sizeof(*ranks))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < j->comm.nlocal; i++) {
		const struct client *c = j->clients[j->comm.local_ranks[i]];

		if (c == NULL) {
			snprintf(err, errlen, "rank %u has gone",
			    j->comm.local_ranks[i]);
			free(ranks);
			return -1;
		}
		ranks[i] = (struct engine_rank){ c->rank, c->bell, c->segs };
	}
	rc = engine_start(&j->comm, ranks, err, errlen);
	free(ranks);
	return rc;
}

/* What AUTO runs for coll between the job's nodes, by size (debug). */
static void
log_auto(const struct job *j, int coll)
{
	struct algo_range r[ALGO_RANGES_MAX];
	size_t n = algo_auto_ranges(coll, j->comm.nnodes, &j->comm.cost, r,
	    ALGO_RANGES_MAX), off = 0;
	char line[512] = "";

	for (size_t i = 0; i < n && off < sizeof(line); i++)
		off += (size_t)(r[i].up_to == SIZE_MAX ? snprintf(line + off,
		    sizeof(line) - off, "%s%s above", i ? ", " : "",
		    proto_algo_name(r[i].algo)) : snprintf(line + off,
		    sizeof(line) - off, "%s%s to %zu B", i ? ", " : "",
		    proto_algo_name(r[i].algo), r[i].up_to));
	if (n > 0)
		log_debug("job %s: %s between nodes: %s", j->comm.name,
		    proto_coll_name(coll), line);
}

static void
job_formed(const struct peer_formed *m, const uint32_t *rank_node)
{
	struct job *j = job_find_forming(m->uid, m->job);
	char err[ERR_MAX];

	if (j == NULL || j->comm.nranks != m->nranks) {
		log_info("job %s: rank map for a job no longer here", m->job);
		return;
	}
	evtimer_del(j->ev_timeout);
	j->comm.id = m->job_id;
	j->comm.nlanes = m->lanes;
	j->comm.cost = (struct link_cost){ m->alpha_ns, m->beta_ps, m->gamma_ps,
	    m->beta_pair_ps };
	j->state = JOB_LINKING;
	if (job_topology(j, rank_node) == -1) {
		job_fail(j, MCCL_ERR_PEER_FAILED, "job %s: the rank map does "
		    "not match the ranks on node %s (one disconnected while "
		    "the job formed)", j->comm.name, conf->node_name);
		return;
	}
	job_settings(j);
	log_info("job %s: formed, id %016llx, %u ranks on %u nodes, %u here",
	    j->comm.name, (unsigned long long)j->comm.id, j->comm.nranks, j->comm.nnodes,
	    j->comm.nlocal);
	log_debug("job %s: link cost %u ns a message, %u ps a byte sent by "
	    "the ring, %u by the others, %u reduced", j->comm.name,
	    j->comm.cost.alpha_ns, j->comm.cost.beta_ps, j->comm.cost.beta_pair_ps,
	    j->comm.cost.gamma_ps);
	log_auto(j, COLL_ALLREDUCE);
	log_auto(j, COLL_BROADCAST);
	/* The engine and p2p threads tell the main loop through ev_engine. */
	if ((j->comm.ev_engine = event_new(ctl_base, -1, 0, job_engine_cb, j)) ==
	    NULL)
		snprintf(err, sizeof(err), "out of memory");
	if (j->comm.ev_engine == NULL || p2p_init(&j->comm, err, sizeof(err)) == -1 ||
	    job_engine_start(j, err, sizeof(err)) == -1 ||
	    p2p_start(&j->comm, err, sizeof(err)) == -1) {
		job_fail(j, MCCL_ERR_INTERNAL, "job %s: %s", j->comm.name, err);
		return;
	}
	job_adopt_early_links(j);
}

int
job_recv_formed(const struct peer_formed *m, const uint8_t *trailer,
    size_t tlen)
{
	uint32_t *rank_node;

	if (m->nranks == 0 || m->nranks > PEER_RANKS_MAX ||
	    m->lanes == 0 || m->lanes > PEER_LANES_MAX ||
	    m->alpha_ns == 0 || m->beta_ps == 0 || m->gamma_ps == 0 ||
	    m->beta_pair_ps == 0 ||
	    (uint64_t)tlen != (uint64_t)m->nranks * 4)
		return -1;
	if ((rank_node = malloc(tlen)) == NULL)
		return 0;
	wire_get_u32s(rank_node, trailer, m->nranks);
	for (uint32_t r = 0; r < m->nranks; r++)
		if (rank_node[r] >= conf->nnodes) {
			free(rank_node);
			return -1;
		}
	job_formed(m, rank_node);
	free(rank_node);
	return 0;
}

void
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
	if (m->rank >= j->comm.nranks || (c = j->clients[m->rank]) == NULL)
		return;
	log_info("job %s: %s", j->comm.name, msg);
	client_error(c, m->code, IPC_JOIN, msg);
	j->clients[m->rank] = NULL;
	j->comm.nlocal--;
	c->job = NULL;
	if (j->comm.nlocal == 0)
		job_free(j);
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

/* Cluster node `node`, for the engine's end of a check link to it. */
void
check_peer_of(uint32_t node, struct check_peer *p)
{
	const struct conf_node *n = &conf->nodes[node];

	*p = (struct check_peer){ .node = node, .addr = n->addr,
	    .me_index = conf->node_index, .choice = conf->transport,
	    .connect_timeout_ms = conf->connect_timeout_ms };
	wire_strlcpy(p->name, n->name, sizeof(p->name));
	wire_strlcpy(p->rdma_dev, n->rdma_dev, sizeof(p->rdma_dev));
	wire_strlcpy(p->me, conf->node_name, sizeof(p->me));
}

void
job_data_link(int fd, const struct peer_data_hello *m)
{
	struct job *j = job_find_id(m->job_id);
	struct early_link *e;
	struct timeval tv;

	/* A lane's links come from the nodes before us; send/recv's from any. */
	if (m->node >= conf->nnodes || m->node == conf->node_index ||
	    (m->stream != PEER_STREAM_P2P && m->node > conf->node_index)) {
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
	if (m->job_id & PEER_CHECK_JOB) {	/* mcclctl check measures */
		uint32_t busy = m->job_id & PEER_CHECK_FORCE ? 0 :
		    (uint32_t)job_count(NULL);
		struct check_peer peer;
		char err[ERR_MAX];

		check_peer_of(m->node, &peer);
		if (check_serve(fd, &peer, busy, err, sizeof(err)) == -1)
			log_warnx("check: a link from node %s: %s",
			    peer_name(m->node), err);
		return;
	}
	if (j != NULL) {
		for (uint32_t p = 0; p < j->comm.nnodes; p++)
			if (j->comm.node_index[p] == m->node &&
			    (m->stream == PEER_STREAM_P2P ?
			    p2p_adopt_link(&j->comm, p, fd) :
			    engine_adopt_link(&j->comm, p, PEER_LANE_OF(m->stream),
			    fd)) == 0)
				return;
		log_warnx("job %s: unexpected data link from node %s", j->comm.name,
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
	e->ev_timeout = evtimer_new(ctl_base, early_link_timeout_cb, e);
	ms_to_tv(conf->connect_timeout_ms, &tv);
	evtimer_add(e->ev_timeout, &tv);
	TAILQ_INSERT_TAIL(&early_links, e, entry);
}

/* Node is down: its claims on forming jobs died with it. */
void
coord_node_down(uint32_t node)
{
	struct coord *k, *knext;

	for (k = TAILQ_FIRST(&coords); k != NULL; k = knext) {
		knext = TAILQ_NEXT(k, entry);
		coord_claim(k, node, NULL, 0);
		if (k->nclaimed == 0)
			coord_free(k);
	}
}
