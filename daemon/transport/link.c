/*
 * link.c: a data link's set-up, common to every transport; the table of
 * transports; what each peer's links run over (mcclctl peers, metrics).
 *
 * Set-up runs on the thread that owns the links, in three steps over the
 * connected data socket, each end alike: offer (send PEER_DATA_LINK with
 * the best transport this end has for the peer), answer (read the peer's,
 * pick the transport both have, finish the link, send PEER_DATA_READY),
 * ready (read the peer's READY: from then on it can take data).  A thread
 * that sets up many links takes each step on all of them before the next,
 * so no end waits on one that waits on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "transport.h"

/* Most preferred first; TCP, last, every node has. */
static const struct transport *const transports[] = {
	&rdma_transport,
	&tcp_transport,
};
#define NTRANSPORTS	(sizeof(transports) / sizeof(transports[0]))

static size_t
rank_of(uint32_t wire)
{
	for (size_t i = 0; i < NTRANSPORTS; i++)
		if (transports[i]->wire == wire)
			return i;
	return NTRANSPORTS;
}

static const struct transport *
chosen(const struct link_want *w)
{
	return w->choice == LINK_ANY ? NULL : w->choice == LINK_RDMA ?
	    &rdma_transport : &tcp_transport;
}

/* Step 1: make this end's best offer and send it. */
int
link_offer(struct link_setup *s, char *err, size_t errlen)
{
	const struct transport *want = chosen(&s->want);

	s->tp = NULL;
	s->half = NULL;
	s->link = NULL;
	s->why[0] = '\0';
	for (size_t i = 0; i < NTRANSPORTS && s->half == NULL; i++) {
		if (want != NULL && transports[i] != want)
			continue;
		s->tp = transports[i];
		s->half = s->tp->offer(&s->want, &s->mine, s->why,
		    sizeof(s->why));
		if (s->half == NULL)
			log_debug("data link to node %s: no %s: %s",
			    s->want.peer, s->tp->name, s->why);
	}
	if (s->half == NULL)		/* the peer learns it below */
		memset(&s->mine, 0, sizeof(s->mine));
	s->mine.transport = s->half != NULL ? s->tp->wire : UINT32_MAX;
	s->mine.need = want != NULL ? want->wire + 1 : 0;
	if (dial_frame_send(s->fd, PEER_DATA_LINK, &s->mine) == -1) {
		snprintf(err, errlen, "sending DATA_LINK: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Neither end may be refused what it needs; the one both have, else.  The
 * words name both nodes: the job's other nodes get them too.
 */
static const struct transport *
agree(const struct link_setup *s, const struct peer_data_link *theirs,
    char *err, size_t errlen)
{
	size_t mine = rank_of(s->mine.transport), other = rank_of(
	    theirs->transport), pick = mine > other ? mine : other;
	const char *peer = s->want.peer, *me = s->want.me;

	if (mine >= NTRANSPORTS)
		snprintf(err, errlen, "node %s is set to transport %s and has "
		    "none to node %s: %s", me, s->tp->name, peer, s->why);
	else if (other >= NTRANSPORTS)
		snprintf(err, errlen, "node %s is set to transport %s and has "
		    "none to node %s (see its log)", peer, rank_of(theirs->need -
		    1) < NTRANSPORTS ? transports[rank_of(theirs->need - 1)]->name :
		    "?", me);
	else if (s->mine.need && pick != mine)
		snprintf(err, errlen, "node %s is set to transport %s, and "
		    "node %s does not offer it (no device for node %s?)", me,
		    s->tp->name, peer, me);
	else if (theirs->need && pick != other)
		snprintf(err, errlen, "node %s is set to transport %s, and "
		    "node %s does not offer it (see %s's log)", peer,
		    transports[other]->name, me, me);
	else
		return transports[pick];
	return NULL;
}

/* Step 2: read the peer's offer, finish the link, say it is ready. */
int
link_answer(struct link_setup *s, int abort_fd, uint64_t deadline_ns,
    char *err, size_t errlen)
{
	const struct transport *tp;
	struct peer_data_link theirs;
	char why[LINK_WHY_MAX] = "";
	void *half = s->half;

	if (dial_frame_read(s->fd, PEER_DATA_LINK, &theirs, abort_fd,
	    deadline_ns, err, errlen) == -1 ||
	    (tp = agree(s, &theirs, err, errlen)) == NULL)
		return -1;
	if (tp != s->tp) {
		s->tp->drop(s->half);
		s->tp = tp;
		s->half = half = tp->offer(&s->want, &s->mine, why,
		    sizeof(why));
	}
	s->half = NULL;			/* join owns it, and fd, from here */
	if (half == NULL || (s->link = tp->join(half, s->fd, &theirs, why,
	    sizeof(why))) == NULL) {
		if (half == NULL)
			close(s->fd);
		s->fd = -1;
		snprintf(err, errlen, "%s link: %s", tp->name, why);
		return -1;
	}
	s->fd = -1;
	s->link->node = s->node;
	wire_strlcpy(s->link->peer, s->want.peer, sizeof(s->link->peer));
	if (dial_frame_send(s->link->fd, PEER_DATA_READY, NULL) == -1) {
		snprintf(err, errlen, "sending DATA_READY: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- what each peer's links run over, for the log and mcclctl ---- */

struct peer_info {
	char		 transport[8];
	char		 device[sizeof(((struct link *)0)->device)];
};

static pthread_mutex_t	 info_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct peer_info	 info[LINK_NODES_MAX];

/* Said once in the log, when the first link or a change tells it. */
static void
peer_info_set(uint32_t node, const struct link *l)
{
	struct peer_info *i = &info[node];
	int changed;

	pthread_mutex_lock(&info_mtx);
	changed = strcmp(i->transport, l->tp->name) != 0 ||
	    strcmp(i->device, l->device) != 0;
	wire_strlcpy(i->transport, l->tp->name, sizeof(i->transport));
	wire_strlcpy(i->device, l->device, sizeof(i->device));
	pthread_mutex_unlock(&info_mtx);
	if (changed)
		log_info("node %s: data links over %s%s%s", l->peer,
		    l->tp->name, l->device[0] != '\0' ? " on " : "", l->device);
}

/* The transport and device of the node's latest link; "" before any. */
void
link_peer_info(uint32_t node, char *tp, size_t tplen, char *dev,
    size_t devlen)
{
	pthread_mutex_lock(&info_mtx);
	wire_strlcpy(tp, info[node].transport, tplen);
	wire_strlcpy(dev, info[node].device, devlen);
	pthread_mutex_unlock(&info_mtx);
}

/* Step 3: the peer can take data too. */
int
link_ready(struct link_setup *s, int abort_fd, uint64_t deadline_ns,
    char *err, size_t errlen)
{
	if (dial_frame_read(s->link->fd, PEER_DATA_READY, NULL, abort_fd,
	    deadline_ns, err, errlen) == -1)
		return -1;
	peer_info_set(s->node, s->link);
	return 0;
}

/*
 * One link alone, all three steps by the deadline: for a thread that sets
 * up one link at a time (send/recv's, mcclctl check's), whose peer is in
 * the set-up too.  Returns the link, or NULL with err; s is spent.
 */
struct link *
link_make(struct link_setup *s, int abort_fd, uint64_t deadline,
    char *err, size_t errlen)
{
	struct link *l = NULL;

	if (link_offer(s, err, errlen) == 0 && link_answer(s, abort_fd,
	    deadline, err, errlen) == 0 && link_ready(s, abort_fd, deadline,
	    err, errlen) == 0)
		l = s->link;
	else if (s->link != NULL)	/* made, then a step failed */
		link_close(s->link);
	s->link = NULL;
	link_setup_drop(s);
	return l;
}

/* Give back whatever set-up still holds (not the finished link). */
void
link_setup_drop(struct link_setup *s)
{
	if (s->half != NULL)
		s->tp->drop(s->half);
	s->half = NULL;
	if (s->fd != -1)
		close(s->fd);
	s->fd = -1;
}

/* ---- memory the engine sends from ---- */

void
link_mem_add(const void *key, void *base, size_t len)
{
	for (size_t i = 0; i < NTRANSPORTS; i++)
		if (transports[i]->mem_add != NULL)
			transports[i]->mem_add(key, base, len);
}

void
link_mem_forget(const void *key)
{
	for (size_t i = 0; i < NTRANSPORTS; i++)
		if (transports[i]->mem_forget != NULL)
			transports[i]->mem_forget(key);
}
