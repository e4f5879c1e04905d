/*
 * liveness.c: which peers a node heartbeats, and when a peer it does not
 * hear from is dead.  Pure decisions; peer.c owns the peers and clocks.
 *
 * In a cluster of up to heartbeat_mesh_max_nodes nodes every pair
 * heartbeats, as a node's CPU and the network can afford N - 1 pings a
 * second.  Past it each node heartbeats only the nodes at ring distances
 * 1, 2, 4, ... (2 log2 N of them: watched by as many in turn, so a node is
 * never watched by no one) and the nodes of its own jobs, whose failure it
 * must see at once.  A watcher that finds a node silent tells every node
 * (PEER_SILENT), and each pings it and calls it down only if it does not
 * answer either: a watcher whose own loop stalled, or whose one link to it
 * broke, takes no one else down.
 */
#include "control/control.h"

/* Whether self heartbeats peer on its own account, jobs aside. */
int
liveness_watches(uint32_t self, uint32_t peer, uint32_t nnodes,
    uint32_t mesh_max)
{
	uint32_t d;

	if (peer == self || peer >= nnodes || self >= nnodes)
		return 0;
	if (nnodes <= mesh_max)
		return 1;
	d = peer > self ? peer - self : self - peer;
	if (nnodes - d < d)
		d = nnodes - d;
	return (d & (d - 1)) == 0;
}

/* Whether the cluster runs the sparse overlay: only then is silence told. */
int
liveness_sparse(uint32_t nnodes, uint32_t mesh_max)
{
	return nnodes > mesh_max;
}

/*
 * At a heartbeat tick, what to do about a peer that is up.  A suspect
 * that has not answered for half the timeout is dead; so is a watched peer
 * silent for the whole timeout, counted from when it was last heard or
 * from when this node began to watch it, whichever is later (an unwatched
 * peer is not heard from while all is well).  Suspects and watched peers
 * are pinged.
 */
enum liveness
liveness_verdict(const struct liveness_clock *c, int watched,
    uint64_t now_ns, uint64_t timeout_ns)
{
	int suspect = c->suspect_ns != 0 && c->heard_ns <= c->suspect_ns;
	uint64_t since = c->heard_ns > c->watched_ns ? c->heard_ns :
	    c->watched_ns;

	if (suspect && now_ns - c->suspect_ns > timeout_ns / 2)
		return LIVE_UNANSWERED;
	if (watched && now_ns - since > timeout_ns)
		return LIVE_SILENT;
	return watched || suspect ? LIVE_PING : LIVE_QUIET;
}
