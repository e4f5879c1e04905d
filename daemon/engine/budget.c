/*
 * budget.c: memory held for users, per uid and in all (budget.h).  Any
 * thread may take and give: one mutex per budget.  A uid's entry lives
 * while it holds bytes.  The limits come from the main thread at start and
 * on reload; a reload below what is held refuses new takes only (the
 * differences below are taken only where they cannot wrap).
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine/bigmem.h"
#include "engine/budget.h"

struct budget scratch_budget = BUDGET_INIT(scratch_budget,
    "engine scratch memory", "max_scratch_bytes_per_uid",
    "max_scratch_bytes");

void
budget_limits(struct budget *b, uint64_t per_uid, uint64_t total)
{
	pthread_mutex_lock(&b->mtx);
	b->uid_max = per_uid;
	b->total_max = total;
	pthread_mutex_unlock(&b->mtx);
}

static struct budget_uid *
budget_find(struct budget *b, uid_t uid, int make)
{
	struct budget_uid *u;

	TAILQ_FOREACH(u, &b->uids, entry)
		if (u->uid == uid)
			return u;
	if (make && (u = calloc(1, sizeof(*u))) != NULL) {
		u->uid = uid;
		TAILQ_INSERT_TAIL(&b->uids, u, entry);
	}
	return u;
}

static void
budget_drop_empty(struct budget *b, struct budget_uid *u)
{
	if (u != NULL && u->bytes == 0) {
		TAILQ_REMOVE(&b->uids, u, entry);
		free(u);
	}
}

/* Count bytes for uid: -1, with the limit it would pass in err. */
int
budget_take(struct budget *b, uid_t uid, uint64_t bytes, const char *node,
    char *err, size_t errlen)
{
	struct budget_uid *u;
	int rc = -1;

	pthread_mutex_lock(&b->mtx);
	if ((u = budget_find(b, uid, 1)) == NULL)
		snprintf(err, errlen, "out of memory");
	else if (u->bytes > b->uid_max || bytes > b->uid_max - u->bytes)
		snprintf(err, errlen, "%llu bytes of %s more would pass the "
		    "limit of %llu for uid %u on node %s (%s; %llu held)",
		    (unsigned long long)bytes, b->what,
		    (unsigned long long)b->uid_max, (unsigned)uid, node,
		    b->uid_key, (unsigned long long)u->bytes);
	else if (b->total > b->total_max || bytes > b->total_max - b->total)
		snprintf(err, errlen, "%llu bytes of %s more would pass the "
		    "limit of %llu on node %s (%s; %llu held)",
		    (unsigned long long)bytes, b->what,
		    (unsigned long long)b->total_max, node, b->total_key,
		    (unsigned long long)b->total);
	else {
		u->bytes += bytes;
		b->total += bytes;
		rc = 0;
	}
	if (rc == -1)
		budget_drop_empty(b, u);
	pthread_mutex_unlock(&b->mtx);
	return rc;
}

void
budget_give(struct budget *b, uid_t uid, uint64_t bytes)
{
	struct budget_uid *u;

	pthread_mutex_lock(&b->mtx);
	b->total -= bytes;
	if ((u = budget_find(b, uid, 0)) != NULL) {
		u->bytes -= bytes;
		budget_drop_empty(b, u);
	}
	pthread_mutex_unlock(&b->mtx);
}

/* What uid holds; (uid_t)-1: everyone. */
uint64_t
budget_held(struct budget *b, uid_t uid)
{
	struct budget_uid *u;
	uint64_t n;

	pthread_mutex_lock(&b->mtx);
	if (uid == (uid_t)-1)
		n = b->total;
	else
		n = (u = budget_find(b, uid, 0)) != NULL ? u->bytes : 0;
	pthread_mutex_unlock(&b->mtx);
	return n;
}

/*
 * s's buffer, of at least bytes: grown within the budget (NULL, with why
 * in err, past a limit or out of memory).  The old contents are not kept:
 * a buffer is filled anew by every operation.
 */
void *
scratch_get(struct scratch *s, size_t bytes, char *err, size_t errlen)
{
	uint8_t *p;

	if (bytes <= s->len)
		return s->buf;
	if (budget_take(&scratch_budget, s->uid, bytes - s->len, s->node, err,
	    errlen) == -1)
		return NULL;
	if ((p = bigmem_alloc(bytes)) == NULL) {
		budget_give(&scratch_budget, s->uid, bytes - s->len);
		snprintf(err, errlen, "out of memory for %zu bytes of %s",
		    bytes, scratch_budget.what);
		return NULL;
	}
	bigmem_free(s->buf, s->len);
	s->buf = p;
	s->len = bytes;
	return p;
}

void
scratch_release(struct scratch *s)
{
	if (s->buf == NULL)
		return;
	bigmem_free(s->buf, s->len);
	budget_give(&scratch_budget, s->uid, s->len);
	s->buf = NULL;
	s->len = 0;
}
