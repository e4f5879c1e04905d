/*
 * reload.c: SIGHUP's and mcclctl reload's work on the running settings:
 * re-read the file, apply what can change under running jobs, name what
 * needs a restart.  The process (mccld.c) says what each hook does and
 * what nodes appended to the cluster mean to it.
 */
#include <stdlib.h>
#include <string.h>

#include "mccld.h"

/* nc lists every node of old, unchanged and in order, then new ones. */
static int
nodes_appended(const struct config *old, const struct config *nc)
{
	if (nc->nnodes <= old->nnodes || nc->node_index != old->node_index)
		return 0;
	for (size_t i = 0; i < old->nnodes; i++)
		if (strcmp(old->nodes[i].name, nc->nodes[i].name) != 0 ||
		    strcmp(old->nodes[i].addr.host, nc->nodes[i].addr.host) ||
		    old->nodes[i].addr.port != nc->nodes[i].addr.port)
			return 0;
	return 1;
}

/*
 * New nodes at the end of the list join without disturbing anything.  The
 * old table goes at once: only the main thread reads it (a job's threads
 * have their copy, engine_conf), and the peers are pointed at the new one.
 */
static void
reload_nodes(struct config *c, struct config *nc, void (*grew)(uint32_t))
{
	uint32_t old_n = (uint32_t)c->nnodes;

	for (uint32_t i = 0; i < old_n; i++)	/* "rdma" waits for a restart */
		memcpy(nc->nodes[i].rdma_dev, c->nodes[i].rdma_dev,
		    sizeof(nc->nodes[i].rdma_dev));
	free(c->nodes);
	c->nodes = nc->nodes;
	c->nnodes = nc->nnodes;
	c->cluster_hash = config_cluster_hash(c);
	nc->nodes = NULL;
	nc->nnodes = 0;
	grew(old_n);
	log_info("reload: the cluster grew from %u to %zu nodes", old_n,
	    c->nnodes);
}

/* This node's devices to the nodes both lists have. */
static int
rdma_same(const struct config *a, const struct config *b)
{
	size_t n = a->nnodes < b->nnodes ? a->nnodes : b->nnodes;

	for (size_t i = 0; i < n; i++)
		if (strcmp(a->nodes[i].rdma_dev, b->nodes[i].rdma_dev) != 0)
			return 0;
	return 1;
}

static void
reload_restart(const char *key)
{
	log_warnx("reload: \"%s\" changed: restart mccld to apply it; "
	    "keeping the running value", key);
}

/* The node list: nodes added at the end apply, other changes need a
 * restart (the devices to reach peers through too). */
static void
reload_node_list(struct config *c, struct config *nc,
    void (*grew)(uint32_t))
{
	if (strcmp(nc->node_name, c->node_name) != 0)
		return;		/* config_apply named "node" */
	if (!rdma_same(nc, c))
		reload_restart("rdma");
	if (nodes_appended(c, nc))
		reload_nodes(c, nc, grew);
	else if (config_cluster_hash(nc) != config_cluster_hash(c))
		log_warnx("reload: \"nodes\": nodes were removed, renamed or "
		    "moved: restart mccld to apply that; keeping the running "
		    "list");
}

/*
 * SIGHUP: re-read the configuration; if it is valid, apply every key that
 * can change under running jobs (the log level, timeouts, heartbeats,
 * limits, the algorithm, transport and lanes of new jobs, the admin group, nodes
 * added at the end of the list) and name each other key that changed and
 * needs a restart.  Nothing is applied from an invalid file.  What a key
 * does beyond its value, hooks[] by the hook its row names; grew(old
 * count), when nodes were appended.
 */
int
config_reload(struct config *c, const char *path, int explicit_path,
    void (*const hooks[CONF_HOOK_MAX])(void), void (*grew)(uint32_t),
    char *err, size_t errlen)
{
	struct config nc;
	unsigned fired;

	if (config_load(path, explicit_path, &nc, err, errlen) == -1) {
		log_warnx("reload: %s; keeping the running configuration", err);
		return -1;
	}
	reload_node_list(c, &nc, grew);
	fired = config_apply(c, &nc, reload_restart);
	config_free(&nc);
	for (int h = CONF_HOOK_NONE + 1; h < CONF_HOOK_MAX; h++)
		if ((fired & (1u << h)) && hooks[h] != NULL)
			hooks[h]();
	config_warnings(c);
	log_info("reload: configuration applied (log level %s, heartbeat "
	    "%u/%u ms, max_jobs_per_uid %u, max_connections_per_uid %u)",
	    log_level_name(log_getlevel()), c->heartbeat_interval_ms,
	    c->heartbeat_timeout_ms, c->max_jobs_per_uid,
	    c->max_connections_per_uid);
	return 0;
}

