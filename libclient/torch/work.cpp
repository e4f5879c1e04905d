/*
 * work.cpp: one operation's Work, and the group's two threads.  A Work's
 * request is completed by exactly one thread (its state says whose turn
 * it is), while libmccl lets several threads wait on one communicator at
 * once: the caller waiting on a small allreduce is never queued behind the
 * progress thread waiting on a large one.
 */
#include "backend.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <ATen/core/jit_type.h>

#include <stdexcept>

namespace mccl_torch {

/* How long the progress thread leaves a new operation to its caller's
 * wait(): a blocking call completes on its own thread, without a hand-off,
 * unless somebody asked for its future. */
static constexpr std::chrono::microseconds kCallerFirst{ 500 };

static std::vector<c10::Device>
devices_of(const Staging &s)
{
	if (!s.stream)
		return {};
	return { s.stream->device() };
}

WorkMCCL::WorkMCCL(ProcessGroupMCCL *pg, c10d::OpType type,
    const char *name, std::vector<at::Tensor> outputs, Staging staging)
    : c10d::Work(-1, type),
      pg_(c10::intrusive_ptr<BackendBase>::unsafe_reclaim_from_nonowning(pg)),
      name_(name),
      outputs_(std::move(outputs)), staging_(std::move(staging))
{
}

WorkMCCL::~WorkMCCL() = default;

mccl_result_t
WorkMCCL::start(const Starter &starter)
{
	{
		std::lock_guard<std::mutex> g(mutex_);
		if (state_ == State::DONE)	/* failed by an abort */
			return MCCL_ERR_ABORTED;
	}
	mccl_request_t *req = nullptr;
	mccl_result_t rc = starter(&req, &status_);
	std::unique_lock<std::mutex> lock(mutex_);

	started_at_ = std::chrono::steady_clock::now();
	if (rc != MCCL_SUCCESS) {
		finish_locked(lock, rc);
		return rc;
	}
	req_ = req;
	state_ = State::STARTED;
	cv_.notify_all();
	return rc;
}

void
WorkMCCL::fail(const std::string &why)
{
	std::unique_lock<std::mutex> lock(mutex_);

	if (state_ == State::DONE)
		return;
	exception_ = std::make_exception_ptr(Error(MCCL_ERR_ABORTED, why));
	done_unlock(lock);
}

/* Done: waiters wake, the future (if asked for) completes.  Returns with
 * lock released. */
void
WorkMCCL::done_unlock(std::unique_lock<std::mutex> &lock)
{
	state_ = State::DONE;
	completed_ = true;
	auto f = future_;
	lock.unlock();
	cv_.notify_all();
	if (f)
		fulfil(f);
}

void
WorkMCCL::succeeded()
{
	std::lock_guard<std::mutex> g(mutex_);

	state_ = State::DONE;
	completed_ = true;
}

/*
 * Complete the request, or wait for whoever does, at most timeout_ms
 * (< 0: the operation's own deadline).  Called with lock held; false when
 * the time ran out first.
 */
bool
WorkMCCL::complete(std::unique_lock<std::mutex> &lock, int timeout_ms)
{
	auto deadline = std::chrono::steady_clock::now() +
	    std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);

	for (;;) {
		if (state_ == State::DONE)
			return true;
		if (state_ == State::STARTED) {
			state_ = State::WAITING;
			lock.unlock();
			mccl_result_t rc = mccl_wait(req_, timeout_ms);
			lock.lock();
			if (rc == MCCL_ERR_TIMEOUT && timeout_ms >= 0) {
				/* mccl_wait's own deadline: still pending */
				state_ = State::STARTED;
				cv_.notify_all();
				return false;
			}
			finish_locked(lock, rc);
			return true;
		}
		/* queued behind its copies, or another thread waits on it */
		if (timeout_ms < 0)
			cv_.wait(lock);
		else if (cv_.wait_until(lock, deadline) ==
		    std::cv_status::timeout && state_ != State::DONE)
			return false;
	}
}

/* The request ended with rc: copy back, record, wake, fulfil. */
void
WorkMCCL::finish_locked(std::unique_lock<std::mutex> &lock,
    mccl_result_t rc)
{
	req_ = nullptr;
	if (rc == MCCL_SUCCESS) {
		try {
			copy_back();
		} catch (const std::exception &e) {
			exception_ = std::make_exception_ptr(Error(
			    MCCL_ERR_INTERNAL, std::string("mccl: ") + name_ +
			    ": copying the result back failed: " + e.what()));
		}
	} else {
		auto pg = pg_.lock();
		exception_ = std::make_exception_ptr(Error(rc,
		    std::string("mccl: ") + name_ + " failed: " +
		    mccl_strerror(rc) + ": " + (pg ? static_cast<
		    ProcessGroupMCCL *>(pg.get())->last_error() :
		    std::string("its group was destroyed"))));
	}
	done_unlock(lock);
	lock.lock();
}

void
WorkMCCL::copy_back()
{
	if (staging_.stream) {
		c10::StreamGuard guard(*staging_.stream);

		for (auto &p : staging_.back)
			p.first.copy_(p.second, /*non_blocking=*/true);
		c10::Event done(staging_.stream->device_type());
		done.record(*staging_.stream);
		staging_.copied_back.emplace(std::move(done));
	} else {
		for (auto &p : staging_.back)
			p.first.copy_(p.second);
	}
	/* the host buffers go back to the pool now (their copies back are
	 * queued), not when the Work goes */
	staging_.back.clear();
	staging_.keep.clear();
}

void
WorkMCCL::fulfil(const c10::intrusive_ptr<c10::ivalue::Future> &f)
{
	std::exception_ptr e;
	{
		std::lock_guard<std::mutex> g(mutex_);
		e = exception_;
	}
	if (e) {
		f->setError(e);
		return;
	}
	/* A CUDA future records its events on the current stream: the one the
	 * copies back were queued on. */
	std::optional<c10::StreamGuard> guard;
	if (staging_.stream)
		guard.emplace(*staging_.stream);
	f->markCompleted(c10::IValue(outputs_));
}

/* The group's progress thread should look at this Work now. */
void
WorkMCCL::wake_group()
{
	if (auto pg = pg_.lock())
		static_cast<ProcessGroupMCCL *>(pg.get())->wake();
}

bool
WorkMCCL::done()
{
	std::lock_guard<std::mutex> g(mutex_);

	return state_ == State::DONE;
}

bool
WorkMCCL::isCompleted()
{
	std::lock_guard<std::mutex> g(mutex_);

	if (state_ != State::DONE)
		urgent_ = true;		/* polled: the caller will not wait */
	if (urgent_)
		wake_group();
	return state_ == State::DONE;
}

bool
WorkMCCL::wait(std::chrono::milliseconds timeout)
{
	std::unique_lock<std::mutex> lock(mutex_);
	int ms = timeout == kNoTimeout ? -1 : (int)timeout.count();

	if (!complete(lock, ms))
		throw Error(MCCL_ERR_TIMEOUT, std::string("mccl: ") + name_ +
		    ": not completed within " + std::to_string(ms) +
		    " ms (Work.wait's timeout; the operation goes on)");
	std::exception_ptr e = exception_;
	lock.unlock();
	if (auto pg = pg_.lock())
		static_cast<ProcessGroupMCCL *>(pg.get())->retire();
	if (e)
		std::rethrow_exception(e);
	synchronize();
	return true;
}

void
WorkMCCL::synchronize()
{
	if (!staging_.copied_back)
		return;
	auto *impl = c10::impl::getDeviceGuardImpl(
	    staging_.stream->device_type());
	staging_.copied_back->block(impl->getStream(
	    staging_.stream->device()));
}

/* The progress thread's turn: complete it unless the caller is at it. */
void
WorkMCCL::progress()
{
	std::unique_lock<std::mutex> lock(mutex_);

	complete(lock, -1);
}

int
WorkMCCL::sourceRank() const
{
	std::lock_guard<std::mutex> g(mutex_);

	if (status_.source < 0)
		throw Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: sourceRank() is "
		    "known once a recv from any source completed");
	return status_.source;
}

std::vector<at::Tensor>
WorkMCCL::result()
{
	return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future>
WorkMCCL::getFuture()
{
	std::unique_lock<std::mutex> lock(mutex_);

	if (future_)
		return future_;
	future_ = c10::make_intrusive<c10::ivalue::Future>(
	    c10::ListType::create(c10::TensorType::get()),
	    devices_of(staging_));
	auto f = future_;
	bool done = state_ == State::DONE;
	urgent_ = true;
	lock.unlock();
	if (done)
		fulfil(f);
	else
		wake_group();
	return f;
}

/* ---- the group's threads ---- */

void
ProcessGroupMCCL::wake()
{
	progress_cv_.notify_one();
}

void
ProcessGroupMCCL::drain()
{
	std::unique_lock<std::mutex> lock(lock_);
	auto bound = timeout_.count() > 0 ? timeout_ :
	    std::chrono::milliseconds(30 * 60 * 1000);

	if (!starts_cv_.wait_for(lock, bound, [&] { return starts_.empty(); }))
		throw Error(MCCL_ERR_TIMEOUT, "mccl: operations still wait "
		    "for their CUDA copies after " +
		    std::to_string(bound.count()) + " ms");
}

void
ProcessGroupMCCL::hold_starts(double seconds)
{
	std::lock_guard<std::mutex> g(lock_);
	auto until = std::chrono::steady_clock::now() +
	    std::chrono::microseconds((int64_t)(seconds * 1e6));

	starts_.emplace_back(c10::intrusive_ptr<WorkMCCL>(),
	    [until](mccl_request_t **, mccl_status_t *) {
		std::this_thread::sleep_until(until);
		return MCCL_SUCCESS;
	    });
	starts_cv_.notify_one();
}

size_t
ProcessGroupMCCL::queued_starts()
{
	std::lock_guard<std::mutex> g(lock_);

	return starts_.size();
}

/*
 * A started Work, for the progress thread.  The thread is woken only where
 * a caller is not likely to wait on it: several operations in flight, or
 * one whose future or completion was asked for.  A caller that waits
 * retires what it completed (retire), so a loop of blocking calls wakes
 * nobody.
 */
void
ProcessGroupMCCL::started(const c10::intrusive_ptr<WorkMCCL> &w)
{
	std::lock_guard<std::mutex> g(lock_);
	bool first = pending_.empty();

	pending_.push_back(w);
	if (!first || w->urgent())
		progress_cv_.notify_one();
}

/* The caller completed a Work: what leads the queue and is done leaves. */
void
ProcessGroupMCCL::retire()
{
	std::lock_guard<std::mutex> g(lock_);

	while (!pending_.empty() && pending_.front()->done())
		pending_.pop_front();
}

/* CUDA operations, in call order: each started once its copies out ended
 * (and everything before it started: collectives keep their order). */
void
ProcessGroupMCCL::start_loop()
{
	std::unique_lock<std::mutex> lock(lock_);

	for (;;) {
		starts_cv_.wait(lock, [&] {
			return stopping_ || !starts_.empty();
		});
		if (starts_.empty())
			return;
		Start s = starts_.front();
		lock.unlock();
		if (!s.first) {		/* a hold (hold_starts) */
			s.second(nullptr, nullptr);
			lock.lock();
			starts_.pop_front();
			starts_cv_.notify_all();
			continue;
		}
		const Staging &st = s.first->staging();
		if (st.copied_out) {
			auto *impl = c10::impl::getDeviceGuardImpl(
			    st.stream->device_type());
			/* a private stream that waits for the copies: its
			 * synchronize() blocks this thread, not the caller's */
			c10::Stream side = impl->getStreamFromGlobalPool(
			    st.stream->device());
			st.copied_out->block(side);
			side.synchronize();
		}
		s.first->start(s.second);
		started(s.first);
		lock.lock();
		starts_.pop_front();
		starts_cv_.notify_all();
	}
}

/* Completes what nobody waits for, in the order it started. */
void
ProcessGroupMCCL::progress_loop()
{
	std::unique_lock<std::mutex> lock(lock_);

	for (;;) {
		if (pending_.empty()) {
			if (stopping_ && starts_.empty())
				return;
			progress_cv_.wait(lock);
			continue;
		}
		auto w = pending_.front();
		auto due = w->started_at() + kCallerFirst;
		if (!w->urgent() && !stopping_ && !w->done() &&
		    std::chrono::steady_clock::now() < due) {
			progress_cv_.wait_until(lock, due);
			continue;
		}
		pending_.pop_front();
		lock.unlock();
		w->progress();
		w.reset();
		lock.lock();
	}
}

} // namespace mccl_torch
