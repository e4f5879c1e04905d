/*
 * test_form.c: job formation (control/form.c, with job.c and jobctl.c),
 * alone.  This node is n0 of a cluster of three; the layers around the
 * control plane are fakes that record what they are asked: the peer
 * daemons (peer_send), the clients' connections (client_send,
 * client_error) and the engine (engine_start and the rest of engine.h).
 * The tests play the other nodes' messages and check what formation
 * sends and decides: a job's JOIN to its coordinator, the coordinator's
 * rank map once every rank is claimed, a rank claimed twice, nranks that
 * disagree, a join for a job another node coordinates, the coordinator's
 * timeout naming the ranks that never came, the topology a rank map gives
 * (positions, node order, the engine's local ranks), the JOINED answer
 * once the links are up, and a rank map that contradicts the local ranks.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "mccld.h"
#include "control/control.h"
#include "control/job.h"
#include "ctltest.h"
#include "engine/check.h"
#include "transport/transport.h"

/* The settings formation reads (control_init gives control/ them). */
static struct config settings;

#define UID		1000
#define NNODES		3
#define SENT_MAX	64

/* ---- fakes: what the layers around formation were asked ---- */

struct sent {				/* a peer message or a client answer */
	uint32_t	 to;		/* node index, or the rank's client's */
	uint16_t	 type;
	uint8_t		 hdr[256];
	uint8_t		 trailer[1024];
	size_t		 tlen;
	uint32_t	 code;		/* client_error's */
	char		 text[ERR_MAX];
};

static struct sent	 peer_msgs[SENT_MAX], client_msgs[SENT_MAX];
static int		 npeer_msgs, nclient_msgs;
static struct engine_rank started[8];
static uint32_t		 nstarted;
static int		 links_up;	/* engine_collect reports it once */

static size_t
peer_hdr_len(uint16_t type)
{
	switch (type) {
	case PEER_JOIN: return sizeof(struct peer_join);
	case PEER_FORMED: return sizeof(struct peer_formed);
	case PEER_JOIN_FAIL: return sizeof(struct peer_join_fail);
	case PEER_ABORT: return sizeof(struct peer_abort);
	default: return 0;
	}
}

int
peer_send(uint32_t node, uint16_t type, const void *hdr, const void *trailer,
    size_t tlen)
{
	struct sent *s = &peer_msgs[npeer_msgs++];

	ck_assert_int_le(npeer_msgs, SENT_MAX);
	ck_assert_uint_le(tlen, sizeof(s->trailer));
	memset(s, 0, sizeof(*s));
	s->to = node;
	s->type = type;
	memcpy(s->hdr, hdr, peer_hdr_len(type));
	if (tlen > 0)
		memcpy(s->trailer, trailer, tlen);
	s->tlen = tlen;
	if (type == PEER_JOIN_FAIL || type == PEER_ABORT)
		snprintf(s->text, sizeof(s->text), "%.*s", (int)tlen,
		    (const char *)trailer);
	return 0;
}

/* Every peer's heartbeat: 80 us round trips, so this node's alpha is 40. */
uint64_t
peer_rtt_median_ns(void)
{
	return 80000;
}

const char *
peer_name(uint32_t node)
{
	return node < settings.nnodes ? settings.nodes[node].name : "?";
}

int
peer_is_up(uint32_t node)
{
	(void)node;
	return 1;
}

static int
fake_send(struct client *c, uint16_t type, const void *hdr,
    const void *trailer, size_t tlen)
{
	struct sent *s = &client_msgs[nclient_msgs++];

	(void)trailer;
	ck_assert_int_le(nclient_msgs, SENT_MAX);
	memset(s, 0, sizeof(*s));
	s->to = c->rank;
	s->type = type;
	if (type == IPC_JOINED)
		memcpy(s->hdr, hdr, sizeof(struct ipc_joined));
	s->tlen = tlen;
	return 0;
}

static int
fake_reply(struct client *c, const char *text)
{
	struct ipc_ctl_reply r = { 0, 0 };

	return fake_send(c, IPC_CTL_REPLY, &r, text, strlen(text));
}

static void
fake_error(struct client *c, uint32_t code, uint16_t type, const char *msg)
{
	struct sent *s = &client_msgs[nclient_msgs++];

	ck_assert_int_le(nclient_msgs, SENT_MAX);
	memset(s, 0, sizeof(*s));
	s->to = c->rank;
	s->type = type;
	s->code = code;
	snprintf(s->text, sizeof(s->text), "%s", msg);
}

static void
fake_op_done(struct client *c, const struct op *op, uint64_t req, int code,
    const char *err)
{
	(void)c; (void)op; (void)req; (void)code; (void)err;
	ck_abort_msg("no operation runs in formation");
}

static int
fake_sees(const struct client *c, uid_t uid)
{
	return c == NULL || c->uid == uid;
}

static void
fake_event(const char *what, const uid_t *uid, json_t *o)
{
	(void)what;
	(void)uid;
	json_decref(o);
}



void
metrics_op_done(int coll, int code, int algo, uint64_t bytes)
{
	(void)coll; (void)code; (void)algo; (void)bytes;
}

void
metrics_wire(int wire, uint64_t saved)
{
	(void)wire; (void)saved;
}

void
metrics_xmem(uint64_t bytes)
{
	(void)bytes;
}

void
metrics_lanes(uint64_t lane_ns, uint64_t wait_ns)
{
	(void)lane_ns; (void)wait_ns;
}

void
metrics_overlapped(void)
{
}

void
engine_retune(struct comm *cm, const struct engine_tunables *t)
{
	(void)cm; (void)t;
}

int
check_serve(int fd, const struct check_peer *peer, uint32_t busy, char *err,
    size_t errlen)
{
	(void)fd; (void)peer; (void)busy;
	snprintf(err, errlen, "no mcclctl check here");
	return -1;
}

int
engine_start(struct comm *cm, const struct engine_rank *ranks, char *err,
    size_t errlen)
{
	(void)err; (void)errlen;
	ck_assert_uint_le(cm->nlocal, 8);
	memcpy(started, ranks, cm->nlocal * sizeof(*ranks));
	nstarted = cm->nlocal;
	return 0;
}

int
engine_collect(struct comm *cm, struct op_list *done, int *code, char *err,
    size_t errlen)
{
	(void)cm; (void)done; (void)code; (void)err; (void)errlen;
	if (!links_up)
		return 0;
	links_up = 0;
	return 1;
}

int engine_adopt_link(struct comm *cm, uint32_t p, uint32_t l, int fd)
{ (void)cm; (void)p; (void)l; (void)fd; return -1; }
int engine_current(struct comm *cm, struct op_now *n) { (void)cm; (void)n; return 0; }
int engine_stopped(struct comm *cm) { (void)cm; return 1; }
int engine_exited(struct comm *cm) { (void)cm; return 1; }
void engine_abort(struct comm *cm) { (void)cm; }
void engine_wake(struct comm *cm) { (void)cm; }
void engine_quit(struct comm *cm) { (void)cm; }
void engine_finish(struct comm *cm) { (void)cm; }
void subq_leave(struct comm *cm, uint32_t i) { (void)cm; (void)i; }
int subq_pending(const struct comm *cm, uint32_t i) { (void)cm; (void)i; return 0; }
uint64_t subq_submitted(const struct comm *cm, uint32_t i) { (void)cm; (void)i; return 0; }
uint64_t subq_waiting_since(const struct comm *cm, uint64_t *s)
{ (void)cm; *s = 0; return 0; }
int p2p_init(struct comm *cm, char *e, size_t l) { (void)cm; (void)e; (void)l; return 0; }
int p2p_start(struct comm *cm, char *e, size_t l) { (void)cm; (void)e; (void)l; return 0; }
int p2p_exited(struct comm *cm) { (void)cm; return 1; }
void p2p_quit(struct comm *cm) { (void)cm; }
void p2p_finish(struct comm *cm) { (void)cm; }
void p2p_submit(struct comm *cm, struct op *op) { (void)cm; (void)op; }
int p2p_adopt_link(struct comm *cm, uint32_t p, int fd)
{ (void)cm; (void)p; (void)fd; return -1; }
void link_mem_forget(const void *key) { (void)key; }

/* What the jobs registered with the peers (job_init). */
static peer_frame_fn frame_handlers[PEER_CHECK_DONE - PEER_JOIN + 1];
static struct peer_watcher watcher;

void
peer_handle(uint16_t type, peer_frame_fn fn)
{
	ck_assert_uint_ge(type, PEER_JOIN);
	ck_assert_uint_le(type, PEER_CHECK_DONE);
	frame_handlers[type - PEER_JOIN] = fn;
}

void
peer_watch(const struct peer_watcher *w)
{
	watcher = *w;
}

/* A frame from node `from`, as the peers deliver it. */
static int
deliver(uint32_t from, uint16_t type, const void *msg, const uint8_t *trailer,
    size_t tlen)
{
	ck_assert_ptr_nonnull(frame_handlers[type - PEER_JOIN]);
	return frame_handlers[type - PEER_JOIN](from, type, msg, trailer, tlen);
}

/* ---- the cluster, its clients, the other nodes' messages ---- */

static struct conf_node nodes[NNODES] = { { .name = "n0" }, { .name = "n1" },
    { .name = "n2" } };
static struct client clients[4];
static char state_dir[64];

static void
cluster_up(void)
{
	memset(&settings, 0, sizeof(settings));
	config_defaults(&settings);
	config_free(&settings);		/* the default cluster of one */
	strcpy(settings.node_name, "n0");
	/* what the daemon keeps beside its socket goes to a folder of ours */
	ck_assert_ptr_nonnull(mkdtemp(strcpy(state_dir,
	    "/tmp/test_form.XXXXXX")));
	snprintf(settings.socket_path, sizeof(settings.socket_path),
	    "%s/mccld.sock", state_dir);
	settings.node_index = 0;
	settings.nodes = nodes;
	settings.nnodes = NNODES;
	ctltest_init(&settings, &(struct client_port){ fake_send, fake_reply,
	    fake_error, fake_op_done, fake_sees, fake_event });
	job_init();
	ck_assert_ptr_nonnull(ctl_base);
	npeer_msgs = nclient_msgs = 0;
	nstarted = 0;
	links_up = 0;
	memset(clients, 0, sizeof(clients));
	for (int i = 0; i < 4; i++) {
		clients[i].uid = UID;
		clients[i].bell = (struct seg *)&clients[i];	/* registered */
		clients[i].segs = (struct segtab *)&clients[i];
		snprintf(clients[i].desc, sizeof(clients[i].desc), "client %d",
		    i);
	}
}

static void
cluster_down(void)
{
	char path[sizeof(state_dir) + 32];
	struct job *j;

	while ((j = TAILQ_FIRST(&jobs)) != NULL)
		job_free(j);
	job_ctl_close();
	event_base_free(ctl_base);
	snprintf(path, sizeof(path), "%s/mccld.failed-jobs.json", state_dir);
	unlink(path);
	rmdir(state_dir);
}

/* A job name that node `coord` coordinates for UID. */
static const char *
job_coordinated_by(uint32_t coord)
{
	static char name[32];

	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "job%d", i);
		if (coordinator_of(UID, name) == coord)
			return name;
	}
	ck_abort_msg("no job name for coordinator %u", coord);
	return NULL;
}

static void
join_local(const char *name, uint32_t rank, uint32_t nranks)
{
	struct ipc_join m = { .nranks = nranks, .rank = rank,
	    .timeout_ms = 60000 };

	snprintf(m.job, sizeof(m.job), "%s", name);
	job_client_join(&clients[rank], &m);
}

/* Node `from` tells the coordinator (us) the ranks it holds. */
static int
join_remote(const char *name, uint32_t from, uint32_t nranks,
    const uint32_t *ranks, uint32_t n, uint32_t timeout_ms)
{
	struct peer_join m = { .uid = UID, .nranks = nranks, .node = from,
	    .nlocal = n, .timeout_ms = timeout_ms, .alpha_ns = 30000,
	    .beta_ps = 2000, .gamma_ps = 100, .beta_pair_ps = 600 };
	    /* a slower ring, a faster pair and reduction than ours */
	uint8_t trailer[64];

	snprintf(m.job, sizeof(m.job), "%s", name);
	wire_put_u32s(trailer, ranks, n);
	return deliver(from, PEER_JOIN, &m, trailer, 4 * n);
}

/* The last message sent to node `to` of type `type`, or NULL. */
static const struct sent *
last_to(uint32_t to, uint16_t type)
{
	for (int i = npeer_msgs - 1; i >= 0; i--)
		if (peer_msgs[i].to == to && peer_msgs[i].type == type)
			return &peer_msgs[i];
	return NULL;
}

static int
count_type(uint16_t type)
{
	int n = 0;

	for (int i = 0; i < npeer_msgs; i++)
		n += peer_msgs[i].type == type;
	return n;
}

/* Our own JOIN, as the coordinator (us) receives it from the loop back. */
static void
deliver_own_join(void)
{
	const struct sent *s = last_to(0, PEER_JOIN);
	struct peer_join m;

	ck_assert_ptr_nonnull(s);
	memcpy(&m, s->hdr, sizeof(m));
	ck_assert_int_eq(deliver(0, PEER_JOIN, &m, s->trailer, s->tlen), 0);
}

/*
 * Ranks 0 and 2 of 4 here (joined in `order`), 1 and 3 on n1, a job we
 * coordinate: after our own JOIN, n1's, which completes it.
 */
static const char *
join_two_by_two(const uint32_t order[2])
{
	const char *name = job_coordinated_by(0);
	const uint32_t theirs[2] = { 1, 3 };

	join_local(name, order[0], 4);
	join_local(name, order[1], 4);
	deliver_own_join();
	ck_assert_int_eq(count_type(PEER_FORMED), 0);	/* 2 of 4 */
	ck_assert_int_eq(join_remote(name, 1, 4, theirs, 2, 60000), 0);
	return name;
}

/* ---- the tests ---- */

START_TEST(local_ranks_join_their_coordinator)
{
	const char *name = job_coordinated_by(1);
	const struct sent *s;
	struct peer_join m;
	uint32_t ranks[2];

	join_local(name, 0, 4);
	join_local(name, 2, 4);
	s = last_to(1, PEER_JOIN);
	ck_assert_ptr_nonnull(s);
	memcpy(&m, s->hdr, sizeof(m));
	ck_assert_uint_eq(m.uid, UID);
	ck_assert_uint_eq(m.nranks, 4);
	ck_assert_uint_eq(m.node, 0);
	ck_assert_uint_eq(m.nlocal, 2);
	ck_assert_str_eq(m.job, name);
	wire_get_u32s(ranks, s->trailer, 2);
	ck_assert_uint_eq(ranks[0], 0);
	ck_assert_uint_eq(ranks[1], 2);
	/* this node's link cost: no ring allreduce has run to fit beta */
	ck_assert_uint_eq(m.alpha_ns, 40000);
	ck_assert_uint_eq(m.beta_ps, LINK_BETA_PS_DEFAULT);
	ck_assert_uint_eq(m.gamma_ps, LINK_GAMMA_PS_DEFAULT);
	ck_assert_uint_eq(m.beta_pair_ps, LINK_BETA_PS_DEFAULT);  /* = ring's */
	ck_assert_int_eq(count_type(PEER_FORMED), 0);	/* not ours to form */
}
END_TEST

START_TEST(the_coordinator_forms_once_every_rank_is_claimed)
{
	const uint32_t order[2] = { 0, 2 };
	const struct sent *s;
	struct peer_formed f;
	uint32_t map[4];

	join_two_by_two(order);
	ck_assert_int_eq(count_type(PEER_FORMED), 2);	/* n0 and n1, not n2 */
	ck_assert_ptr_null(last_to(2, PEER_FORMED));
	s = last_to(1, PEER_FORMED);
	ck_assert_ptr_nonnull(s);
	memcpy(&f, s->hdr, sizeof(f));
	ck_assert_uint_ne(f.job_id, 0);
	ck_assert_uint_eq(f.job_id & PEER_CHECK_JOB, 0);
	ck_assert_uint_eq(f.nranks, 4);
	ck_assert_uint_eq(f.lanes, job_lanes_max());
	/* the worst of both nodes' link cost, each number on its own */
	ck_assert_uint_eq(f.alpha_ns, 40000);
	ck_assert_uint_eq(f.beta_ps, 2000);
	ck_assert_uint_eq(f.gamma_ps, LINK_GAMMA_PS_DEFAULT);
	ck_assert_uint_eq(f.beta_pair_ps, LINK_BETA_PS_DEFAULT);
	ck_assert_uint_eq(s->tlen, 16);
	wire_get_u32s(map, s->trailer, 4);
	ck_assert_uint_eq(map[0], 0);
	ck_assert_uint_eq(map[1], 1);
	ck_assert_uint_eq(map[2], 0);
	ck_assert_uint_eq(map[3], 1);
	ck_assert_mem_eq(last_to(0, PEER_FORMED)->hdr, s->hdr, sizeof(f));
}
END_TEST

START_TEST(the_rank_map_gives_the_topology_and_the_engine_its_ranks)
{
	const uint32_t order[2] = { 2, 0 };	/* joins out of rank order */
	const struct sent *s;
	struct peer_formed f;
	struct ipc_joined joined;
	struct job *j;

	join_two_by_two(order);
	s = last_to(0, PEER_FORMED);
	ck_assert_ptr_nonnull(s);
	memcpy(&f, s->hdr, sizeof(f));
	ck_assert_int_eq(job_recv_formed(&f, s->trailer, s->tlen), 0);
	j = job_find_id(f.job_id);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(j->state, JOB_LINKING);
	ck_assert_uint_eq(j->comm.nnodes, 2);
	ck_assert_uint_eq(j->comm.me, 0);
	ck_assert_uint_eq(j->comm.cost.alpha_ns, f.alpha_ns);
	ck_assert_uint_eq(j->comm.cost.beta_ps, f.beta_ps);
	ck_assert_uint_eq(j->comm.cost.gamma_ps, f.gamma_ps);
	ck_assert_uint_eq(j->comm.cost.beta_pair_ps, f.beta_pair_ps);
	ck_assert_uint_eq(j->comm.node_index[1], 1);
	ck_assert_str_eq(j->comm.names[1], "n1");
	/* node order: n0's ranks 0 and 2, then n1's 1 and 3 */
	ck_assert_uint_eq(j->comm.rank_slot[0], 0);
	ck_assert_uint_eq(j->comm.rank_slot[2], 1);
	ck_assert_uint_eq(j->comm.rank_slot[1], 2);
	ck_assert_uint_eq(j->comm.rank_slot[3], 3);
	ck_assert_int_eq(j->comm.slots_are_ranks, 0);
	ck_assert_uint_eq(j->comm.pos_first[1], 2);
	ck_assert_uint_eq(j->comm.pos_count[0], 2);
	/* the engine gets the local ranks in rank order, with their bells */
	ck_assert_uint_eq(nstarted, 2);
	ck_assert_uint_eq(started[0].rank, 0);
	ck_assert_ptr_eq(started[0].bell, clients[0].bell);
	ck_assert_uint_eq(started[1].rank, 2);
	ck_assert_ptr_eq(started[1].segs, clients[2].segs);
	ck_assert_uint_eq(clients[2].local_index, 1);
	ck_assert_int_eq(nclient_msgs, 0);	/* no answer before the links */
	links_up = 1;
	job_engine_cb(-1, 0, j);
	ck_assert_int_eq(j->state, JOB_READY);
	ck_assert_int_eq(nclient_msgs, 2);
	ck_assert_uint_eq(client_msgs[0].type, IPC_JOINED);
	memcpy(&joined, client_msgs[0].hdr, sizeof(joined));
	ck_assert_uint_eq(joined.job_id, f.job_id);
	ck_assert_uint_eq(joined.nranks, 4);
	ck_assert_uint_eq(joined.rank, client_msgs[0].to);
}
END_TEST

/* The jobs take their own frames from the peers, and hear of them. */
START_TEST(the_jobs_register_with_the_peers)
{
	for (uint16_t t = PEER_JOIN; t <= PEER_JOB_INFO; t++)
		ck_assert_ptr_nonnull(frame_handlers[t - PEER_JOIN]);
	ck_assert_ptr_null(frame_handlers[PEER_CHECK_RUN - PEER_JOIN]);
	ck_assert_ptr_nonnull(watcher.up);
	ck_assert_ptr_nonnull(watcher.down);
	ck_assert_ptr_nonnull(watcher.data_link);
	ck_assert_ptr_nonnull(watcher.mark_nodes);
	/* a JOIN_FAIL from a node that does not coordinate the job: refused */
	struct peer_join_fail jf = { .uid = UID, .code = MCCL_ERR_TIMEOUT };
	snprintf(jf.job, sizeof(jf.job), "%s", job_coordinated_by(0));
	ck_assert_int_eq(deliver(1, PEER_JOIN_FAIL, &jf, NULL, 0), -1);
}
END_TEST

/* A job formed now gets streams_per_peer lanes; auto: 2 to 4 by the cores. */
START_TEST(new_jobs_get_the_lanes_set)
{
	settings.streams_per_peer = 8;
	ck_assert_uint_eq(job_lanes_max(), 8);
	settings.streams_per_peer = STREAMS_AUTO;
	ck_assert_uint_ge(job_lanes_max(), 2);
	ck_assert_uint_le(job_lanes_max(), 4);
}
END_TEST

START_TEST(a_rank_claimed_twice_is_refused)
{
	const char *name = job_coordinated_by(0);
	const uint32_t theirs[2] = { 0, 3 };	/* rank 0 is n0's */
	const struct sent *s;
	struct peer_join_fail jf;

	join_local(name, 0, 4);
	deliver_own_join();
	ck_assert_int_eq(join_remote(name, 2, 4, theirs, 2, 60000), 0);
	s = last_to(2, PEER_JOIN_FAIL);
	ck_assert_ptr_nonnull(s);
	memcpy(&jf, s->hdr, sizeof(jf));
	ck_assert_uint_eq(jf.rank, 0);
	ck_assert_uint_eq(jf.code, MCCL_ERR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(s->text, "rank 0 is already held by a "
	    "process on node n0"));
	ck_assert_int_eq(count_type(PEER_FORMED), 0);
}
END_TEST

START_TEST(ranks_that_disagree_on_nranks_are_refused)
{
	const char *name = job_coordinated_by(0);
	const uint32_t theirs[1] = { 1 };
	const struct sent *s;

	join_local(name, 0, 2);
	deliver_own_join();
	ck_assert_int_eq(join_remote(name, 1, 3, theirs, 1, 60000), 0);
	s = last_to(1, PEER_JOIN_FAIL);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(strstr(s->text, "say nranks is 3, but ranks "
	    "already joined said 2"));
	ck_assert_int_eq(count_type(PEER_FORMED), 0);
}
END_TEST

START_TEST(joins_that_are_not_ours_or_malformed_are_refused)
{
	const uint32_t bad[1] = { 4 };
	const uint32_t ok[1] = { 0 };

	/* another node coordinates it: the sender is wrong, not us */
	ck_assert_int_eq(join_remote(job_coordinated_by(2), 1, 4, ok, 1,
	    1000), -1);
	/* a rank past nranks */
	ck_assert_int_eq(join_remote(job_coordinated_by(0), 1, 4, bad, 1,
	    1000), -1);
	ck_assert_int_eq(npeer_msgs, 0);
}
END_TEST

/* The n-th job name (from 0) that node `coord` coordinates for UID. */
static const char *
nth_job_coordinated_by(uint32_t coord, int n)
{
	static char name[32];

	for (int i = 0; i < 100000; i++) {
		snprintf(name, sizeof(name), "flood%d", i);
		if (coordinator_of(UID, name) == coord && n-- == 0)
			return name;
	}
	ck_abort_msg("no job name for coordinator %u", coord);
	return NULL;
}

/*
 * What one node's joins may hold at its coordinator: max_ranks_per_job
 * ranks a job, max_forming_jobs_per_peer jobs forming, within
 * max_init_timeout_ms.  Past them the job fails on that node, saying why;
 * nothing is held, and a node's jobs count again once they are gone.
 */
START_TEST(a_peers_joins_are_capped)
{
	const uint32_t ours[1] = { 0 };
	const struct sent *s;
	struct peer_join_fail jf;

	settings.max_forming_jobs_per_peer = 3;
	settings.max_ranks_per_job = 1000;
	settings.max_init_timeout_ms = 50;
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(join_remote(nth_job_coordinated_by(0, i), 1,
		    4, ours, 1, 4000000000U), 0);
	ck_assert_ptr_null(last_to(1, PEER_JOIN_FAIL));
	ck_assert_int_eq(join_remote(nth_job_coordinated_by(0, 3), 1, 4,
	    ours, 1, 1000), 0);
	s = last_to(1, PEER_JOIN_FAIL);
	ck_assert_ptr_nonnull(s);
	memcpy(&jf, s->hdr, sizeof(jf));
	ck_assert_uint_eq(jf.code, MCCL_ERR_NO_MEMORY);
	ck_assert_str_eq(jf.job, nth_job_coordinated_by(0, 3));
	ck_assert_ptr_nonnull(strstr(s->text, "node n1 already has 3 jobs "
	    "forming at coordinator node n0 (max_forming_jobs_per_peer)"));
	/* another node's joins have their own count; too many ranks: refused */
	ck_assert_int_eq(join_remote(nth_job_coordinated_by(0, 4), 2, 1001,
	    ours, 1, 1000), 0);
	s = last_to(2, PEER_JOIN_FAIL);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(strstr(s->text, "1001 ranks, more than the 1000 "
	    "of coordinator node n0's max_ranks_per_job"));
	ck_assert_int_eq(join_remote(nth_job_coordinated_by(0, 5), 2, 4,
	    ours, 1, 1000), 0);
	/* the 49-day timeouts asked for run out at the daemon's 50 ms */
	npeer_msgs = 0;
	event_base_loop(ctl_base, EVLOOP_ONCE);
	s = last_to(1, PEER_JOIN_FAIL);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(strstr(s->text, "never joined within 50 ms"));
	while (coord_count() > 0)
		event_base_loop(ctl_base, EVLOOP_ONCE);
	/* nothing held: node 1 may form jobs again */
	npeer_msgs = 0;
	settings.max_init_timeout_ms = 60000;
	ck_assert_int_eq(join_remote(nth_job_coordinated_by(0, 6), 1, 4,
	    ours, 1, 1000), 0);
	ck_assert_ptr_null(last_to(1, PEER_JOIN_FAIL));
	coord_node_down(1);
	ck_assert_int_eq(coord_count(), 0);
}
END_TEST

START_TEST(the_coordinator_times_out_naming_the_missing_ranks)
{
	const char *name = job_coordinated_by(0);
	const uint32_t theirs[1] = { 2 };
	const struct sent *s;
	struct peer_join_fail jf;

	ck_assert_int_eq(join_remote(name, 1, 4, theirs, 1, 50), 0);
	event_base_loop(ctl_base, EVLOOP_ONCE);	/* the 50 ms timer */
	s = last_to(1, PEER_JOIN_FAIL);
	ck_assert_ptr_nonnull(s);
	memcpy(&jf, s->hdr, sizeof(jf));
	ck_assert_uint_eq(jf.rank, PEER_ALL_RANKS);
	ck_assert_uint_eq(jf.code, MCCL_ERR_TIMEOUT);
	ck_assert_ptr_nonnull(strstr(s->text, "3 of 4 ranks never joined "
	    "within 50 ms: ranks 0, 1, 3"));
	ck_assert_ptr_null(last_to(0, PEER_JOIN_FAIL));	/* holds none */
}
END_TEST

START_TEST(a_rank_map_against_the_local_ranks_fails_the_job)
{
	const char *name = job_coordinated_by(1);
	struct peer_formed f = { .job_id = 77, .uid = UID, .nranks = 2,
	    .lanes = 1, .alpha_ns = 1, .beta_ps = 1, .gamma_ps = 1,
	    .beta_pair_ps = 1 };
	const uint32_t map[2] = { 1, 0 };	/* rank 0 is here, not on n1 */
	uint8_t trailer[8];

	join_local(name, 0, 2);
	snprintf(f.job, sizeof(f.job), "%s", name);
	wire_put_u32s(trailer, map, 2);
	ck_assert_int_eq(job_recv_formed(&f, trailer, sizeof(trailer)), 0);
	ck_assert_uint_eq(nstarted, 0);
	ck_assert_int_eq(nclient_msgs, 1);
	ck_assert_uint_eq(client_msgs[0].type, IPC_JOIN);
	ck_assert_uint_eq(client_msgs[0].code, MCCL_ERR_PEER_FAILED);
	ck_assert_ptr_nonnull(strstr(client_msgs[0].text, "the rank map does "
	    "not match the ranks on node n0"));
	/* the other node hears why */
	ck_assert_ptr_nonnull(last_to(1, PEER_ABORT));
}
END_TEST

/* A rank map without a link cost is a protocol error: nothing forms. */
START_TEST(a_rank_map_without_a_link_cost_is_refused)
{
	const char *name = job_coordinated_by(1);
	struct peer_formed f = { .job_id = 78, .uid = UID, .nranks = 1,
	    .lanes = 1, .alpha_ns = 1, .beta_ps = 1, .gamma_ps = 1,
	    .beta_pair_ps = 0 };
	uint8_t trailer[4];
	const uint32_t map[1] = { 0 };

	join_local(name, 0, 1);
	snprintf(f.job, sizeof(f.job), "%s", name);
	wire_put_u32s(trailer, map, 1);
	ck_assert_int_eq(job_recv_formed(&f, trailer, sizeof(trailer)), -1);
	ck_assert_uint_eq(nstarted, 0);
	ck_assert_ptr_null(job_find_id(78));
}
END_TEST

/*
 * beta is fitted to ring allreduces of 1 MiB or more by the model's ring,
 * 2(p-1) alpha + 2(p-1)/p n beta; the estimate is the least of the last 16
 * fits (an op's time also holds waiting for the last node: it only adds).
 */
START_TEST(beta_is_fitted_to_ring_allreduces)
{
	const struct link_cost job = { 25000, 800, 250, 0 };
	size_t n = (size_t)4 << 20;
	struct link_cost c;

	/* too small, one node, faster than the latency alone: no beta */
	linkcost_observe(UID, ALGO_RING, 2, (1 << 20) - 4, 10 * 1000 * 1000, &job);
	linkcost_observe(UID, ALGO_RING, 1, n, 10 * 1000 * 1000, &job);
	linkcost_observe(UID, ALGO_RING, 2, n, 40000, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_ps, LINK_BETA_PS_DEFAULT);
	ck_assert_uint_eq(c.beta_pair_ps, LINK_BETA_PS_DEFAULT);
	/* 4 nodes: 150 us, then 1.5 n at 1500 ps */
	linkcost_observe(UID, ALGO_RING, 4, n, 150000 + 3 * n * 3 / 4, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_ps, 1500);
	/* 2 nodes: 50 us of latency, then n bytes at 500 ps each */
	linkcost_observe(UID, ALGO_RING, 2, n, 50000 + n / 2, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_ps, 500);
	/* 15 slower ones keep the 500 in the window; the 16th pushes it out */
	for (int i = 0; i < 15; i++)
		linkcost_observe(UID, ALGO_RING, 2, n, 50000 + n, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_ps, 500);
	linkcost_observe(UID, ALGO_RING, 2, n, 50000 + n, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_ps, 1000);
	/* no small op yet: alpha is half the heartbeats' 80 us */
	ck_assert_uint_eq(c.alpha_ns, 40000);
	/* the others' beta, until their first, is the ring's */
	ck_assert_uint_eq(c.beta_pair_ps, 1000);
}
END_TEST

/*
 * The other algorithms' beta is their own: rabenseifner on 4 nodes, 4 MiB:
 * 4 latencies, 1.5 n bytes sent, 0.75 n reduced; at 3000 ps a byte sent.
 * The ring's, not fitted yet, is theirs until its own first fit.
 */
START_TEST(the_pairwise_beta_is_fitted_to_the_others)
{
	const struct link_cost job = { 25000, 800, 250, 0 };
	size_t n = (size_t)4 << 20;
	struct link_cost c;

	linkcost_observe(UID, ALGO_RABENSEIFNER, 4, n, 4 * 25000 + n * 3 / 2 * 3 +
	    n * 3 / 4 / 4, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_pair_ps, 3000);
	ck_assert_uint_eq(c.beta_ps, 3000);
	/* doubling on 2 nodes: alpha + n (beta + gamma), at 2000 ps */
	linkcost_observe(UID, ALGO_DOUBLING, 2, n, 25000 + n * 2 + n / 4, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_pair_ps, 2000);
	/* the ring's own fit, once there, is its own */
	linkcost_observe(UID, ALGO_RING, 2, n, 50000 + n / 2, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_ps, 500);
	ck_assert_uint_eq(c.beta_pair_ps, 2000);
}
END_TEST

/*
 * A fast link where only the other algorithms have been measured (300 ps
 * a byte: 3.3 GB/s, a stream at a time): a large allreduce must still go
 * to the ring, whose lanes side by side can only do better, so that the
 * ring runs and is measured, rather than lose to them by the 10 Gbit/s
 * default forever.
 */
START_TEST(an_unmeasured_ring_is_not_locked_out)
{
	const struct link_cost job = { 10000, 800, 50, 0 };
	size_t n = (size_t)4 << 20;
	struct link_cost c;

	linkcost_observe(UID, ALGO_RABENSEIFNER, 4, n, 4 * 10000 + n * 3 / 2 *
	    3 / 10 + 2 + n * 3 / 4 / 20, &job);	/* + 2: not below 300 */
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.beta_pair_ps, 300);
	for (size_t big = n; big <= (size_t)256 << 20; big *= 4)
		ck_assert_int_eq(algo_choose(COLL_ALLREDUCE, ALGO_AUTO, 4, big,
		    0, &c), ALGO_RING);
}
END_TEST

/*
 * alpha is fitted to allreduces of 4 KiB or less, whatever ran them: the
 * time less the model's bandwidth terms, over its count of latencies; the
 * least of the last 16 (one that waited for a late node only adds).  Until
 * the first, the heartbeats give it.
 */
START_TEST(alpha_is_fitted_to_small_allreduces)
{
	const struct link_cost job = { 25000, 800, 250, 0 };
	struct link_cost c;

	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 40000);
	/* 8 nodes by the ring, 8 B: 14 latencies + 2 (7/8) 8 x 0.8 ns (11.2) */
	linkcost_observe(UID, ALGO_RING, 8, 8, 14 * 30000 + 12, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 30000);
	/* 4 nodes by doubling, 1000 B: 2 latencies + 2 x 1000 x 1.05 ns */
	linkcost_observe(UID, ALGO_DOUBLING, 4, 1000, 2 * 10000 + 2100, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 10000);
	/* one that waited 5 ms for a late node does not move it */
	linkcost_observe(UID, ALGO_DOUBLING, 4, 8, 5000000, &job);
	/* too large, and faster than the bandwidth terms alone: ignored */
	linkcost_observe(UID, ALGO_DOUBLING, 4, 4097, 4000, &job);
	linkcost_observe(UID, ALGO_DOUBLING, 4, 4000, 100, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 10000);
	ck_assert_uint_eq(c.beta_ps, LINK_BETA_PS_DEFAULT);
	/* 16 more push the 10 us fit out of the window */
	for (int i = 0; i < 16; i++)
		linkcost_observe(UID, ALGO_DOUBLING, 4, 1000, 2 * 20000 + 2100,
		    &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 20000);
}
END_TEST

/*
 * One user's late ranks raise only that user's fits: another user's
 * estimate keeps its own (the least of its own and others' fits), and a
 * user with none of its own takes the least of everyone's.  alpha never
 * exceeds 4 x the heartbeats' half round trip (40 us here).
 */
START_TEST(one_users_late_ranks_do_not_steer_another_users_jobs)
{
	const struct link_cost job = { 25000, 800, 250, 0 };
	const uid_t victim = UID + 1, newcomer = UID + 2;
	size_t n = (size_t)4 << 20;
	struct link_cost c;

	/* the victim's own: alpha 30 us by doubling, the ring at 500 ps */
	linkcost_observe(victim, ALGO_DOUBLING, 4, 1000, 2 * 30000 + 2100,
	    &job);
	linkcost_observe(victim, ALGO_RING, 2, n, 50000 + n / 2, &job);
	/* the attacker's: every op 0.3 s late, more than a window of them */
	for (int i = 0; i < 40; i++) {
		linkcost_observe(UID, ALGO_DOUBLING, 4, 8, 300000000, &job);
		linkcost_observe(UID, ALGO_RING, 2, n, 300000000, &job);
	}
	linkcost_mine(victim, &c);
	ck_assert_uint_eq(c.alpha_ns, 30000);
	ck_assert_uint_eq(c.beta_ps, 500);
	linkcost_mine(newcomer, &c);
	ck_assert_uint_eq(c.alpha_ns, 30000);
	ck_assert_uint_eq(c.beta_ps, 500);
	/* the attacker's own jobs are bounded by the victim's and the rtt */
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 30000);
	ck_assert_uint_eq(c.beta_ps, 500);
}
END_TEST

/* Alone, a user's own late fits raise its alpha to 4 x 40 us at most. */
START_TEST(alpha_is_bounded_by_the_heartbeats)
{
	const struct link_cost job = { 25000, 800, 250, 0 };
	struct link_cost c;

	for (int i = 0; i < 20; i++)
		linkcost_observe(UID, ALGO_DOUBLING, 4, 8, 300000000, &job);
	linkcost_mine(UID, &c);
	ck_assert_uint_eq(c.alpha_ns, 160000);
}
END_TEST

static Suite *
form_suite(void)
{
	Suite *s = suite_create("form");
	TCase *tc = tcase_create("formation");

	tcase_add_checked_fixture(tc, cluster_up, cluster_down);

	tcase_add_test(tc, local_ranks_join_their_coordinator);
	tcase_add_test(tc, a_rank_map_without_a_link_cost_is_refused);
	tcase_add_test(tc, beta_is_fitted_to_ring_allreduces);
	tcase_add_test(tc, alpha_is_fitted_to_small_allreduces);
	tcase_add_test(tc, the_pairwise_beta_is_fitted_to_the_others);
	tcase_add_test(tc, an_unmeasured_ring_is_not_locked_out);
	tcase_add_test(tc, one_users_late_ranks_do_not_steer_another_users_jobs);
	tcase_add_test(tc, alpha_is_bounded_by_the_heartbeats);
	tcase_add_test(tc, the_coordinator_forms_once_every_rank_is_claimed);
	tcase_add_test(tc,
	    the_rank_map_gives_the_topology_and_the_engine_its_ranks);
	tcase_add_test(tc, new_jobs_get_the_lanes_set);
	tcase_add_test(tc, the_jobs_register_with_the_peers);
	tcase_add_test(tc, a_rank_claimed_twice_is_refused);
	tcase_add_test(tc, ranks_that_disagree_on_nranks_are_refused);
	tcase_add_test(tc, joins_that_are_not_ours_or_malformed_are_refused);
	tcase_add_test(tc, a_peers_joins_are_capped);
	tcase_add_test(tc, the_coordinator_times_out_naming_the_missing_ranks);
	tcase_add_test(tc, a_rank_map_against_the_local_ranks_fails_the_job);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(form_suite());
	int failed;

	log_init(LOG_ERR, "test_form");
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
