/*
 * colls.c: each collective mccl-perf runs: its start, where each rank's
 * data lies, the value expected at each index, and nccl-tests' bus factor.
 */
#include <stdlib.h>

#include "perf.h"

mccl_result_t
start_allreduce(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	const void	*src = inplace ? b->recvbuf : b->sendbuf;

	return mccl_allreduce(src, b->recvbuf, count, b->o->dtype->dtype,
	    b->o->op->op, b->comm, req);
}

mccl_result_t
start_broadcast(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	(void)inplace;
	return mccl_broadcast(b->recvbuf, count, b->o->dtype->dtype,
	    b->root, b->comm, req);
}

mccl_result_t
start_barrier(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	(void)count;
	(void)inplace;
	return mccl_barrier(b->comm, req);
}

/* Send and receive in the same places, count elements each. */
void
layout_same(const struct bench *b, size_t count, int inplace, struct layout *l)
{
	l->recv = b->recvbuf;
	l->send = inplace ? b->recvbuf : b->sendbuf;
	l->scount = l->rcount = count;
}

void
layout_reduce(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	layout_same(b, count, inplace, l);
	if (b->rank != b->root)
		l->rcount = 0;
}

/* In place, the rank's slot of the gathered buffer is its send buffer. */
void
layout_allgather(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	size_t per = count / (size_t)b->nranks;

	l->recv = b->recvbuf;
	l->rcount = count;
	l->scount = per;
	l->send = inplace ? (uint8_t *)b->recvbuf + (size_t)b->rank * per *
	    b->esize : b->sendbuf;
}

/* In place, the rank's block of its send buffer receives the result. */
void
layout_reduce_scatter(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	size_t per = count / (size_t)b->nranks;

	l->send = inplace ? b->recvbuf : b->sendbuf;
	l->scount = count;
	l->rcount = per;
	l->recv = inplace ? (uint8_t *)b->recvbuf + (size_t)b->rank * per *
	    b->esize : b->recvbuf;
}

/* At the root, in place, the root's slot of its receive buffer sends. */
void
layout_gather(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	int root = b->root;

	layout_allgather(b, count, inplace && b->rank == root, l);
	if (b->rank != root)
		l->rcount = 0;
}

/* At the root, in place, the root's slot of its send buffer receives. */
void
layout_scatter(const struct bench *b, size_t count, int inplace,
    struct layout *l)
{
	size_t per = count / (size_t)b->nranks;
	int root = b->root;

	l->send = b->sendbuf;
	l->scount = count;
	l->rcount = per;
	l->recv = inplace && b->rank == root ? (uint8_t *)b->sendbuf +
	    (size_t)root * per * b->esize : b->recvbuf;
}

/* The v-collectives: no in-place form; the whole send buffer goes out. */
void
layout_v(const struct bench *b, size_t count, int inplace, struct layout *l)
{
	(void)inplace;
	l->send = b->sendbuf;
	l->recv = b->recvbuf;
	l->rcount = count;
	l->scount = b->o->coll->start == start_allgatherv ? count /
	    (size_t)b->nranks : count;
}

mccl_result_t
start_gather(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_gather(b, count, inplace, &l);
	return mccl_gather(l.send, b->rank == b->root ? b->recvbuf :
	    NULL, count / (size_t)b->nranks, b->o->dtype->dtype,
	    b->root, b->comm, req);
}

mccl_result_t
start_scatter(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_scatter(b, count, inplace, &l);
	return mccl_scatter(b->rank == b->root ? l.send : NULL,
	    l.recv, l.rcount, b->o->dtype->dtype, b->root, b->comm,
	    req);
}

/* Even counts, blocks side by side: arrays k of b->vec, k < narrays. */
static void
vec_even(const struct bench *b, size_t per, int narrays)
{
	size_t n = (size_t)b->nranks;

	for (int k = 0; k < narrays; k += 2)
		for (size_t r = 0; r < n; r++) {
			b->vec[(size_t)k * n + r] = per;
			b->vec[(size_t)(k + 1) * n + r] = r * per;
		}
}

mccl_result_t
start_allgatherv(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	size_t per = count / (size_t)b->nranks;

	(void)inplace;
	vec_even(b, per, 2);
	return mccl_allgatherv(b->sendbuf, per, b->recvbuf, b->vec,
	    b->vec + b->nranks, b->o->dtype->dtype, b->comm, req);
}

mccl_result_t
start_alltoallv(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	size_t n = (size_t)b->nranks;

	(void)inplace;
	vec_even(b, count / n, 4);
	return mccl_alltoallv(b->sendbuf, b->vec, b->vec + n, b->recvbuf,
	    b->vec + 2 * n, b->vec + 3 * n, b->o->dtype->dtype, b->comm, req);
}

mccl_result_t
start_reduce(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_reduce(b, count, inplace, &l);
	return mccl_reduce(l.send, b->rank == b->root ? l.recv : NULL,
	    count, b->o->dtype->dtype, b->o->op->op, b->root, b->comm,
	    req);
}

mccl_result_t
start_allgather(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_allgather(b, count, inplace, &l);
	return mccl_allgather(l.send, l.recv, l.scount, b->o->dtype->dtype,
	    b->comm, req);
}

mccl_result_t
start_reduce_scatter(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_reduce_scatter(b, count, inplace, &l);
	return mccl_reduce_scatter(l.send, l.recv, l.rcount,
	    b->o->dtype->dtype, b->o->op->op, b->comm, req);
}

mccl_result_t
start_alltoall(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	struct layout l;

	layout_same(b, count, inplace, &l);
	return mccl_alltoall(l.send, l.recv, count / (size_t)b->nranks,
	    b->o->dtype->dtype, b->comm, req);
}

/* A ring: send to the right, receive from the left; done when both are. */
mccl_result_t
start_sendrecv(const struct bench *b, size_t count, int inplace,
    mccl_request_t **req)
{
	mccl_request_t *send;
	mccl_result_t r;
	int n = b->nranks;

	(void)inplace;
	if ((r = mccl_send(b->sendbuf, count, b->o->dtype->dtype,
	    (b->rank + 1) % n, 0, b->comm, &send)) != MCCL_SUCCESS)
		return r;
	if ((r = mccl_recv(b->recvbuf, count, b->o->dtype->dtype,
	    (b->rank + n - 1) % n, 0, b->comm, req)) != MCCL_SUCCESS)
		return r;
	return mccl_wait(send, b->o->timeout_ms);
}

double
want_allgather(const struct bench *b, size_t count, size_t j)
{
	size_t per = count / (size_t)b->nranks;

	return pattern_input(&b->pat, (int)(j / per), j % per);
}

/* Rank r's block is block r of the root's input. */
double
want_scatter(const struct bench *b, size_t count, size_t j)
{
	return pattern_input(&b->pat, b->root, (size_t)b->rank *
	    (count / (size_t)b->nranks) + j);
}

double
want_reduce_scatter(const struct bench *b, size_t count, size_t j)
{
	return expect_allreduce(b, (size_t)b->rank * (count /
	    (size_t)b->nranks) + j);
}

/* Block s of the receive buffer is block `rank` of rank s's send buffer. */
double
want_alltoall(const struct bench *b, size_t count, size_t j)
{
	size_t per = count / (size_t)b->nranks;

	return pattern_input(&b->pat, (int)(j / per), (size_t)b->rank * per +
	    j % per);
}

double
want_sendrecv(const struct bench *b, size_t count, size_t j)
{
	(void)count;
	return pattern_input(&b->pat, (b->rank + b->nranks - 1) % b->nranks, j);
}

double
busfactor_allreduce(int nranks)
{
	return 2.0 * (nranks - 1) / nranks;
}

double
busfactor_gather(int nranks)
{
	return (double)(nranks - 1) / nranks;
}

double
busfactor_one(int nranks)
{
	(void)nranks;
	return 1;
}

double
busfactor_zero(int nranks)
{
	(void)nranks;
	return 0;
}
