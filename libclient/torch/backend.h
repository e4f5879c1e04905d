/*
 * backend.h: torch.distributed's "mccl" backend in C++ (c10d), over
 * libmccl.  One ProcessGroupMCCL per torch group, one MCCL communicator
 * under it (made and named by mccl.torch in Python, which hands its handle
 * here).  An operation is checked and started on the caller's thread and
 * returns a WorkMCCL at once; the daemon runs it meanwhile.  Whoever needs
 * the result first completes it: the caller's wait(), or the group's
 * progress thread, which completes what nobody waits for (futures, DDP's
 * buckets) in the order the operations started.
 *
 * CUDA tensors go through page-locked host memory: the copies out are
 * queued on the caller's current stream and the operation is started by
 * the group's start thread once they ended (the caller does not wait); the
 * copies back are queued on that stream when it completes, and wait()
 * makes the current stream wait for them.  Nothing here needs CUDA's
 * headers: streams and events are c10's, so one source builds against a
 * CPU-only torch too.
 */
#pragma once

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "mccl.h"
}

namespace mccl_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

class ProcessGroupMCCL;

/* A failure with libmccl's code: Python gets mccl's exception of that code
 * (mccl.PeerFailedError, mccl.InvalidArgumentError, ...), as from the
 * package's own calls. */
struct Error : std::runtime_error {
	Error(mccl_result_t c, const std::string &what)
	    : std::runtime_error(what), code(c) {}
	mccl_result_t code;
};

/* Where one operation's tensors stand on the host, and what goes back to
 * the caller's tensors when it completes. */
struct Staging {
	std::vector<std::pair<at::Tensor, at::Tensor>> back; /* (user, host) */
	std::vector<at::Tensor> keep;	/* buffers alive until completion */
	std::optional<c10::Stream> stream;	/* CUDA: the caller's stream */
	std::optional<c10::Event> copied_out;	/* CUDA: the copies out */
	std::optional<c10::Event> copied_back;	/* CUDA: the copies back */
	/* CUDA: small, and the stream was idle: its copies out end within
	 * microseconds, so the caller waits for them and starts it itself,
	 * without the start thread's hand-off */
	bool quick = false;
};

/*
 * A group's host memory for CUDA tensors: segments the daemon shares, so
 * that the library works on them in place, page-locked for the GPU.  A
 * buffer is taken for one operation and comes back when its last tensor
 * goes (after the copies back were queued); taken again, the copies into
 * it wait on the GPU for those.  Buffers are kept until close(): the pool
 * holds what the most operations in flight at once needed, and a training
 * step that needs as many again finds them (making and page-locking one
 * costs more than the copies it serves).  Where no segment or no CUDA
 * runtime's cudaHostRegister is to be had: torch's pinned memory, which
 * the library copies once more (fallback() says why).
 */
class HostPool : public std::enable_shared_from_this<HostPool> {
public:
	explicit HostPool(mccl_comm_t *comm);
	~HostPool();

	/* bytes or more, for copies queued on stream */
	at::Tensor take(size_t bytes, const c10::Stream &stream);
	void close();		/* before the communicator goes */
	size_t made() const;	/* segments made so far */
	std::string fallback() const;

private:
	struct Free {
		void *ptr;
		c10::Event after;	/* its last copies ended */
	};

	void *make(size_t size);
	void give(void *ptr, size_t size, const c10::Stream &stream);

	mccl_comm_t *comm_;
	mutable std::mutex lock_;
	std::map<size_t, std::vector<Free>> free_;	/* by size */
	std::vector<void *> made_;
	std::string fallback_;
	bool closed_ = false;
};

/* Starts the operation on libmccl: returns its result code.  The status
 * is where a receive from any source says whose message it took. */
using Starter = std::function<mccl_result_t(mccl_request_t **,
    mccl_status_t *)>;

class WorkMCCL : public c10d::Work {
public:
	WorkMCCL(ProcessGroupMCCL *pg, c10d::OpType type, const char *name,
	    std::vector<at::Tensor> outputs, Staging staging);
	~WorkMCCL() override;

	bool isCompleted() override;
	bool wait(std::chrono::milliseconds timeout) override;
	void synchronize() override;
	int sourceRank() const override;
	std::vector<at::Tensor> result() override;
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

	/* The group's side. */
	mccl_result_t start(const Starter &starter);
	void fail(const std::string &why);
	void succeeded();	/* done already: composed of blocking calls */
	void progress();	/* the progress thread's completion */
	bool urgent() const { return urgent_.load(); }
	bool done();
	std::chrono::steady_clock::time_point started_at() const
	{
		return started_at_;
	}
	mccl_status_t *status() { return &status_; }
	const Staging &staging() const { return staging_; }

private:
	enum class State { QUEUED, STARTED, WAITING, DONE };

	bool complete(std::unique_lock<std::mutex> &lock, int timeout_ms);
	void finish_locked(std::unique_lock<std::mutex> &lock,
	    mccl_result_t rc);
	void done_unlock(std::unique_lock<std::mutex> &lock);
	void copy_back();
	void fulfil(const c10::intrusive_ptr<c10::ivalue::Future> &f);
	void wake_group();

	/* weak: a Work may outlive its group (then the group's side of it
	 * is done: shutdown completed every started Work) */
	c10::weak_intrusive_ptr<BackendBase> pg_;
	const char *name_;
	std::vector<at::Tensor> outputs_;
	Staging staging_;
	State state_ = State::QUEUED;
	mccl_request_t *req_ = nullptr;
	mccl_status_t status_ = { -1, -1 };
	std::chrono::steady_clock::time_point started_at_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
	std::atomic<bool> urgent_{ false };
};

/* The operations called between startCoalescing and endCoalescing (torch's
 * _coalescing_manager, batch_isend_irecv) as one Work: done when all are,
 * their results in order, the first failure its error. */
class CoalescedWork : public c10d::Work {
public:
	/* outputs: what result() and the future give (else the works') */
	explicit CoalescedWork(
	    std::vector<c10::intrusive_ptr<c10d::Work>> works,
	    c10d::OpType type = c10d::OpType::UNKNOWN,
	    std::optional<std::vector<at::Tensor>> outputs = std::nullopt);

	bool isCompleted() override;
	bool wait(std::chrono::milliseconds timeout) override;
	void synchronize() override;
	std::vector<at::Tensor> result() override;
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

private:
	std::vector<c10::intrusive_ptr<c10d::Work>> works_;
	std::optional<std::vector<at::Tensor>> outputs_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

#ifdef MCCL_C10D_OPTIONS
/* A group's options as torch keeps them (split_group copies the parent's
 * for its sub-groups, so Python can copy these). */
struct OptionsMCCL : c10d::Backend::Options {
	OptionsMCCL(std::string name, std::chrono::milliseconds timeout)
	    : Options(std::move(name), timeout) {}
};
#endif

class ProcessGroupMCCL : public BackendBase {
public:
	/* owns_comm: destroyed with the group (else Python's, shared with
	 * mccl.init()'s world) */
	ProcessGroupMCCL(mccl_comm_t *comm, bool owns_comm, int rank, int size,
	    std::chrono::milliseconds timeout, std::string name);
	~ProcessGroupMCCL() override;

	const std::string getBackendName() const override { return name_; }

	c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &t,
	    const c10d::BroadcastOptions &o) override;
	c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &t,
	    const c10d::AllreduceOptions &o) override;
#if TORCH_VERSION_MAJOR >= 2
	/* torch 2 sends a sparse tensor's all_reduce here */
	c10::intrusive_ptr<c10d::Work> allreduce_sparse(
	    std::vector<at::Tensor> &t,
	    const c10d::AllreduceOptions &o) override;
#endif
	c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
	    std::vector<at::Tensor> &t,
	    const c10d::AllreduceCoalescedOptions &o) override;
	c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &t,
	    const c10d::ReduceOptions &o) override;
	c10::intrusive_ptr<c10d::Work> allgather(
	    std::vector<std::vector<at::Tensor>> &out,
	    std::vector<at::Tensor> &in,
	    const c10d::AllgatherOptions &o) override;
	c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out,
	    at::Tensor &in, const c10d::AllgatherOptions &o) override;
	c10::intrusive_ptr<c10d::Work> allgather_coalesced(
	    std::vector<std::vector<at::Tensor>> &out,
	    std::vector<at::Tensor> &in,
	    const c10d::AllgatherOptions &o) override;
	c10::intrusive_ptr<c10d::Work> gather(
	    std::vector<std::vector<at::Tensor>> &out,
	    std::vector<at::Tensor> &in,
	    const c10d::GatherOptions &o) override;
	c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &out,
	    std::vector<std::vector<at::Tensor>> &in,
	    const c10d::ScatterOptions &o) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter(
	    std::vector<at::Tensor> &out,
	    std::vector<std::vector<at::Tensor>> &in,
	    const c10d::ReduceScatterOptions &o) override;
	c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &out,
	    at::Tensor &in, const c10d::ReduceScatterOptions &o) override;
	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out,
	    at::Tensor &in, std::vector<int64_t> &out_splits,
	    std::vector<int64_t> &in_splits,
	    const c10d::AllToAllOptions &o) override;
	c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &out,
	    std::vector<at::Tensor> &in,
	    const c10d::AllToAllOptions &o) override;
	c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &t,
	    int dst, int tag) override;
	c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &t,
	    int src, int tag) override;
	c10::intrusive_ptr<c10d::Work> recvAnysource(
	    std::vector<at::Tensor> &t, int tag) override;
	c10::intrusive_ptr<c10d::Work> barrier(
	    const c10d::BarrierOptions &o) override;

	void setSequenceNumberForGroup() override {}
	uint64_t getSequenceNumberForGroup() override { return seq_; }

	/* What this torch's c10d::Backend offers beyond 1.13's ProcessGroup
	 * (build.py finds it in the header: MCCL_C10D_*). */
#ifdef MCCL_C10D_COALESCING
	bool supportsCoalescing() const override { return true; }
	void startCoalescing() override;
	c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#endif
#ifdef MCCL_C10D_TENSOR_COALESCED
	c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
	    std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
	    const c10d::AllgatherOptions &o) override;
	c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
	    std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
	    const c10d::ReduceScatterOptions &o) override;
#endif
#ifdef MCCL_C10D_SPLIT
	bool supportsSplitting() const override { return true; }
	c10::intrusive_ptr<c10d::Backend> split(
	    const c10::intrusive_ptr<c10d::Store> &store,
	    const std::vector<int> &ranks,
	    const c10::intrusive_ptr<Options> &opts) override;
#endif
#ifdef MCCL_C10D_OPTIONS
	c10::intrusive_ptr<Options> getBackendOptions() override;
#endif
#ifdef MCCL_C10D_EAGER_CONNECT
	void eagerConnectSingleDevice(at::Device device) override;
#endif
#ifdef MCCL_C10D_ABORT
	void abort() override { abort_all(); }
#endif

	/* Python's side. */
	mccl_comm_t *comm() const { return comm_; }
	void abort_all();	/* every pending operation fails */
	void shutdown();	/* the threads stop; pending ones fail */
	std::string last_error() const;
	void wake();		/* a Work wants the progress thread now */
	void drain();		/* every operation called so far started */
	void retire();		/* the caller completed a Work */
	/* Tests: the start thread waits `seconds` (as for a CUDA copy) before
	 * the operations called after this; how many wait to start. */
	void hold_starts(double seconds);
	size_t queued_starts();
	int timeout_ms() const { return (int)timeout_.count(); }
	/* the group's sub-groups by split so far (split_group's names) */
	uint64_t splits() const { return splits_; }
	const HostPool &pool() const { return *pool_; }

private:
	using Start = std::pair<c10::intrusive_ptr<WorkMCCL>, Starter>;

	using OneTensorOp = std::function<c10::intrusive_ptr<c10d::Work>(
	    std::vector<at::Tensor> &)>;
	c10::intrusive_ptr<c10d::Work> in_parts(std::vector<at::Tensor> &ts,
	    c10d::OpType type, const OneTensorOp &op);
	c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t,
	    mccl_op_t op, std::vector<at::Tensor> &ts);
	void check(mccl_result_t rc, const char *what);
	c10::intrusive_ptr<c10d::Work> run(c10d::OpType type,
	    const char *name, std::vector<at::Tensor> outputs,
	    Staging staging, Starter starter);
	void started(const c10::intrusive_ptr<WorkMCCL> &w);
	void start_loop();
	void progress_loop();

	mccl_comm_t *comm_;
	bool owns_comm_;
	std::string name_;
	std::chrono::milliseconds timeout_;
	uint64_t seq_ = 0;
	std::shared_ptr<HostPool> pool_;	/* CUDA tensors' host memory */
	uint64_t splits_ = 0;
	/* split() is asked once per device type of one split_group: the
	 * second gets the first's sub-group */
	c10::intrusive_ptr<c10d::Store> last_split_store_;
	c10::intrusive_ptr<BackendBase> last_split_;
	bool coalescing_ = false;
	std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;

	std::mutex lock_;
	std::condition_variable starts_cv_, progress_cv_;
	std::deque<Start> starts_;		/* waiting for their copies */
	std::deque<c10::intrusive_ptr<WorkMCCL>> pending_; /* started */
	bool stopping_ = false;
	std::thread start_thread_, progress_thread_;
};

/* libmccl's name for a torch dtype; throws for one it lacks. */
mccl_dtype_t dtype_of(const at::Tensor &t);
mccl_op_t op_of(const c10d::ReduceOp &op, const at::Tensor &t);

} // namespace mccl_torch
