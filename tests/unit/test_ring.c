/*
 * test_ring.c: ring.c and allreduce.c over a real loopback TCP mesh, one
 * thread per simulated node.  Results are checked against a reference and
 * across nodes (bit for bit); every failure the engine must report (mismatched
 * operations, a dead peer, a silent peer, an abort, garbage on a link) is
 * provoked, and no node may hang on any of them.
 */
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/xfer.h"
#include "engine/crew.h"
#include "engine/reduce.h"
#include "engine/algo.h"
#include "transport/transport.h"
#include "testlib.h"

#define MAXN		8
#define LANES		3		/* most lanes a test mesh has */
#define MS		1000000ULL

enum role { RUN, DIE, IDLE, JUNK, ABORTER, SCRIPT };

struct mesh {
	int		 n;
	int		 nlanes;
	int		 fd[LANES][MAXN][MAXN];	/* fd[k][i][j]: node i's link
						   to j on lane k */
	struct link	*rdma[LANES][MAXN][MAXN];	/* over_rdma: the same
						   links over the fake verbs,
						   each owning its fd */
	uint64_t	 seq;
};

/*
 * The "rdma" test cases run the engine over the RDMA transport on the
 * tests' verbs provider (tests/fakeverbs) instead of TCP: every link is set
 * up as link.c sets one up, on the mesh's TCP connection.
 */
static int over_rdma;
static int with_crew;	/* each node's lanes on a crew of threads */
static int crewless = -1;	/* with_crew: but this node's lanes on one */
static char verbs_dir[] = "/tmp/test_ring.XXXXXX";
static struct conf_node conf_nodes[MAXN];

struct node {
	struct xfer	 x;
	struct link	 lk[LANES * MAXN];	/* TCP links on the mesh's fds */
	struct link	*links[LANES * MAXN];
	struct mesh	*m;
	int		 role;
	int		 coll;
	void		*buf;
	const void	*src;		/* allreduce out of place; NULL: buf */
	size_t		 count;		/* allreduce: elements; else bytes */
	int		 dtype, op;
	uint32_t	 root;
	const size_t	*offs, *lens;
	size_t		 chunk;		/* 0: the run's chunk */
	int		 algo;		/* 0: the run's algorithm */
	struct link_cost cost;		/* beta 0: the run's cost */
	int		 wire;		/* x.wire: MCCL_BFLOAT16, MCCL_FLOAT16 */
	unsigned	 delay_ms;
	int		 efd;		/* ABORTER writes it */
	int		 rc;
	uint64_t	 t_in, t_out;
	unsigned	 crew_threads;	/* with_crew: threads the op used */
	pthread_t	 th;
};

static const char *const names[MAXN] = { "n0", "n1", "n2", "n3", "n4",
    "n5", "n6", "n7" };

/* Meshes still open, closed by the teardown if a test fails midway. */
static struct mesh *open_meshes[4];

static void *
xmalloc(size_t len)
{
	void *p = malloc(len > 0 ? len : 1);

	ck_assert_ptr_nonnull(p);
	return p;
}


/* ---- the mesh ---- */


static void
mesh_close(struct mesh *m)
{
	for (int k = 0; k < LANES; k++)
		for (int i = 0; i < m->n; i++)
			for (int j = 0; j < m->n; j++) {
				link_close(m->rdma[k][i][j]);
				m->rdma[k][i][j] = NULL;
			}
	for (int k = 0; k < LANES; k++)
		for (int i = 0; i < m->n; i++)
			for (int j = 0; j < m->n; j++)
				if (m->fd[k][i][j] != -1) {
					close(m->fd[k][i][j]);
					m->fd[k][i][j] = -1;
				}
	for (size_t k = 0; k < 4; k++)
		if (open_meshes[k] == m)
			open_meshes[k] = NULL;
}

/* The link between i and j on lane k over RDMA, as link.c sets it up. */
static int
rdma_pair(struct mesh *m, int k, int i, int j)
{
	const struct transport *tp = &rdma_transport;
	int end[2] = { i, j }, *fd[2] = { &m->fd[k][i][j], &m->fd[k][j][i] };
	struct peer_data_link msg[2];
	char why[LINK_WHY_MAX];
	void *half[2];

	for (int e = 0; e < 2; e++) {
		struct link_want w = { conf_nodes[end[e]].name,
		    conf_nodes[end[1 - e]].name, "", LINK_ANY };

		if ((half[e] = tp->offer(&w, &msg[e], why,
		    sizeof(why))) == NULL) {
			if (e == 1)
				tp->drop(half[0]);
			fprintf(stderr, "test_ring: rdma offer: %s\n", why);
			return -1;
		}
	}
	for (int e = 0; e < 2; e++) {
		struct link *l = tp->join(half[e], *fd[e], &msg[1 - e], why,
		    sizeof(why));

		*fd[e] = -1;			/* the link's now */
		if (l == NULL) {
			if (e == 0)
				tp->drop(half[1]);
			fprintf(stderr, "test_ring: rdma join: %s\n", why);
			return -1;
		}
		l->node = (uint32_t)end[1 - e];
		m->rdma[k][end[e]][end[1 - e]] = l;
	}
	return 0;
}

/* A mesh of n nodes with nlanes links between each two. */
static void
mesh_open_lanes(struct mesh *m, int n, int nlanes)
{
	size_t k;
	int ok = 1;

	memset(m, 0, sizeof(*m));
	memset(m->fd, -1, sizeof(m->fd));
	m->n = n;
	m->nlanes = nlanes;
	m->seq = 1;
	for (k = 0; k < 4 && open_meshes[k] != NULL; k++)
		;
	ck_assert_uint_lt(k, 4);
	open_meshes[k] = m;
	for (int l = 0; l < nlanes; l++)
		for (int i = 0; i < n && ok; i++)
			for (int j = i + 1; j < n && ok; j++)
				ok = tcp_pair(&m->fd[l][i][j],
				    &m->fd[l][j][i]) == 0 && (!over_rdma ||
				    rdma_pair(m, l, i, j) == 0);
	if (!ok)
		mesh_close(m);
	ck_assert_msg(ok, "cannot build a loopback %s mesh", over_rdma ?
	    "RDMA" : "TCP");
}

static void
mesh_open(struct mesh *m, int n)
{
	mesh_open_lanes(m, n, 1);
}

static void
teardown(void)
{
	crewless = -1;
	for (size_t k = 0; k < 4; k++)
		if (open_meshes[k] != NULL)
			mesh_close(open_meshes[k]);
}

/* ---- the nodes ---- */

static void
nodes_init(struct node *nd, int n, int coll)
{
	memset(nd, 0, sizeof(*nd) * MAXN);
	for (int i = 0; i < n; i++) {
		nd[i].coll = coll;
		nd[i].efd = -1;
	}
}

static void	assert_failed(const struct node *, int, int, const char *);
static void	wire_case(struct mesh *, int, size_t);

/* The run's algorithm (ALGO_AUTO: by the model, from cost). */
static int algo = ALGO_RING;
static struct link_cost cost = { LINK_ALPHA_NS_DEFAULT, LINK_BETA_PS_DEFAULT,
    LINK_GAMMA_PS_DEFAULT, 0 };

static int
node_call(struct node *nd)
{
	struct xfer *x = &nd->x;

	switch (nd->coll) {
	case COLL_ALLREDUCE:
		return node_allreduce(x, nd->src != NULL ? nd->src : nd->buf,
		    nd->buf, nd->count, nd->dtype, nd->op);
	case COLL_BROADCAST:
		return node_broadcast(x, nd->buf, nd->count, nd->root);
	case COLL_ALLGATHER:
		return ring_allgather(x, nd->buf, nd->offs, nd->lens);
	default:
		return ring_barrier(x);
	}
}

/* A node that misbehaves instead of taking part. */
static int
node_misbehave(struct node *nd)
{
	uint8_t junk[WIRE_HDR_LEN + 24];
	uint64_t one = 1;
	uint32_t me = nd->x.me, n = nd->x.nnodes;

	switch (nd->role) {
	case DIE:
		for (uint32_t j = 0; j < n; j++)
			if (j != me) {
				close(nd->m->fd[0][me][j]);
				nd->m->fd[0][me][j] = -1;
			}
		return 0;
	case JUNK:
		memset(junk, 0xab, sizeof(junk));
		return write(nd->lk[(me + 1) % n].fd, junk, sizeof(junk)) ==
		    (ssize_t)sizeof(junk) ? 0 : -1;
	case ABORTER:
		msleep(100);
		return write(nd->efd, &one, sizeof(one)) == 8 ? 0 : -1;
	default:
		return 0;
	}
}

/*
 * Many small operations back to back with no pause between them, as an
 * engine runs them: a peer's next operation is often on the wire before
 * this node has read the end of the current one.
 */
#define SCRIPT_OPS	600
#define SCRIPT_SLOT	64		/* int32 per operation */

static int32_t
script_val(int r, int k, size_t i)
{
	return (int32_t)((k + 1) * 1000 + r * 7 + (int)i);
}

static int
node_script(struct node *nd)
{
	struct xfer *x = &nd->x;
	uint32_t n = x->nnodes;
	uint64_t seq0 = x->hdr.seq;

	for (int r = 0; r < SCRIPT_OPS; r++) {
		int32_t *b = (int32_t *)nd->buf + (size_t)r * SCRIPT_SLOT;
		size_t count = 1 + (size_t)r % SCRIPT_SLOT;
		uint32_t root = (uint32_t)r % n;
		int coll = r % 3 == 0 ? COLL_ALLREDUCE : r % 3 == 1 ?
		    COLL_BROADCAST : COLL_BARRIER;

		x->hdr = (struct peer_ophdr){ seq0 + (uint64_t)r, (uint8_t)coll,
		    MCCL_INT32, MCCL_SUM, 0, root, count, 0 };
		if ((coll == COLL_ALLREDUCE &&
		    ring_allreduce(x, b, b, count, MCCL_INT32, MCCL_SUM) == -1) ||
		    (coll == COLL_BROADCAST &&
		    ring_broadcast(x, b, count * 4, root) == -1) ||
		    (coll == COLL_BARRIER && ring_barrier(x) == -1))
			return -1;
	}
	return 0;
}

static void *
node_main(void *arg)
{
	struct node *nd = arg;

	if (nd->delay_ms > 0)
		msleep(nd->delay_ms);
	nd->t_in = now_ns();
	if (nd->role == SCRIPT)
		nd->rc = node_script(nd);
	else
		nd->rc = nd->role == RUN ? node_call(nd) : node_misbehave(nd);
	nd->t_out = now_ns();
	return NULL;
}

static void
node_setup(struct mesh *m, struct node *nd, int i, size_t chunk,
    uint64_t deadline, int abort_fd)
{
	struct xfer *x = &nd->x;

	nd->m = m;
	for (int k = 0; k < m->nlanes; k++)
		for (int j = 0; j < m->n; j++) {
			struct link *l = &nd->lk[k * m->n + j];

			*l = (struct link){ .tp = &tcp_transport,
			    .fd = m->fd[k][i][j], .node = (uint32_t)j };
			nd->links[k * m->n + j] = j == i ? NULL : over_rdma ?
			    m->rdma[k][i][j] : l;
		}
	x->nnodes = (uint32_t)m->n;
	x->nlanes = (uint32_t)m->nlanes;
	x->me = (uint32_t)i;
	x->links = nd->links;
	x->names = names;
	x->abort_fd = abort_fd;
	x->deadline_ns = deadline;
	x->chunk = nd->chunk > 0 ? nd->chunk : chunk;
	x->scratch = xmalloc(2 * x->chunk * (size_t)m->nlanes);
	x->crew = NULL;
	if (with_crew && i != crewless)
		ck_assert_ptr_nonnull(x->crew = crew_new());
	x->algo = nd->algo ? nd->algo : algo;
	x->wire = nd->wire;
	x->cost = nd->cost.beta_ps != 0 ? nd->cost : cost;
	x->hdr = (struct peer_ophdr){ m->seq, (uint8_t)nd->coll,
	    (uint8_t)nd->dtype, (uint8_t)nd->op, 0, nd->root, nd->count,
	    (uint8_t)nd->wire };	/* the wire asked for, as engine.c */
}

/* Run one operation on every node, each on its own thread; join them all. */
static void
run_nodes(struct mesh *m, struct node *nd, size_t chunk, unsigned deadline_ms,
    int abort_fd)
{
	uint64_t deadline = deadline_ms ? now_ns() + deadline_ms * MS : 0;
	int i, started;

	for (i = 0; i < m->n; i++)
		node_setup(m, &nd[i], i, chunk, deadline, abort_fd);
	for (started = 0; started < m->n; started++)
		if (pthread_create(&nd[started].th, NULL, node_main,
		    &nd[started]) != 0)
			break;
	for (i = 0; i < started; i++)
		pthread_join(nd[i].th, NULL);
	for (i = 0; i < m->n; i++) {
		free(nd[i].x.scratch);
		nd[i].crew_threads = nd[i].x.crew != NULL ?
		    crew_size(nd[i].x.crew) : 0;
		crew_free(nd[i].x.crew);
	}
	m->seq++;
	ck_assert_int_eq(started, m->n);
}

static void
free_bufs(struct node *nd, int n)
{
	for (int i = 0; i < n; i++) {
		free(nd[i].buf);
		nd[i].buf = NULL;
	}
}

/* ---- allreduce ---- */

static uint64_t
took_ms(const struct node *nd)
{
	return (nd->t_out - nd->t_in) / MS;
}


static void
alloc_allreduce(struct node *nd, int n, size_t count)
{
	nodes_init(nd, n, COLL_ALLREDUCE);
	for (int k = 0; k < n; k++) {
		nd[k].buf = xmalloc(count * sizeof(float));
		memset(nd[k].buf, 0, count * sizeof(float));
		nd[k].count = count;
		nd[k].dtype = MCCL_FLOAT32;
		nd[k].op = MCCL_SUM;
	}
}


/* Inputs whose reductions are exact, so any order gives the reference. */
static double
input(int op, int node, size_t i)
{
	static const double prods[] = { 1, 2, -1, 0.5, -2 };

	switch (op) {
	case MCCL_SUM:
		return (double)((node * 37 + i * 11) % 61) - 30;
	case MCCL_PROD:
		return prods[(node * 3 + i) % 5];
	default:
		return (double)((node * 7919 + i * 104729) % 2001) - 1000;
	}
}

static void
put(void *buf, int dtype, size_t i, double v)
{
	switch (dtype) {
	case MCCL_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case MCCL_FLOAT64: ((double *)buf)[i] = v; break;
	case MCCL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	default: ((int64_t *)buf)[i] = (int64_t)v; break;
	}
}

static double
fold(int op, double a, double b)
{
	switch (op) {
	case MCCL_PROD: return a * b;
	case MCCL_MAX: return a > b ? a : b;
	default: return a + b;
	}
}

static int
is_float(int dtype)
{
	return dtype == MCCL_FLOAT32 || dtype == MCCL_FLOAT64;
}

static unsigned last_crew_threads;	/* allreduce_case's, fewest of a node */
static uint64_t last_lane_ns;		/* and node 0's lanes' time, */
static uint64_t last_lane_wait_ns;	/* of it, waiting for the last lane */

static void
allreduce_case(struct mesh *m, int dtype, int op, size_t count, size_t chunk)
{
	struct node nd[MAXN];
	size_t es = dtype_size(dtype), bytes = count * es;
	uint8_t *ref = xmalloc(bytes);
	int n = m->n;

	nodes_init(nd, n, COLL_ALLREDUCE);
	for (int k = 0; k < n; k++) {
		nd[k].buf = xmalloc(bytes);
		nd[k].count = count;
		nd[k].dtype = dtype;
		nd[k].op = op;
	}
	for (size_t i = 0; i < count; i++) {
		double v = input(op, 0, i), w;

		for (int k = 0; k < n; k++) {
			/* no 0.5 in an integer product */
			w = input(op, k, i);
			if (!is_float(dtype) && w == 0.5)
				w = 1;
			put(nd[k].buf, dtype, i, w);
			v = k == 0 ? w : fold(op, v, w);
		}
		put(ref, dtype, i, v);
	}
	run_nodes(m, nd, chunk, 10000, -1);
	last_crew_threads = nd[0].crew_threads;
	last_lane_ns = nd[0].x.lane_ns;
	last_lane_wait_ns = nd[0].x.lane_wait_ns;
	for (int k = 0; k < n; k++) {
		if (nd[k].crew_threads < last_crew_threads)
			last_crew_threads = nd[k].crew_threads;
		ck_assert_msg(nd[k].rc == 0, "N=%d dtype %d op %d count %zu "
		    "chunk %zu: node %d: %s", n, dtype, op, count, chunk, k,
		    nd[k].x.err);
		ck_assert_msg(memcmp(nd[k].buf, ref, bytes) == 0, "N=%d dtype "
		    "%d op %d count %zu chunk %zu: node %d differs from the "
		    "reference", n, dtype, op, count, chunk, k);
	}
	free_bufs(nd, n);
	free(ref);
}

START_TEST(test_allreduce)
{
	static const int dtypes[] = { MCCL_FLOAT32, MCCL_FLOAT64, MCCL_INT32,
	    MCCL_INT64 };
	static const int ops[] = { MCCL_SUM, MCCL_MAX, MCCL_PROD };
	static const size_t chunks[] = { 4100, 65536 };	/* 4100: rounded down */
	int n = 2 + _i;
	size_t counts[] = { 0, 1, (size_t)n - 1, 7, 1000, 100003 };
	struct mesh m;

	mesh_open(&m, n);
	for (size_t d = 0; d < 4; d++)
		for (size_t o = 0; o < 3; o++)
			for (size_t c = 0; c < 6; c++)
				for (size_t k = 0; k < 2; k++)
					allreduce_case(&m, dtypes[d], ops[o],
					    counts[c], chunks[k]);
	/* AVG is reduced as SUM; the caller divides. */
	allreduce_case(&m, MCCL_FLOAT32, MCCL_AVG, 1000, 4096);
	mesh_close(&m);
}
END_TEST

/* A float32 sum on n nodes of random inputs, the same for the same seed. */
static void
random_inputs(struct node *nd, int n, size_t count, unsigned seed)
{
	nodes_init(nd, n, COLL_ALLREDUCE);
	for (int k = 0; k < n; k++) {
		float *f = nd[k].buf = xmalloc(count * sizeof(float));

		for (size_t i = 0; i < count; i++)
			f[i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.3f;
		nd[k].count = count;
		nd[k].dtype = MCCL_FLOAT32;
		nd[k].op = MCCL_SUM;
	}
}

/*
 * Random floats summed on every node of m: sums depend on the order, yet
 * every node must end with node 0's bits.  Leaves the buffers in nd.
 */
static void
identical_case(struct mesh *m, struct node *nd, size_t count, size_t chunk,
    unsigned seed)
{
	int n = m->n;

	random_inputs(nd, n, count, seed);
	run_nodes(m, nd, chunk, 10000, -1);
	for (int k = 0; k < n; k++) {
		ck_assert_msg(nd[k].rc == 0, "node %d: %s", k, nd[k].x.err);
		ck_assert_msg(memcmp(nd[k].buf, nd[0].buf, count * 4) == 0,
		    "%d nodes, %u lanes, algorithm %s, count %zu: node %d's "
		    "sums differ from node 0's", n, nd[k].x.nlanes,
		    proto_algo_name(nd[k].x.hdr.algo), count, k);
	}
}

/* Random floats: sums depend on the order, yet every node must agree. */
START_TEST(test_allreduce_identical)
{
	int n = 3 + _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	identical_case(&m, nd, 100003, 4096, 42);
	mesh_close(&m);
	free_bufs(nd, n);
}
END_TEST

/* Recursive doubling, on 2 and 4 nodes: right, and the same on every node. */
START_TEST(test_doubling)
{
	static const int dtypes[] = { MCCL_INT32, MCCL_FLOAT32, MCCL_FLOAT64 };
	static const int ops[] = { MCCL_SUM, MCCL_MAX, MCCL_PROD };
	static const size_t counts[] = { 0, 1, 7, 1000 };
	int n = _i == 0 ? 2 : 4;
	struct node nd[MAXN];
	struct mesh m;

	algo = ALGO_DOUBLING;
	mesh_open(&m, n);
	for (size_t d = 0; d < 3; d++)
		for (size_t o = 0; o < 3; o++)
			for (size_t c = 0; c < 4; c++)
				allreduce_case(&m, dtypes[d], ops[o], counts[c],
				    4096);
	identical_case(&m, nd, 1000, 4096, 7);
	mesh_close(&m);
	algo = ALGO_RING;
	free_bufs(nd, n);
}
END_TEST

/*
 * The pairs recursive doubling talks over, which a job links at its start:
 * symmetric, log2 p of them for a node of the first power of two p (one
 * more where a helper folds into it), the node folded into for a helper.
 */
START_TEST(test_pairs_with)
{
	for (uint32_t n = 1; n <= 300; n++) {
		uint32_t pow2 = 1, lg = 0;

		while (pow2 * 2 <= n) {
			pow2 *= 2;
			lg++;
		}
		for (uint32_t me = 0; me < n; me++) {
			uint32_t deg = 0;

			for (uint32_t q = 0; q < n; q++) {
				ck_assert_int_eq(ring_pairs_with(me, q, n),
				    ring_pairs_with(q, me, n));
				deg += (uint32_t)ring_pairs_with(me, q, n);
			}
			if (me >= pow2) {
				ck_assert_uint_eq(deg, 1);
				ck_assert(ring_pairs_with(me, me - pow2, n));
			} else
				ck_assert_uint_eq(deg, lg + (me + pow2 < n));
			ck_assert(!ring_pairs_with(me, me, n));
			ck_assert(!ring_pairs_with(me, n, n));
		}
	}
}
END_TEST

/*
 * Every algorithm on 2 to 8 nodes, so on powers of two and on the node
 * counts the fold serves: right against the reference, with frames cut
 * at 4096 bytes so the pairwise steps pipeline their reductions.
 */
START_TEST(test_algorithms)
{
	static const int dtypes[] = { MCCL_FLOAT64, MCCL_INT32 };
	static const int ops[] = { MCCL_SUM, MCCL_MAX, MCCL_PROD };
	int n = 2 + _i % 7;
	size_t counts[] = { 0, 1, (size_t)n - 1, 7, 1000, 30011 };
	struct mesh m;

	algo = ALGO_DOUBLING + _i / 7;
	mesh_open(&m, n);
	for (size_t d = 0; d < 2; d++)
		for (size_t o = 0; o < 3; o++)
			for (size_t c = 0; c < 6; c++)
				allreduce_case(&m, dtypes[d], ops[o], counts[c],
				    4100);
	mesh_close(&m);
	algo = ALGO_RING;
}
END_TEST

/* Random floats by each algorithm: every node ends with the same bits. */
START_TEST(test_algorithms_identical)
{
	int n = 3 + _i % 6;
	struct node nd[MAXN];
	struct mesh m;

	algo = ALGO_RING + _i / 6;
	mesh_open(&m, n);
	identical_case(&m, nd, 20011, 4096, 11);
	mesh_close(&m);
	for (int k = 0; k < n; k++)
		ck_assert_uint_eq(nd[k].x.hdr.algo, (unsigned)algo);
	algo = ALGO_RING;
	free_bufs(nd, n);
}
END_TEST

/*
 * Out of place, as the engine runs a lone local rank's op (the node's
 * contribution read from src, the result written to buf): the very bits
 * of the same op in place, src untouched, and every byte of buf written
 * (it starts as junk).
 */
static void
out_of_place_case(struct mesh *m, size_t count, size_t chunk, unsigned seed)
{
	struct node want[MAXN], nd[MAXN];
	void *src[MAXN], *orig[MAXN];
	size_t bytes = count * sizeof(float);
	int n = m->n;

	identical_case(m, want, count, chunk, seed);
	random_inputs(nd, n, count, seed);
	for (int k = 0; k < n; k++) {
		src[k] = nd[k].buf;
		orig[k] = xmalloc(bytes);
		memcpy(orig[k], src[k], bytes);
		nd[k].src = src[k];
		nd[k].buf = xmalloc(bytes);
		memset(nd[k].buf, 0xab, bytes);
	}
	run_nodes(m, nd, chunk, 10000, -1);
	for (int k = 0; k < n; k++) {
		ck_assert_msg(nd[k].rc == 0, "node %d: %s", k, nd[k].x.err);
		ck_assert_msg(memcmp(nd[k].buf, want[k].buf, bytes) == 0,
		    "%d nodes, algorithm %s, count %zu, chunk %zu: node %d's "
		    "result out of place differs from in place", n,
		    proto_algo_name(nd[k].x.hdr.algo), count, chunk, k);
		ck_assert_msg(memcmp(src[k], orig[k], bytes) == 0, "node %d's "
		    "send buffer changed", k);
		free(src[k]);
		free(orig[k]);
	}
	free_bufs(want, n);
	free_bufs(nd, n);
}

START_TEST(test_out_of_place)
{
	static const size_t counts[] = { 0, 1, 7, 30011, 262144 * 3 + 7 };
	int n = 2 + _i % 3;
	struct mesh m;

	algo = ALGO_RING + _i / 3;
	mesh_open_lanes(&m, n, 2);
	for (size_t c = 0; c < 5; c++)
		out_of_place_case(&m, counts[c], c % 2 ? 4100 : 65536,
		    7 + (unsigned)c);
	mesh_close(&m);
	algo = ALGO_RING;
}
END_TEST

/*
 * AUTO on 2 to 8 nodes, at sizes on either side of the model's boundaries:
 * every node runs what algo_choose predicts fastest from the job's cost
 * (which test_algo checks against the model worked by hand), the sum is
 * right, and each node count runs at least two algorithms.
 */
START_TEST(test_algo_auto)
{
	static const size_t counts[] = { 2, 1000, 11088, 17543, 66666, 70000 };
	int n = 2 + _i, seen = 0;
	struct node nd[MAXN];
	struct mesh m;

	algo = ALGO_AUTO;
	mesh_open(&m, n);
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		int want = algo_choose(COLL_ALLREDUCE, ALGO_AUTO, (uint32_t)n,
		    counts[c] * 4, 0, &cost);

		alloc_allreduce(nd, n, counts[c]);
		for (int k = 0; k < n; k++)
			for (size_t i = 0; i < counts[c]; i++)
				((float *)nd[k].buf)[i] = (float)(k + 1);
		run_nodes(&m, nd, 65536, 10000, -1);
		for (int k = 0; k < n; k++) {
			ck_assert_msg(nd[k].rc == 0, "node %d: %s", k,
			    nd[k].x.err);
			ck_assert_msg(nd[k].x.hdr.algo == (unsigned)want, "%d "
			    "nodes, %zu floats: %s, expected %s", n, counts[c],
			    proto_algo_name(nd[k].x.hdr.algo),
			    proto_algo_name(want));
			ck_assert_float_eq(((float *)nd[k].buf)[counts[c] - 1],
			    (float)(n * (n + 1) / 2));
		}
		seen |= 1 << want;
		free_bufs(nd, n);
		m.seq++;
	}
	mesh_close(&m);
	ck_assert_msg(__builtin_popcount((unsigned)seen) >= 2, "%d nodes ran "
	    "one algorithm only", n);
	algo = ALGO_RING;
}
END_TEST

/*
 * Nodes whose link costs differ choose differently: the op fails on every
 * node, naming both algorithms, instead of hanging.  (mccld hands all the
 * nodes of a job the same cost; this is what the header check is for.)
 */
START_TEST(test_algo_auto_disagree)
{
	struct node nd[MAXN];
	struct mesh m;

	algo = ALGO_AUTO;
	mesh_open(&m, 2);
	alloc_allreduce(nd, 2, 50000);		/* 200 KB: the ring, by default */
	nd[1].cost = (struct link_cost){ 2500000, 800, 250, 0 };	/* doubling */
	run_nodes(&m, nd, 65536, 3000, -1);
	mesh_close(&m);
	for (int k = 0; k < 2; k++) {
		assert_failed(nd, k, MCCL_ERR_INVALID_ARGUMENT, NULL);
		ck_assert_msg(strstr(nd[k].x.err, "by ring") != NULL &&
		    strstr(nd[k].x.err, "by doubling") != NULL, "node %d: %s",
		    k, nd[k].x.err);
	}
	free_bufs(nd, 2);
	algo = ALGO_RING;
}
END_TEST

/*
 * Ring allreduces on 2 and 3 lanes, one of them reversed: right against
 * the reference, the same bits on every node, and below 1 MiB a lane,
 * fewer lanes (the extra links stay idle, so the op still completes).
 */
START_TEST(test_lanes)
{
	int n = 2 + _i % 3, nlanes = 2 + _i / 3;
	size_t counts[] = { 0, 5, 262143, 262144 * 3 + 7 };	/* float32 */
	struct node nd[MAXN];
	struct mesh m;

	mesh_open_lanes(&m, n, nlanes);
	allreduce_case(&m, MCCL_INT32, MCCL_SUM, 1000003, 65536);
	allreduce_case(&m, MCCL_FLOAT64, MCCL_MAX, 300001, 4100);
	for (size_t c = 0; c < 4; c++) {
		identical_case(&m, nd, counts[c], 65536, 5 + (unsigned)c);
		free_bufs(nd, n);
	}
	mesh_close(&m);
}
END_TEST

/*
 * On a crew, a large allreduce runs each lane on a thread (the caller's
 * and one more per lane), a small one (one lane) on the caller's alone.
 * The lanes' time is counted for each lane from their start to the last
 * one's end; the last lane to end waits for none.
 */
START_TEST(test_crew_threads)
{
	int nlanes = 2 + _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open_lanes(&m, 3, nlanes);
	allreduce_case(&m, MCCL_FLOAT32, MCCL_SUM, (size_t)nlanes << 18,
	    65536);
	ck_assert_uint_eq(last_crew_threads, (unsigned)nlanes - 1);
	ck_assert_uint_gt(last_lane_ns, 0);
	ck_assert_uint_eq(last_lane_ns % (unsigned)nlanes, 0);
	ck_assert_uint_le(last_lane_wait_ns * (unsigned)nlanes,
	    last_lane_ns * (unsigned)(nlanes - 1));
	identical_case(&m, nd, 1000, 65536, 3);
	ck_assert_uint_eq(nd[0].crew_threads, 0);
	ck_assert_uint_eq(nd[0].x.lane_ns, 0);
	free_bufs(nd, 3);
	mesh_close(&m);
}
END_TEST

/*
 * A large allreduce hands out its last quarter in pieces as node 0's lanes
 * finish; a node that cannot put its lanes on threads runs them one after
 * the other (node 0 then hands every piece to lane 0).  Nodes of both
 * kinds in one op: the sums are right and the same bits everywhere, the
 * leader crewless or not, over 2 to 4 nodes and 2 or 3 lanes, on a
 * narrowed wire too; and the same sums when every node has its threads.
 */
START_TEST(test_pieces_crewless)
{
	int n = 2 + _i % 3, nlanes = 2 + (_i / 3) % 2;
	struct node nd[MAXN];
	struct mesh m;

	size_t count = 3000017;
	float *first = xmalloc(count * sizeof(float));

	crewless = _i / 6 ? n - 1 : 0;
	mesh_open_lanes(&m, n, nlanes);
	allreduce_case(&m, MCCL_INT64, MCCL_SUM, 700001, 65536);
	allreduce_case(&m, MCCL_FLOAT32, MCCL_MAX, 1 << 20, 4100);
	identical_case(&m, nd, count, 65536, 11);
	memcpy(first, nd[0].buf, count * sizeof(float));
	free_bufs(nd, n);
	out_of_place_case(&m, 1500007, 65536, 13);
	wire_case(&m, MCCL_BFLOAT16, ((size_t)3 << 18) + 5);
	/* Every node on threads now: the pieces go to other lanes, the
	   float sums come out the same. */
	crewless = -1;
	identical_case(&m, nd, count, 65536, 11);
	ck_assert_msg(memcmp(first, nd[0].buf, count * sizeof(float)) == 0,
	    "the sums depend on which lanes took the pieces");
	free_bufs(nd, n);
	free(first);
	mesh_close(&m);
}
END_TEST

/* A lane's link dies mid-op: the op fails naming the node, none hangs. */
START_TEST(test_lane_death)
{
	struct node nd[MAXN];
	struct mesh m;

	mesh_open_lanes(&m, 3, 2);
	alloc_allreduce(nd, 3, 4 << 20);
	/* Node 2's second lane to node 1 is gone before the op starts. */
	shutdown(m.fd[1][2][1], SHUT_RDWR);
	run_nodes(&m, nd, 65536, 3000, -1);
	mesh_close(&m);
	for (int k = 0; k < 3; k++) {
		ck_assert_msg(nd[k].rc == -1, "node %d succeeded", k);
		ck_assert_uint_lt(took_ms(&nd[k]), 4000);
	}
	/* On threads, the failed lane stops the other at once, not at the
	   deadline. */
	for (int k = 1; with_crew && k < 3; k++)
		ck_assert_msg(took_ms(&nd[k]) < 1500, "node %d's other lane "
		    "ran on for %llu ms: %s", k,
		    (unsigned long long)took_ms(&nd[k]), nd[k].x.err);
	ck_assert_msg(strstr(nd[1].x.err, "n2") != NULL ||
	    strstr(nd[2].x.err, "n1") != NULL, "neither end names the other: "
	    "\"%s\", \"%s\"", nd[1].x.err, nd[2].x.err);
	free_bufs(nd, 3);
}
END_TEST

/* ---- broadcast, allgather, barrier ---- */

static void
broadcast_case(struct mesh *m, uint32_t root, size_t bytes, size_t chunk)
{
	struct node nd[MAXN];
	int n = m->n;

	nodes_init(nd, n, COLL_BROADCAST);
	for (int k = 0; k < n; k++) {
		nd[k].buf = xmalloc(bytes);
		for (size_t i = 0; i < bytes; i++)
			((uint8_t *)nd[k].buf)[i] = (uint8_t)(k == (int)root ?
			    i * 7 + 3 : 0xee);
		nd[k].count = bytes;
		nd[k].root = root;
	}
	run_nodes(m, nd, chunk, 10000, -1);
	for (int k = 0; k < n; k++) {
		ck_assert_msg(nd[k].rc == 0, "N=%d root %u bytes %zu: node %d: "
		    "%s", n, root, bytes, k, nd[k].x.err);
		ck_assert_msg(memcmp(nd[k].buf, nd[root].buf, bytes) == 0,
		    "N=%d root %u bytes %zu: node %d differs", n, root, bytes,
		    k);
		ck_assert_uint_eq(nd[k].x.hdr.algo, (unsigned)algo);
	}
	free_bufs(nd, n);
}

START_TEST(test_broadcast)
{
	static const size_t sizes[] = { 0, 1, 13, 4099, 100001 };
	static const size_t chunks[] = { 4096, 65536 };
	int n = 2 + _i;
	struct mesh m;

	mesh_open(&m, n);
	for (uint32_t root = 0; root < (uint32_t)n; root++)
		for (size_t s = 0; s < 5; s++)
			for (size_t c = 0; c < 2; c++)
				broadcast_case(&m, root, sizes[s], chunks[c]);
	mesh_close(&m);
}
END_TEST

/*
 * The binomial tree, from every root, on 2 to 8 nodes (depths 1 to 3,
 * subtrees cut short where n is not a power of two): every node ends with
 * the root's bytes, and says it ran the tree.
 */
START_TEST(test_broadcast_tree)
{
	static const size_t sizes[] = { 0, 1, 4099, 100001 };
	int n = 2 + _i;
	struct mesh m;

	algo = ALGO_TREE;
	mesh_open(&m, n);
	for (uint32_t root = 0; root < (uint32_t)n; root++)
		for (size_t s = 0; s < 4; s++)
			broadcast_case(&m, root, sizes[s], s % 2 ? 4096 : 65536);
	mesh_close(&m);
	algo = ALGO_RING;
}
END_TEST

/* Node k's byte i of its block: every node must end with all of them. */
static void
gather_fill(uint8_t *b, const size_t *offs, const size_t *lens, int k)
{
	for (size_t i = 0; i < lens[k]; i++)
		b[offs[k] + i] = (uint8_t)(i * 13 + (size_t)k * 101 + 1);
}

/* Blocks with 3-byte gaps between them, which must stay untouched. */
static void
allgather_case(struct mesh *m, const size_t *lens, size_t chunk)
{
	struct node nd[MAXN];
	size_t offs[MAXN], total = 3;
	uint8_t *ref;
	int n = m->n;

	for (int k = 0; k < n; k++) {
		offs[k] = total;
		total += lens[k] + 3;
	}
	ref = xmalloc(total);
	memset(ref, 0xee, total);
	nodes_init(nd, n, COLL_ALLGATHER);
	for (int k = 0; k < n; k++) {
		nd[k].buf = xmalloc(total);
		memset(nd[k].buf, 0xee, total);
		gather_fill(nd[k].buf, offs, lens, k);
		gather_fill(ref, offs, lens, k);
		nd[k].offs = offs;
		nd[k].lens = lens;
		nd[k].count = total;
	}
	run_nodes(m, nd, chunk, 10000, -1);
	for (int k = 0; k < n; k++) {
		ck_assert_msg(nd[k].rc == 0, "node %d: %s", k, nd[k].x.err);
		ck_assert_msg(memcmp(nd[k].buf, ref, total) == 0, "N=%d chunk "
		    "%zu: node %d differs", n, chunk, k);
	}
	free_bufs(nd, n);
	free(ref);
}

START_TEST(test_allgather)
{
	static const size_t lens[][MAXN] = {
		{ 5000, 0, 12345, 1 },
		{ 0, 0, 0, 0 },
		{ 1, 1, 1, 1 },
		{ 0, 100003, 7, 65536 },
		{ 4096, 4096, 4096, 4096 },
	};
	struct mesh m;

	mesh_open(&m, 2 + _i);
	for (size_t p = 0; p < 5; p++) {
		allgather_case(&m, lens[p], 4096);
		allgather_case(&m, lens[p], 1000);
	}
	mesh_close(&m);
}
END_TEST

START_TEST(test_barrier)
{
	struct node nd[MAXN];
	struct mesh m;
	int n = 2 + _i;

	mesh_open(&m, n);
	for (int slow = 0; slow < n; slow++) {
		uint64_t last_in = 0, first_out = UINT64_MAX;

		nodes_init(nd, n, COLL_BARRIER);
		for (int k = 0; k < n; k++)
			nd[k].delay_ms = k == slow ? 80 : (unsigned)k * 10;
		run_nodes(&m, nd, 4096, 10000, -1);
		for (int k = 0; k < n; k++) {
			ck_assert_msg(nd[k].rc == 0, "node %d: %s", k,
			    nd[k].x.err);
			last_in = nd[k].t_in > last_in ? nd[k].t_in : last_in;
			first_out = nd[k].t_out < first_out ? nd[k].t_out :
			    first_out;
		}
		ck_assert_msg(first_out >= last_in, "a node left the barrier "
		    "before node %d entered", slow);
	}
	mesh_close(&m);
}
END_TEST

/* Different collectives back to back on the same links. */
START_TEST(test_mixed)
{
	struct mesh m;
	size_t lens[MAXN] = { 3, 0, 70000 };

	mesh_open(&m, 3);
	for (int r = 0; r < 3; r++) {
		allreduce_case(&m, MCCL_INT32, MCCL_SUM, 12345, 4096);
		broadcast_case(&m, (uint32_t)r, 77777, 8192);
		allgather_case(&m, lens, 4096);
		allreduce_case(&m, MCCL_FLOAT64, MCCL_MAX, 0, 4096);
		broadcast_case(&m, 1, 0, 4096);
		allreduce_case(&m, MCCL_FLOAT32, MCCL_PROD, 2, 4096);
	}
	mesh_close(&m);
}
END_TEST

/* What node k holds at element i of operation r once the script ran. */
static int32_t
script_want(int r, int k, size_t i, int n)
{
	int32_t sum = 0;

	if (i >= 1 + (size_t)r % SCRIPT_SLOT || r % 3 == 2)
		return script_val(r, k, i);	/* untouched, or a barrier */
	if (r % 3 == 1)
		return script_val(r, r % n, i);	/* broadcast from r % n */
	for (int j = 0; j < n; j++)
		sum += script_val(r, j, i);
	return sum;
}

START_TEST(test_back_to_back)
{
	size_t len = (size_t)SCRIPT_OPS * SCRIPT_SLOT;
	int n = 2 + _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	nodes_init(nd, n, COLL_ALLREDUCE);
	for (int k = 0; k < n; k++) {
		int32_t *b = nd[k].buf = xmalloc(len * 4);

		nd[k].role = SCRIPT;
		for (size_t at = 0; at < len; at++)
			b[at] = script_val((int)(at / SCRIPT_SLOT), k,
			    at % SCRIPT_SLOT);
	}
	run_nodes(&m, nd, 4096, 20000, -1);
	mesh_close(&m);
	for (int k = 0; k < n; k++) {
		const int32_t *b = nd[k].buf;

		ck_assert_msg(nd[k].rc == 0, "node %d: %s", k, nd[k].x.err);
		for (size_t at = 0; at < len; at++) {
			int r = (int)(at / SCRIPT_SLOT);
			int32_t want = script_want(r, k, at % SCRIPT_SLOT, n);

			if (b[at] != want)
				ck_abort_msg("node %d op %d element %zu: %d, "
				    "expected %d", k, r, at % SCRIPT_SLOT, b[at],
				    want);
		}
	}
	free_bufs(nd, n);
}
END_TEST

/* ---- failures ---- */

static void
assert_failed(const struct node *nd, int k, int code, const char *name)
{
	ck_assert_msg(nd[k].rc == -1 && nd[k].x.code == code, "node %d: rc %d "
	    "code %d, expected code %d (%s)", k, nd[k].rc, nd[k].x.code, code,
	    nd[k].x.err);
	if (name != NULL)
		ck_assert_msg(strstr(nd[k].x.err, name) != NULL, "node %d: "
		    "\"%s\" does not name %s", k, nd[k].x.err, name);
}

/* Node 1 issues a different count: its neighbours see it at once. */
START_TEST(test_mismatch)
{
	int n = 2 + _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	alloc_allreduce(nd, n, 1001);
	for (int k = 0; k < n; k++)
		nd[k].count = k == 1 ? 1001 : 1000;
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	assert_failed(nd, 1, MCCL_ERR_INVALID_ARGUMENT, "n0");
	assert_failed(nd, 2 % n, MCCL_ERR_INVALID_ARGUMENT, "n1");
	ck_assert_msg(strstr(nd[1].x.err, "count 1000") != NULL &&
	    strstr(nd[1].x.err, "count 1001") != NULL, "%s", nd[1].x.err);
	/* Node 0 checks node 2, which agrees: it waits for the deadline. */
	if (n == 3)
		assert_failed(nd, 0, MCCL_ERR_TIMEOUT, "n2");
	for (int k = 0; k < n; k++)
		ck_assert_uint_lt(took_ms(&nd[k]), 3000);
	free_bufs(nd, n);
}
END_TEST

/*
 * Every node but the last broadcasts 12 floats from node 0, by algo (0:
 * the run's); the last runs an allreduce of them.
 */
static void
bcast_but_last(struct node *nd, int n, int algo_of_bcast)
{
	alloc_allreduce(nd, n, 12);
	for (int k = 0; k < n - 1; k++) {
		nd[k].coll = COLL_BROADCAST;
		nd[k].count = 12 * sizeof(float);
		nd[k].root = 0;
		nd[k].algo = algo_of_bcast;
	}
}

/*
 * Every node but the last broadcasts from node 0; the last runs an
 * allreduce.  The chain's data reaches nodes 1..n-2 before the last node
 * can tell: none of them may succeed.  The root and the last node see the
 * mismatch themselves; the others wait for the last node's header, which
 * its allreduce never sends (in mccld the abort of the nodes that saw it
 * reaches them instead, with the reason).
 */
START_TEST(test_mismatch_bcast_last)
{
	int n = 3 + _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	bcast_but_last(nd, n, 0);
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	for (int k = 0; k < n; k += n - 1) {
		assert_failed(nd, k, MCCL_ERR_INVALID_ARGUMENT, NULL);
		ck_assert_msg(strstr(nd[k].x.err, "broadcast") != NULL &&
		    strstr(nd[k].x.err, "allreduce") != NULL, "node %d: %s", k,
		    nd[k].x.err);
		ck_assert_uint_lt(took_ms(&nd[k]), 1500);
	}
	for (int k = 1; k < n - 1; k++)
		assert_failed(nd, k, MCCL_ERR_TIMEOUT, names[n - 1]);
	free_bufs(nd, n);
}
END_TEST

/* Whether some node's error names both a and b. */
static int
some_error_names(const struct node *nd, int n, const char *a, const char *b)
{
	for (int k = 0; k < n; k++)
		if (strstr(nd[k].x.err, a) != NULL &&
		    strstr(nd[k].x.err, b) != NULL)
			return 1;
	return 0;
}

/*
 * The same by the tree: the data reaches most nodes before anyone can
 * tell, but no node returns before the confirmation has gone up to the
 * root and down again, so none succeeds.  Where the last node's parent is
 * the root (3 and 5 nodes), the root reads its ring header in place of a
 * confirmation and names the mismatch; on 7, no node reads it, and every
 * node fails by its deadline (in mccld, by the abort that follows).
 */
START_TEST(test_mismatch_bcast_tree)
{
	int n = 3 + 2 * _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	bcast_but_last(nd, n, ALGO_TREE);
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	for (int k = 0; k < n; k++)
		ck_assert_msg(nd[k].rc == -1, "node %d of %d succeeded", k, n);
	if (n != 7)
		ck_assert_msg(strstr(nd[0].x.err, "broadcast") != NULL &&
		    strstr(nd[0].x.err, "allreduce") != NULL, "%s",
		    nd[0].x.err);
	free_bufs(nd, n);
}
END_TEST

/*
 * One node broadcasts by the chain, the others by the tree: all fail, and
 * the root, reading the chain node's header where a confirmation should
 * be, names both.
 */
START_TEST(test_mismatch_bcast_algo)
{
	int n = 4;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	nodes_init(nd, n, COLL_BROADCAST);
	for (int k = 0; k < n; k++) {
		nd[k].buf = xmalloc(64);
		memset(nd[k].buf, k, 64);
		nd[k].count = 64;
		nd[k].algo = k == 2 ? ALGO_RING : ALGO_TREE;
	}
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	for (int k = 0; k < n; k++)
		ck_assert_msg(nd[k].rc == -1, "node %d succeeded", k);
	ck_assert_msg(some_error_names(nd, n, "by ring", "by tree"), "%s / %s",
	    nd[0].x.err, nd[2].x.err);
	free_bufs(nd, n);
}
END_TEST

/* Node 0 broadcasts from itself while node 1 runs an allreduce. */
START_TEST(test_mismatch_coll)
{
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, 2);
	alloc_allreduce(nd, 2, 12);
	nd[0].coll = COLL_BROADCAST;
	nd[0].count = 10;
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	/* The root checks node 1's header too: both fail, naming both. */
	for (int k = 0; k < 2; k++) {
		assert_failed(nd, k, MCCL_ERR_INVALID_ARGUMENT, k ? "n0" : "n1");
		ck_assert_msg(strstr(nd[k].x.err, "broadcast") != NULL &&
		    strstr(nd[k].x.err, "allreduce") != NULL, "%s",
		    nd[k].x.err);
	}
	free_bufs(nd, 2);
}
END_TEST

/*
 * Node 1 runs another algorithm than the others.  On 2 nodes they share
 * the link and both fail naming both algorithms; on 4 the partners differ,
 * so some wait for the deadline, and say by which algorithm.  None hangs.
 */
START_TEST(test_mismatch_algo)
{
	int n = 2 + 2 * _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	alloc_allreduce(nd, n, 1000);
	algo = ALGO_RING;
	nd[1].algo = ALGO_RABENSEIFNER;
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	for (int k = 0; k < n; k++) {
		const char *mine = k == 1 ? "by rabenseifner" : "by ring";

		ck_assert_msg(nd[k].rc == -1, "node %d succeeded", k);
		ck_assert_uint_lt(took_ms(&nd[k]), 3000);
		ck_assert_msg(strstr(nd[k].x.err, mine) != NULL, "node %d: "
		    "\"%s\" does not say %s", k, nd[k].x.err, mine);
		if (n == 2)
			ck_assert_msg(strstr(nd[k].x.err, "by ring") &&
			    strstr(nd[k].x.err, "by rabenseifner"), "node %d: "
			    "\"%s\" does not name both", k, nd[k].x.err);
	}
	free_bufs(nd, n);
}
END_TEST

/* Node 1 closes its links instead of taking part. */
/*
 * One lane's link dies while the peer sits silent on the other: the op
 * fails at once naming the peer, by the dead lane's error (on a crew, the
 * dead lane stops the waiting one, whose "stopped" is not the error).
 */
START_TEST(test_lane_stops_lanes)
{
	struct node nd[MAXN];
	struct mesh m;

	mesh_open_lanes(&m, 2, 2);
	alloc_allreduce(nd, 2, 4 << 20);
	nd[1].role = IDLE;
	shutdown(m.fd[1][1][0], SHUT_RDWR);
	run_nodes(&m, nd, 65536, 4000, -1);
	mesh_close(&m);
	assert_failed(nd, 0, MCCL_ERR_PEER_FAILED, "node n1");
	ck_assert_msg(took_ms(&nd[0]) < 2000, "the live lane waited %llu ms "
	    "for the silent node", (unsigned long long)took_ms(&nd[0]));
	free_bufs(nd, 2);
}
END_TEST

START_TEST(test_peer_death)
{
	int n = 2 + _i;
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, n);
	alloc_allreduce(nd, n, 100003);
	nd[1].role = DIE;
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	for (int k = 0; k < n; k++)
		if (k != 1) {
			assert_failed(nd, k, MCCL_ERR_PEER_FAILED, "node n1");
			ck_assert_uint_lt(took_ms(&nd[k]), 1000);
		}
	free_bufs(nd, n);
}
END_TEST

/* Node 2 never shows up but keeps its links open. */
START_TEST(test_timeout)
{
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, 3);
	alloc_allreduce(nd, 3, 100003);
	nd[2].role = IDLE;
	run_nodes(&m, nd, 4096, 1000, -1);
	mesh_close(&m);
	assert_failed(nd, 0, MCCL_ERR_TIMEOUT, "timeout waiting for node n2: "
	    "no data from it");
	assert_failed(nd, 1, MCCL_ERR_TIMEOUT, "op seq 1");
	ck_assert_uint_eq(nd[0].x.blame, 2);	/* the main thread asks n2 */
	/* Not before the deadline (a thread may start late: measure from it). */
	for (int k = 0; k < 2; k++) {
		ck_assert_uint_ge(nd[k].t_out, nd[k].x.deadline_ns);
		ck_assert_uint_lt(took_ms(&nd[k]), 1800);
	}
	free_bufs(nd, 3);
}
END_TEST

/* Node 2 never shows up; the job is aborted 100 ms in. */
START_TEST(test_abort)
{
	struct node nd[MAXN];
	struct mesh m;
	int efd;

	mesh_open(&m, 3);
	efd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ne(efd, -1);
	alloc_allreduce(nd, 3, 100003);
	nd[2].role = ABORTER;
	nd[2].efd = efd;
	run_nodes(&m, nd, 4096, 5000, efd);
	mesh_close(&m);
	close(efd);
	for (int k = 0; k < 2; k++) {
		assert_failed(nd, k, MCCL_ERR_ABORTED, "job aborted");
		ck_assert_uint_lt(took_ms(&nd[k]), 1000);
	}
	free_bufs(nd, 3);
}
END_TEST

/* Different chunk sizes: each side gets a frame of the wrong length. */
START_TEST(test_protocol_chunk)
{
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, 2);
	alloc_allreduce(nd, 2, 100003);
	nd[1].chunk = 8192;
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	assert_failed(nd, 0, MCCL_ERR_PROTOCOL, "node n1 sent a 8192-byte");
	assert_failed(nd, 1, MCCL_ERR_PROTOCOL, "node n0 sent a 4096-byte");
	free_bufs(nd, 2);
}
END_TEST

START_TEST(test_protocol_junk)
{
	struct node nd[MAXN];
	struct mesh m;

	mesh_open(&m, 2);
	alloc_allreduce(nd, 2, 10);
	nd[1].role = JUNK;
	run_nodes(&m, nd, 4096, 2000, -1);
	mesh_close(&m);
	assert_failed(nd, 0, MCCL_ERR_PROTOCOL, "bad frame from node n1");
	ck_assert_int_eq(nd[1].rc, 0);
	free_bufs(nd, 2);
}
END_TEST

/*
 * A relay in the middle of one link: it passes every frame on, but gives
 * each 4-byte PEER_DATA frame (a piece's index, allreduce.c) its own
 * index instead.  send() with MSG_NOSIGNAL: the nodes' ends close first.
 */
struct relay {
	int		 in, out;
	int		 rewrite;
	uint32_t	 idx;
	unsigned	 rewritten;
	pthread_t	 th;
};

static int
relay_read(int fd, uint8_t *p, size_t len)
{
	ssize_t r;

	for (size_t got = 0; got < len; got += (size_t)r)
		if ((r = read(fd, p + got, len - got)) <= 0)
			return -1;
	return 0;
}

static int
relay_send(int fd, const uint8_t *p, size_t len)
{
	ssize_t r;

	for (size_t put = 0; put < len; put += (size_t)r)
		if ((r = send(fd, p + put, len - put, MSG_NOSIGNAL)) <= 0)
			return -1;
	return 0;
}

static void *
relay_main(void *arg)
{
	struct relay *r = arg;
	uint8_t hdr[WIRE_HDR_LEN], body[1 << 16];
	struct wire_hdr h;

	while (relay_read(r->in, hdr, sizeof(hdr)) == 0) {
		wire_hdr_decode(hdr, &h);
		if (h.len > sizeof(body) || relay_read(r->in, body, h.len) == -1)
			break;
		if (r->rewrite && h.type == PEER_DATA && h.len == 4) {
			wire_put_u32s(body, &r->idx, 1);
			r->rewritten++;
		}
		if (relay_send(r->out, hdr, sizeof(hdr)) == -1 ||
		    relay_send(r->out, body, h.len) == -1)
			break;
	}
	return NULL;
}

/*
 * Lane 0's link between nodes 0 and 1 through relays, both ways; rw[0]
 * carries node 0's frames.  The mesh owns the nodes' ends, rw the relays'.
 */
static void
relay_lane0(struct mesh *m, struct relay rw[2], uint32_t idx)
{
	int a[2], b[2];

	ck_assert_int_eq(tcp_pair(&a[0], &a[1]), 0);
	ck_assert_int_eq(tcp_pair(&b[0], &b[1]), 0);
	close(m->fd[0][0][1]);
	close(m->fd[0][1][0]);
	m->fd[0][0][1] = a[0];
	m->fd[0][1][0] = b[0];
	rw[0] = (struct relay){ .in = a[1], .out = b[1], .rewrite = 1,
	    .idx = idx };
	rw[1] = (struct relay){ .in = b[1], .out = a[1] };
	for (int d = 0; d < 2; d++)
		ck_assert_int_eq(pthread_create(&rw[d].th, NULL, relay_main,
		    &rw[d]), 0);
}

/*
 * Node 0 hands out a piece past the op's last (as a peer on another
 * protocol or a corrupted stream would): node 1 fails with an error that
 * names node 0 and the piece, and node 0 hangs past no deadline.
 */
START_TEST(test_protocol_piece)
{
	static const uint32_t bad[] = { 9, UINT32_MAX };
	struct node nd[MAXN];
	struct relay rw[2];
	struct mesh m;
	char want[96];

	mesh_open_lanes(&m, 2, 2);
	relay_lane0(&m, rw, bad[_i]);
	alloc_allreduce(nd, 2, 1 << 18);	/* 2 lanes, 8 pieces */
	run_nodes(&m, nd, 4096, 1000, -1);
	mesh_close(&m);
	for (int d = 0; d < 2; d++) {
		pthread_join(rw[d].th, NULL);
		close(rw[d].in);
	}
	ck_assert_uint_ge(rw[0].rewritten, 1);
	snprintf(want, sizeof(want), "node n0 passed on piece %u of an "
	    "allreduce cut into 8", bad[_i]);
	assert_failed(nd, 1, MCCL_ERR_PROTOCOL, want);
	/* Without threads node 0 hands lane 0 every piece and waits for
	   node 1 on the first; on threads lane 0 may have handed out only
	   the end while lane 1 took the pieces, and node 0 is done. */
	if (!with_crew)
		ck_assert_int_eq(nd[0].rc, -1);
	ck_assert_uint_lt(took_ms(&nd[0]), 3000);
	free_bufs(nd, 2);
}
END_TEST

/* One node: nothing to do. */
START_TEST(test_single)
{
	struct xfer x;
	struct link *none = NULL;
	float v = 3, w = 0;

	memset(&x, 0, sizeof(x));
	x.nnodes = 1;
	x.links = &none;
	x.abort_fd = -1;
	ck_assert_int_eq(ring_allreduce(&x, &v, &v, 1, MCCL_FLOAT32, MCCL_SUM),
	    0);
	ck_assert_int_eq(ring_broadcast(&x, &v, 4, 0), 0);
	ck_assert_int_eq(ring_barrier(&x), 0);
	ck_assert(v == 3);
	/* out of place, the result is the node's own contribution */
	ck_assert_int_eq(ring_allreduce(&x, &v, &w, 1, MCCL_FLOAT32, MCCL_SUM),
	    0);
	ck_assert(w == 3);
	w = 0;
	ck_assert_int_eq(node_allreduce(&x, &v, &w, 1, MCCL_FLOAT32, MCCL_SUM),
	    0);
	ck_assert(w == 3);
}
END_TEST

/* ---- a narrowed wire ---- */

/* A float in [-1, 1) from node k's element i, reproducible. */
static float
wire_input(int k, size_t i)
{
	uint64_t h = ((uint64_t)k * 0x9e3779b97f4a7c15ULL) ^
	    ((uint64_t)i * 0xbf58476d1ce4e5b9ULL);

	h ^= h >> 31;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 29;
	return (float)((double)(h >> 11) / 9007199254740992.0 * 2 - 1);
}

/*
 * The bound the README gives: |result - exact sum| <= (n + 1) u sum_k |x_k|,
 * u the wire format's unit roundoff (2^-8 bfloat16, 2^-11 float16), plus
 * float16's absolute spacing near zero per rounding.
 */
static double
wire_bound(int wire, int n, double abs_sum)
{
	double u = wire == MCCL_BFLOAT16 ? 0x1p-8 : 0x1p-11;

	return (n + 1) * u * abs_sum + (wire == MCCL_FLOAT16 ?
	    (n + 1) * 0x1p-24 : 0);
}

/*
 * Every node count from 2 to 6, both 16-bit formats: a float32 sum large
 * enough for the ring crosses narrowed, within the bound of the exact sum,
 * the same bits on every node; a small one (another algorithm) and a
 * non-sum go in float32, exactly.
 */
static void
wire_case(struct mesh *m, int wire, size_t count)
{
	int n = m->n, ring = algo_choose(COLL_ALLREDUCE, algo, (uint32_t)n,
	    count * 4, 1, &cost) == ALGO_RING;
	struct node nd[MAXN];
	double worst = 0;
	uint64_t saved = 0;

	alloc_allreduce(nd, n, count);
	for (int k = 0; k < n; k++) {
		nd[k].wire = wire;
		for (size_t i = 0; i < count; i++)
			((float *)nd[k].buf)[i] = wire_input(k, i);
	}
	run_nodes(m, nd, 65536, 10000, -1);
	for (int k = 0; k < n; k++) {
		ck_assert_msg(nd[k].rc == 0, "node %d: %s", k, nd[k].x.err);
		ck_assert_uint_eq(nd[k].x.wire_run, ring ? wire : 0);
		ck_assert_msg(memcmp(nd[k].buf, nd[0].buf, count * 4) == 0,
		    "N=%d %s: node %d's bits differ from node 0's", n,
		    dtype_name(wire), k);
		saved += nd[k].x.wire_saved;
		if (k == 0 || nd[k].crew_threads < last_crew_threads)
			last_crew_threads = nd[k].crew_threads;
	}
	/* in each half of the ring the nodes send every block n - 1 times
	   between them, each element 2 bytes short of float32's 4 */
	ck_assert_uint_eq(saved, ring ? 4 * (uint64_t)(n - 1) * count : 0);
	for (size_t i = 0; i < count; i++) {
		double exact = 0, abs_sum = 0, err;

		for (int k = 0; k < n; k++) {
			exact += wire_input(k, i);
			abs_sum += fabs(wire_input(k, i));
		}
		err = fabs(((float *)nd[0].buf)[i] - exact);
		ck_assert_msg(err <= (ring ? wire_bound(wire, n, abs_sum) :
		    abs_sum * n * 0x1p-23), "N=%d %s count %zu element %zu: "
		    "error %g past the bound %g", n, dtype_name(wire), count, i,
		    err, wire_bound(wire, n, abs_sum));
		if (err / abs_sum > worst)
			worst = err / abs_sum;
	}
	if (ring)	/* the rounding is there: not float32 exact */
		ck_assert_msg(worst > 0x1p-20, "N=%d %s: no rounding seen (%g)",
		    n, dtype_name(wire), worst);
	free_bufs(nd, n);
}

START_TEST(test_wire)
{
	int n = 2 + _i / 2, wire = _i % 2 ? MCCL_BFLOAT16 : MCCL_FLOAT16;
	struct mesh m;

	mesh_open(&m, n);
	algo = ALGO_AUTO;
	wire_case(&m, wire, 100003);
	wire_case(&m, wire, 40);
	mesh_close(&m);
}
END_TEST

/*
 * A large buffer on a narrowed wire goes in parts, one per lane (on a
 * crew, each on its thread): the same bound, the same bits everywhere.
 */
START_TEST(test_wire_lanes)
{
	int n = 2 + _i / 2, wire = _i % 2 ? MCCL_BFLOAT16 : MCCL_FLOAT16;
	struct mesh m;

	mesh_open_lanes(&m, n, LANES);
	algo = ALGO_AUTO;
	wire_case(&m, wire, ((size_t)LANES << 18) + 13);
	if (with_crew)
		ck_assert_uint_eq(last_crew_threads, LANES - 1);
	mesh_close(&m);
}
END_TEST

/* Infinities and NaNs cross the narrowed wire as what they are. */
START_TEST(test_wire_nonfinite)
{
	int wire = _i ? MCCL_BFLOAT16 : MCCL_FLOAT16, n = 3;
	size_t count = 50000;
	struct mesh m;
	struct node nd[MAXN];

	mesh_open(&m, n);
	algo = ALGO_RING;
	alloc_allreduce(nd, n, count);
	for (int k = 0; k < n; k++) {
		float *b = nd[k].buf;

		nd[k].wire = wire;
		for (size_t i = 0; i < count; i++)
			b[i] = 1.0f;
		b[5] = k == 0 ? INFINITY : 1.0f;
		b[7] = k == 1 ? NAN : 1.0f;
		b[9] = -INFINITY;
		b[30000] = k == 2 ? NAN : 1.0f;	/* another node's block */
	}
	run_nodes(&m, nd, 65536, 10000, -1);
	for (int k = 0; k < n; k++) {
		const float *b = nd[k].buf;

		ck_assert_msg(nd[k].rc == 0, "node %d: %s", k, nd[k].x.err);
		ck_assert(isinf(b[5]) && b[5] > 0);
		ck_assert(isnan(b[7]));
		ck_assert(isinf(b[9]) && b[9] < 0);
		ck_assert(isnan(b[30000]));
		ck_assert_float_eq(b[0], 3.0f);
		ck_assert_float_eq(b[count - 1], 3.0f);
	}
	free_bufs(nd, n);
	algo = ALGO_RING;
	mesh_close(&m);
}
END_TEST

/*
 * Nodes that disagree on the wire fail the op, naming it, and never hang:
 * a ring-sized op, and a 1 KiB one that no ring narrows (AUTO).
 */
static void
wire_mismatch(int use_algo, size_t count)
{
	struct mesh m;
	struct node nd[MAXN];
	int n = 3;

	mesh_open(&m, n);
	algo = use_algo;
	alloc_allreduce(nd, n, count);
	nd[1].wire = MCCL_BFLOAT16;
	run_nodes(&m, nd, 65536, 10000, -1);
	for (int k = 0; k < n; k++)
		ck_assert_msg(nd[k].rc == -1, "node %d ran on", k);
	ck_assert_msg(strstr(nd[0].x.err, "bfloat16 wire") != NULL ||
	    strstr(nd[2].x.err, "bfloat16 wire") != NULL, "%s / %s",
	    nd[0].x.err, nd[2].x.err);
	free_bufs(nd, n);
	algo = ALGO_RING;
	mesh_close(&m);
}

START_TEST(test_wire_mismatch)
{
	wire_mismatch(ALGO_RING, 50000);
	wire_mismatch(ALGO_AUTO, 256);
}
END_TEST

/*
 * Unchecked, in check's own process: the fake devices' directory, made
 * before the case's tests fork and removed after them, even when one
 * failed.
 */
static void
rdma_setup(void)
{
	strcpy(verbs_dir, "/tmp/test_ring.XXXXXX");
	if (mkdtemp(verbs_dir) == NULL) {
		perror("test_ring: mkdtemp");
		exit(1);
	}
	setenv("MCCL_FAKEVERBS_DIR", verbs_dir, 1);
	for (int i = 0; i < MAXN; i++)
		snprintf(conf_nodes[i].name, sizeof(conf_nodes[i].name), "%s",
		    names[i]);
	log_init(LOG_ERR, "test_ring");
	over_rdma = 1;
}

static void
rdma_teardown(void)
{
	char cmd[64];

	over_rdma = 0;
	unsetenv("MCCL_FAKEVERBS_DIR");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", verbs_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_ring: cannot remove %s\n", verbs_dir);
}

/* A case of t's iterations from to to (exclusive). */
static TCase *
tcase_from(Suite *s, const char *name, const TTest *t, int from, int to)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, t, from, to);
	suite_add_tcase(s, tc);
	return tc;
}

static TCase *
tcase(Suite *s, const char *name, const TTest *t, int n)
{
	return tcase_from(s, name, t, 0, n);
}

/*
 * A case that runs the same threads as the others over more node counts,
 * algorithms or sizes: its own worth is the results, which make check
 * checks in the optimised build (check-rdma, CK_INCLUDE_TAGS); the
 * sanitizers' runs leave it out (CK_EXCLUDE_TAGS).
 */
static void
matrix(TCase *tc)
{
	tcase_set_tags(tc, "matrix");
}

/* A case of tests run over RDMA. */
static TCase *
rdma_case(Suite *s, const char *name, const TTest *t, int n)
{
	TCase *tc = tcase(s, name, t, n);

	tcase_add_unchecked_fixture(tc, rdma_setup, rdma_teardown);
	return tc;
}

static void
crew_setup(void)
{
	with_crew = 1;
}

static void
crew_teardown(void)
{
	with_crew = 0;
}

/* A case of tests whose nodes run their lanes on crews. */
static TCase *
crew_case(Suite *s, const char *name, const TTest *t, int n)
{
	TCase *tc = tcase(s, name, t, n);

	tcase_add_unchecked_fixture(tc, crew_setup, crew_teardown);
	return tc;
}

static void
rdma_crew_setup(void)
{
	rdma_setup();
	crew_setup();
}

static void
rdma_crew_teardown(void)
{
	crew_teardown();
	rdma_teardown();
}

static void
rdma_crew_case(Suite *s, const char *name, const TTest *t, int n)
{
	tcase_add_unchecked_fixture(tcase(s, name, t, n), rdma_crew_setup,
	    rdma_crew_teardown);
}

int
main(void)
{
	Suite *s = suite_create("ring");
	TCase *more;
	SRunner *sr;
	int failed;

	tcase(s, "allreduce", test_allreduce, 3);
	tcase(s, "identical", test_allreduce_identical, 2);
	tcase(s, "doubling", test_doubling, 2);
	matrix(tcase(s, "pairs_with", test_pairs_with, 1));
	matrix(tcase(s, "algorithms", test_algorithms, 21));
	matrix(tcase(s, "algorithms_identical", test_algorithms_identical,
	    24));
	matrix(tcase(s, "out_of_place", test_out_of_place, 12));
	matrix(tcase(s, "algo_auto", test_algo_auto, 7));
	tcase(s, "algo_auto_disagree", test_algo_auto_disagree, 1);
	tcase(s, "lanes", test_lanes, 6);
	tcase(s, "lane_death", test_lane_death, 1);
	tcase(s, "lane_stops_lanes", test_lane_stops_lanes, 1);
	tcase(s, "broadcast", test_broadcast, 3);
	matrix(tcase(s, "broadcast_tree", test_broadcast_tree, 7));
	tcase(s, "allgather", test_allgather, 3);
	tcase(s, "barrier", test_barrier, 3);
	tcase(s, "mixed", test_mixed, 1);
	tcase(s, "back_to_back", test_back_to_back, 3);
	tcase(s, "mismatch", test_mismatch, 2);
	tcase(s, "mismatch_coll", test_mismatch_coll, 1);
	tcase(s, "mismatch_bcast_last", test_mismatch_bcast_last, 2);
	tcase(s, "mismatch_bcast_tree", test_mismatch_bcast_tree, 3);
	tcase(s, "mismatch_bcast_algo", test_mismatch_bcast_algo, 1);
	tcase(s, "mismatch_algo", test_mismatch_algo, 2);
	tcase(s, "peer_death", test_peer_death, 2);
	tcase(s, "timeout", test_timeout, 1);
	tcase(s, "abort", test_abort, 1);
	tcase(s, "protocol", test_protocol_chunk, 1);
	tcase(s, "junk", test_protocol_junk, 1);
	tcase(s, "piece_bad", test_protocol_piece, 2);
	tcase(s, "single", test_single, 1);
	matrix(tcase(s, "wire", test_wire, 10));
	tcase(s, "wire_lanes", test_wire_lanes, 4);
	tcase(s, "wire_nonfinite", test_wire_nonfinite, 2);
	tcase(s, "wire_mismatch", test_wire_mismatch, 1);
	/* The engine again, over the RDMA transport (the fake verbs). */
	/* Lanes on threads of their own. */
	crew_case(s, "crew_threads", test_crew_threads, LANES - 1);
	crew_case(s, "crew_allreduce", test_allreduce, 3);
	crew_case(s, "crew_lanes", test_lanes, 6);
	crew_case(s, "crew_lane_death", test_lane_death, 1);
	crew_case(s, "crew_lane_stops_lanes", test_lane_stops_lanes, 1);
	crew_case(s, "crew_peer_death", test_peer_death, 2);
	crew_case(s, "crew_timeout", test_timeout, 1);
	crew_case(s, "crew_abort", test_abort, 1);
	crew_case(s, "crew_mismatch", test_mismatch, 2);
	crew_case(s, "crew_wire_lanes", test_wire_lanes, 4);
	crew_case(s, "crew_pieces_crewless", test_pieces_crewless, 2);
	more = tcase_from(s, "crew_pieces_crewless_more", test_pieces_crewless,
	    2, 12);
	tcase_add_unchecked_fixture(more, crew_setup, crew_teardown);
	matrix(more);
	crew_case(s, "crew_piece_bad", test_protocol_piece, 2);
	rdma_case(s, "rdma_allreduce", test_allreduce, 3);
	matrix(rdma_case(s, "rdma_algorithms", test_algorithms, 21));
	matrix(rdma_case(s, "rdma_out_of_place", test_out_of_place, 12));
	rdma_case(s, "rdma_lanes", test_lanes, 6);
	rdma_case(s, "rdma_broadcast", test_broadcast, 3);
	rdma_case(s, "rdma_broadcast_tree", test_broadcast_tree, 3);
	rdma_case(s, "rdma_allgather", test_allgather, 3);
	rdma_case(s, "rdma_barrier", test_barrier, 3);
	rdma_case(s, "rdma_back_to_back", test_back_to_back, 3);
	rdma_case(s, "rdma_mismatch", test_mismatch, 2);
	rdma_case(s, "rdma_timeout", test_timeout, 1);
	rdma_case(s, "rdma_abort", test_abort, 1);
	rdma_case(s, "rdma_wire", test_wire, 2);
	rdma_crew_case(s, "rdma_crew_lanes", test_lanes, 6);
	rdma_crew_case(s, "rdma_crew_abort", test_abort, 1);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
