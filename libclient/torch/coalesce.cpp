/*
 * coalesce.cpp: one Work for several operations: torch's coalescing (the
 * _coalescing_manager, which DDP, FSDP and batch_isend_irecv use: the
 * operations called in between start as they are called, in order, and
 * endCoalescing gives one Work for them all), and a large CUDA tensor's
 * parts (ops.cpp).
 */
#include "backend.h"

#include <ATen/core/jit_type.h>

namespace mccl_torch {

CoalescedWork::CoalescedWork(
    std::vector<c10::intrusive_ptr<c10d::Work>> works, c10d::OpType type,
    std::optional<std::vector<at::Tensor>> outputs)
    : c10d::Work(-1, type), works_(std::move(works)),
      outputs_(std::move(outputs))
{
}

bool
CoalescedWork::isCompleted()
{
	for (auto &w : works_)
		if (!w->isCompleted())
			return false;
	return true;
}

/* Each in turn, within what is left of timeout; the first failure
 * raises once every one was waited for (none is left running). */
bool
CoalescedWork::wait(std::chrono::milliseconds timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	std::exception_ptr first;

	for (auto &w : works_) {
		auto left = timeout;
		if (timeout != kNoTimeout)
			left = std::max(std::chrono::milliseconds(0),
			    std::chrono::duration_cast<std::chrono::milliseconds>(
			    deadline - std::chrono::steady_clock::now()));
		try {
			w->wait(left);
		} catch (...) {
			if (!first)
				first = std::current_exception();
		}
	}
	if (first)
		std::rethrow_exception(first);
	return true;
}

void
CoalescedWork::synchronize()
{
	for (auto &w : works_)
		w->synchronize();
}

std::vector<at::Tensor>
CoalescedWork::result()
{
	if (outputs_)
		return *outputs_;
	std::vector<at::Tensor> all;
	for (auto &w : works_)
		for (auto &t : w->result())
			all.push_back(t);
	return all;
}

/* Completes when every operation's future did: their tensors in order,
 * or the first error. */
c10::intrusive_ptr<c10::ivalue::Future>
CoalescedWork::getFuture()
{
	if (future_)
		return future_;
	std::vector<c10::intrusive_ptr<c10::ivalue::Future>> parts;
	std::vector<c10::Device> devices;
	for (auto &w : works_) {
		parts.push_back(w->getFuture());
		for (auto &d : parts.back()->devices())
			if (std::find(devices.begin(), devices.end(), d) ==
			    devices.end())
				devices.push_back(d);
	}
	future_ = c10::make_intrusive<c10::ivalue::Future>(
	    c10::ListType::create(c10::TensorType::get()), devices);
	if (parts.empty()) {
		future_->markCompleted(c10::IValue(std::vector<at::Tensor>()));
		return future_;
	}
	struct Tally {
		std::mutex lock;
		size_t left;
		bool failed = false;
	};
	auto tally = std::make_shared<Tally>();
	tally->left = parts.size();
	auto all = future_;
	auto results = result();
	for (auto &p : parts)
		p->addCallback([tally, all, results](c10::ivalue::Future &f) {
			std::unique_lock<std::mutex> g(tally->lock);
			if (tally->failed)
				return;
			if (f.hasError()) {
				tally->failed = true;
				g.unlock();
				all->setError(f.exception_ptr());
			} else if (--tally->left == 0) {
				g.unlock();
				all->markCompleted(c10::IValue(results));
			}
		});
	return future_;
}

#ifdef MCCL_C10D_COALESCING
void
ProcessGroupMCCL::startCoalescing()
{
	std::lock_guard<std::mutex> g(lock_);

	if (coalescing_)
		throw Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: coalescing "
		    "started twice (one _coalescing_manager at a time)");
	coalescing_ = true;
	coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::endCoalescing()
{
	std::lock_guard<std::mutex> g(lock_);

	if (!coalescing_)
		throw Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: coalescing "
		    "ended but not started");
	coalescing_ = false;
	return c10::make_intrusive<CoalescedWork>(std::move(coalesced_));
}
#endif

} // namespace mccl_torch
