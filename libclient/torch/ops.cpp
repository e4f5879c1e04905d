/*
 * ops.cpp: torch's collectives as libmccl's.  Each checks its tensors,
 * finds them a place on the host (Stager), and starts one libmccl
 * operation; lists of tensors travel as one flat buffer.
 */
#include "backend.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <numeric>
#include <stdexcept>

namespace mccl_torch {

using c10d::OpType;

static Error
bad(const std::string &what)
{
	return Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: " + what);
}

mccl_dtype_t
dtype_of(const at::Tensor &t)
{
	switch (t.scalar_type()) {
	case at::kFloat: case at::kComplexFloat: return MCCL_FLOAT32;
	case at::kDouble: case at::kComplexDouble: return MCCL_FLOAT64;
	case at::kHalf: return MCCL_FLOAT16;
	case at::kBFloat16: return MCCL_BFLOAT16;
	case at::kChar: return MCCL_INT8;
	case at::kByte: case at::kBool: return MCCL_UINT8;
	case at::kInt: return MCCL_INT32;
	case at::kLong: return MCCL_INT64;
	default:
		throw bad(std::string("tensors of ") +
		    c10::toString(t.scalar_type()) + " are not supported "
		    "(float16, bfloat16, float32, float64, their complex, "
		    "int8, uint8, bool, int32 and int64 are)");
	}
}

/* Elements of t as libmccl counts them: a complex one is two. */
static size_t
count_of(const at::Tensor &t)
{
	return (size_t)t.numel() * (t.is_complex() ? 2 : 1);
}

static const char *
op_name(const c10d::ReduceOp &op)
{
	switch (op.op_) {
	case c10d::ReduceOp::SUM: return "SUM";
	case c10d::ReduceOp::AVG: return "AVG";
	case c10d::ReduceOp::PRODUCT: return "PRODUCT";
	case c10d::ReduceOp::MIN: return "MIN";
	case c10d::ReduceOp::MAX: return "MAX";
	case c10d::ReduceOp::BAND: return "BAND";
	case c10d::ReduceOp::BOR: return "BOR";
	case c10d::ReduceOp::BXOR: return "BXOR";
	default: return "PREMUL_SUM";
	}
}

mccl_op_t
op_of(const c10d::ReduceOp &op, const at::Tensor &t)
{
	bool floating = t.is_floating_point() || t.is_complex();
	mccl_op_t r;

	switch (op.op_) {
	case c10d::ReduceOp::SUM: r = MCCL_SUM; break;
	case c10d::ReduceOp::AVG: r = MCCL_AVG; break;
	case c10d::ReduceOp::PRODUCT: r = MCCL_PROD; break;
	case c10d::ReduceOp::MIN: r = MCCL_MIN; break;
	case c10d::ReduceOp::MAX: r = MCCL_MAX; break;
	case c10d::ReduceOp::BAND: r = MCCL_BAND; break;
	case c10d::ReduceOp::BOR: r = MCCL_BOR; break;
	case c10d::ReduceOp::BXOR: r = MCCL_BXOR; break;
	default:
		throw bad(std::string("reduce op ReduceOp.") + op_name(op) +
		    " is not supported (SUM, PRODUCT, MIN, MAX, AVG, BAND, "
		    "BOR and BXOR are)");
	}
	if (r == MCCL_AVG && !floating)
		throw bad("ReduceOp.AVG needs a floating-point tensor, not " +
		    std::string(c10::toString(t.scalar_type())));
	if (r >= MCCL_BAND && floating)
		throw bad(std::string("ReduceOp.") + op_name(op) +
		    " needs an integer tensor, not " +
		    c10::toString(t.scalar_type()));
	if (t.is_complex() && r != MCCL_SUM && r != MCCL_AVG)
		throw bad(std::string("ReduceOp.") + op_name(op) +
		    " is not defined on complex tensors (SUM and AVG are)");
	return r;
}

/*
 * One operation's tensors on the host.  A contiguous CPU tensor is used in
 * place; any other gets a contiguous host buffer (page-locked for a CUDA
 * one), filled from the tensor where the operation reads it and copied
 * back where it writes it.
 */
class Stager {
public:
	Stager(const char *name, HostPool &pool) : name_(name), pool_(pool) {}

	at::Tensor in(const at::Tensor &t) { return host(t, true, false); }
	at::Tensor out(const at::Tensor &t) { return host(t, false, true); }
	at::Tensor inout(const at::Tensor &t) { return host(t, true, true); }

	/* A contiguous host buffer of n elements of like's type. */
	at::Tensor
	flat(int64_t n, const at::Tensor &like)
	{
		device(like);
		at::Tensor h;
		if (cuda_) {	/* a GPU's copies go through it */
			int64_t bytes = n * (int64_t)like.element_size();
			h = pool_.take((size_t)bytes, *s_.stream)
			    .narrow(0, 0, bytes).view(like.scalar_type());
		} else {
			h = at::empty({ n }, like.options().device(at::kCPU));
		}
		s_.keep.push_back(h);
		return h;
	}

	/* host (a view of a buffer from flat) gets user's values now. */
	void
	pack(const at::Tensor &host, const at::Tensor &user)
	{
		device(user);
		host.view(user.sizes()).copy_(user,
		    /*non_blocking=*/user.is_cuda());
		if (user.is_cuda()) {
			read_ = true;
			read_bytes_ += user.nbytes();
		}
		s_.keep.push_back(user);
	}

	/* user gets host's values when the operation completes. */
	void
	back(const at::Tensor &user, const at::Tensor &host)
	{
		device(user);
		s_.back.emplace_back(user, host.view(user.sizes()));
	}

	Staging
	finish()
	{
		if (read_) {
			c10::Event e(s_.stream->device_type());
			e.record(*s_.stream);
			s_.copied_out.emplace(std::move(e));
		}
		s_.quick = idle_ && read_bytes_ <= kQuickBytes;
		return std::move(s_);
	}

private:
	at::Tensor
	host(const at::Tensor &t, bool read, bool write)
	{
		device(t);
		s_.keep.push_back(t);
		if (t.is_cpu() && t.is_contiguous())
			return t;
		at::Tensor h = flat(t.numel(), t).view(t.sizes());
		if (read)
			pack(h, t);
		if (write)
			back(t, h);
		return h;
	}

	/* An operation's tensors on the CPU and at most one GPU, whose
	 * current stream its copies go on. */
	void
	device(const at::Tensor &t)
	{
		if (t.layout() != at::kStrided)
			throw bad(std::string(name_) + ": sparse tensors are "
			    "not supported by the mccl backend");
		if (!t.is_cpu() && !t.is_cuda())
			throw bad(std::string(name_) + ": a tensor on " +
			    t.device().str() + "; the mccl backend works on "
			    "CPU and CUDA tensors");
		if (!t.is_cuda())
			return;
		if (!cuda_) {
			cuda_ = true;
			dev_ = t.device();
			auto *impl = c10::impl::getDeviceGuardImpl(at::kCUDA);
			s_.stream.emplace(impl->getStream(dev_));
			idle_ = s_.stream->query();	/* before our copies */
		} else if (t.device() != dev_) {
			throw bad(std::string(name_) + ": tensors on " +
			    dev_.str() + " and " + t.device().str() +
			    " in one operation (one GPU, and the CPU, at most)");
		}
	}

	/* copies out this small, on an idle stream, take microseconds */
	static constexpr size_t kQuickBytes = 1 << 20;

	const char *name_;
	HostPool &pool_;
	Staging s_;
	bool cuda_ = false, read_ = false;	/* a GPU's tensor in it */
	bool idle_ = false;		/* its stream had nothing queued */
	size_t read_bytes_ = 0;		/* copied out of the GPU */
	c10::Device dev_{ at::kCPU };		/* that GPU */
};

static const at::Tensor &
only(const std::vector<at::Tensor> &ts, const char *what)
{
	if (ts.size() != 1)
		throw bad(std::string(what) + ": one tensor per process, not " +
		    std::to_string(ts.size()));
	return ts[0];
}

static void
same_kind(const at::Tensor &a, const at::Tensor &b, const char *what)
{
	if (a.scalar_type() != b.scalar_type())
		throw bad(std::string(what) + ": tensors of " +
		    c10::toString(a.scalar_type()) + " and " +
		    c10::toString(b.scalar_type()) + " in one operation");
}

/* n elements in each of size tensors, in order: one flat buffer. */
static int64_t
total(const std::vector<at::Tensor> &ts)
{
	int64_t n = 0;

	for (auto &t : ts)
		n += t.numel();
	return n;
}

ProcessGroupMCCL::ProcessGroupMCCL(mccl_comm_t *comm, bool owns_comm,
    int rank, int size, std::chrono::milliseconds timeout, std::string name)
    : BackendBase(rank, size), comm_(comm), owns_comm_(owns_comm),
      name_(std::move(name)), timeout_(timeout),
      pool_(std::make_shared<HostPool>(comm))
{
	if (comm_ != nullptr && timeout.count() > 0 &&
	    mccl_comm_set_timeout(comm_, (int)std::min<int64_t>(
	    timeout.count(), INT32_MAX)) != MCCL_SUCCESS)
		throw Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: setting the "
		    "group's timeout: " + last_error());
	start_thread_ = std::thread([this] { start_loop(); });
	progress_thread_ = std::thread([this] { progress_loop(); });
}

ProcessGroupMCCL::~ProcessGroupMCCL()
{
	shutdown();
}

std::string
ProcessGroupMCCL::last_error() const
{
	return mccl_last_error(comm_);
}

void
ProcessGroupMCCL::abort_all()
{
	std::vector<c10::intrusive_ptr<WorkMCCL>> queued;
	{
		std::lock_guard<std::mutex> g(lock_);
		for (auto &s : starts_)
			if (s.first)
				queued.push_back(s.first);
	}
	if (comm_ != nullptr)
		mccl_comm_abort(comm_);
	for (auto &w : queued)
		w->fail("mccl: the group was aborted before this operation "
		    "started");
}

void
ProcessGroupMCCL::shutdown()
{
	bool busy;
	{
		std::lock_guard<std::mutex> g(lock_);
		if (stopping_)
			return;
		stopping_ = true;
		busy = !starts_.empty();
		for (auto &w : pending_)
			busy |= !w->done();
	}
	/* nobody will complete them: they end now, with an error, on every
	 * rank */
	if (busy)
		abort_all();
	starts_cv_.notify_all();
	progress_cv_.notify_all();
	if (start_thread_.joinable())
		start_thread_.join();
	if (progress_thread_.joinable())
		progress_thread_.join();
	pool_->close();
	/* comm_ stays: a call after this finds the library's destroyed
	 * communicator, and a clear error */
	if (owns_comm_ && comm_ != nullptr)
		mccl_comm_destroy(comm_);
}

/* A quick operation's copies out ended within 500 us (its stream was
 * idle: they take microseconds): its caller then starts it itself.  Where
 * they did not, the start thread waits for them instead. */
static bool
copies_ended(const Staging &s)
{
	auto deadline = std::chrono::steady_clock::now() +
	    std::chrono::microseconds(500);

	while (!s.copied_out->query())
		if (std::chrono::steady_clock::now() > deadline)
			return false;
	return true;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::run(OpType type, const char *name,
    std::vector<at::Tensor> outputs, Staging staging, Starter starter)
{
	auto w = c10::make_intrusive<WorkMCCL>(this, type, name,
	    std::move(outputs), std::move(staging));
	std::unique_lock<std::mutex> lock(lock_);

	if (stopping_)
		throw Error(MCCL_ERR_INVALID_ARGUMENT, std::string("mccl: ") +
		    name + ": the group was destroyed (shut down)");
	seq_++;
	if (coalescing_)
		coalesced_.push_back(w);
	const Staging &st = w->staging();
	bool direct = starts_.empty() && (!st.copied_out || st.quick);
	if (direct && st.copied_out) {
		lock.unlock();
		direct = copies_ended(st);
		lock.lock();
		direct = direct && starts_.empty();
	}
	if (!direct) {
		starts_.emplace_back(w, std::move(starter));
		starts_cv_.notify_one();
		return w;
	}
	lock.unlock();
	mccl_result_t rc = w->start(starter);
	check(rc, name);
	started(w);
	return w;
}

/* ---- the operations ---- */

/* A CUDA tensor goes in parts of this where it has two or more: each
 * part's copies overlap the other parts' transfers. */
static constexpr int64_t kPartBytes = 16 << 20;

/* The element ranges of t's parts, the same on every rank (a job's ranks
 * must run the same operations), or none.  The last part takes the
 * remainder (one to two parts' worth): a sliver of its own would be an
 * operation too small to overlap with the ones around it. */
static std::vector<std::pair<int64_t, int64_t>>
part_bounds(const at::Tensor &t)
{
	std::vector<std::pair<int64_t, int64_t>> parts;

	if (!t.is_cuda() || !t.is_contiguous() ||
	    (int64_t)t.nbytes() < 2 * kPartBytes)
		return parts;
	int64_t step = kPartBytes / (int64_t)t.element_size();
	int64_t n = t.numel(), k = n / step;
	for (int64_t i = 0; i < k; i++)
		parts.emplace_back(i * step, i + 1 < k ? (i + 1) * step : n);
	return parts;
}

/*
 * op on ts[0] part by part, as one Work.  The parts' copies out are all
 * queued at once, on the caller's stream; each part starts once its own
 * ended, while the ones before it are on the wire, and is copied back
 * when it completes.
 */
c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::in_parts(std::vector<at::Tensor> &ts, OpType type,
    const OneTensorOp &op)
{
	std::vector<c10::intrusive_ptr<c10d::Work>> works;
	at::Tensor flat = ts[0].view({ -1 });

	for (auto &b : part_bounds(ts[0])) {
		std::vector<at::Tensor> part{ flat.narrow(0, b.first,
		    b.second - b.first) };
		works.push_back(op(part));
	}
	return c10::make_intrusive<CoalescedWork>(std::move(works), type, ts);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::allreduce(std::vector<at::Tensor> &ts,
    const c10d::AllreduceOptions &o)
{
	at::Tensor t = only(ts, "all_reduce");
	mccl_op_t op = op_of(o.reduceOp, t);
	if (t.is_sparse())
		return sparse_allreduce(t, op, ts);
	if (!part_bounds(t).empty())
		return in_parts(ts, OpType::ALLREDUCE,
		    [&](std::vector<at::Tensor> &p) { return allreduce(p, o); });
	mccl_dtype_t dt = dtype_of(t);
	Stager s("all_reduce", *pool_);
	void *p = s.inout(t).data_ptr();
	size_t n = count_of(t);

	return run(OpType::ALLREDUCE, "all_reduce", ts, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_allreduce(p, p, n, dt, op, comm_, r);
	    });
}

void
ProcessGroupMCCL::check(mccl_result_t rc, const char *what)
{
	if (rc != MCCL_SUCCESS)
		throw Error(rc, std::string("mccl: ") + what + ": " +
		    mccl_strerror(rc) + ": " + last_error());
}

/*
 * As gloo's: every rank's indices and values gathered, then summed here
 * (coalesce), the same on every rank.  Blocking, after every operation
 * called before it started.
 */
c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::sparse_allreduce(at::Tensor &t, mccl_op_t op,
    std::vector<at::Tensor> &ts)
{
	if (op != MCCL_SUM)
		throw bad("all_reduce of a sparse tensor sums only");
	drain();
	at::Tensor c = t.coalesce().cpu();
	at::Tensor idx = c.indices().t().contiguous();	/* nnz rows of ndim */
	at::Tensor val = c.values().contiguous();	/* nnz rows of the rest */
	int64_t ndim = idx.size(1), nnz = idx.size(0), row = 1;
	for (int64_t d = 1; d < val.dim(); d++)
		row *= val.size(d);
	std::vector<int64_t> counts(getSize());

	check(mccl_allgather(&nnz, counts.data(), 1, MCCL_INT64, comm_,
	    nullptr), "all_reduce (sparse)");
	std::vector<size_t> ic, id, vc, vd;
	int64_t all = 0;
	for (int64_t k : counts) {
		ic.push_back((size_t)(k * ndim));
		id.push_back((size_t)(all * ndim));
		vc.push_back((size_t)(k * row) * (val.is_complex() ? 2 : 1));
		vd.push_back((size_t)(all * row) * (val.is_complex() ? 2 : 1));
		all += k;
	}
	std::vector<int64_t> vshape = val.sizes().vec();
	vshape[0] = all;
	at::Tensor all_idx = at::empty({ all, ndim }, idx.options());
	at::Tensor all_val = at::empty(vshape, val.options());
	check(mccl_allgatherv(idx.data_ptr(), (size_t)(nnz * ndim),
	    all_idx.data_ptr(), ic.data(), id.data(), MCCL_INT64, comm_,
	    nullptr), "all_reduce (sparse)");
	check(mccl_allgatherv(val.data_ptr(), count_of(val), all_val.data_ptr(),
	    vc.data(), vd.data(), dtype_of(val), comm_, nullptr),
	    "all_reduce (sparse)");
	at::Tensor sum = at::sparse_coo_tensor(all_idx.t(), all_val,
	    t.sizes()).coalesce();
	t.copy_(sum.to(t.device()));
	auto w = c10::make_intrusive<WorkMCCL>(this, OpType::ALLREDUCE,
	    "all_reduce", ts, Staging());
	w->succeeded();
	return w;
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::allreduce_sparse(std::vector<at::Tensor> &ts,
    const c10d::AllreduceOptions &o)
{
	return allreduce(ts, o);
}
#endif

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::allreduce_coalesced(std::vector<at::Tensor> &ts,
    const c10d::AllreduceCoalescedOptions &o)
{
	if (ts.empty())
		throw bad("all_reduce_coalesced: no tensors");
	for (auto &t : ts)
		same_kind(ts[0], t, "all_reduce_coalesced");
	mccl_op_t op = op_of(o.reduceOp, ts[0]);
	mccl_dtype_t dt = dtype_of(ts[0]);
	Stager s("all_reduce_coalesced", *pool_);
	at::Tensor flat = s.flat(total(ts), ts[0]);
	int64_t off = 0;

	for (auto &t : ts) {
		at::Tensor part = flat.narrow(0, off, t.numel());
		s.pack(part, t);
		s.back(t, part);
		off += t.numel();
	}
	void *p = flat.data_ptr();
	size_t n = count_of(flat);
	return run(OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", ts,
	    s.finish(), [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_allreduce(p, p, n, dt, op, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::broadcast(std::vector<at::Tensor> &ts,
    const c10d::BroadcastOptions &o)
{
	const at::Tensor &t = only(ts, "broadcast");
	if (!part_bounds(t).empty())
		return in_parts(ts, OpType::BROADCAST,
		    [&](std::vector<at::Tensor> &p) { return broadcast(p, o); });
	mccl_dtype_t dt = dtype_of(t);
	Stager s("broadcast", *pool_);
	bool root = o.rootRank == getRank();
	void *p = (root ? s.in(t) : s.out(t)).data_ptr();
	size_t n = count_of(t);
	int from = (int)o.rootRank;

	return run(OpType::BROADCAST, "broadcast", ts, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_broadcast(p, n, dt, from, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::reduce(std::vector<at::Tensor> &ts,
    const c10d::ReduceOptions &o)
{
	const at::Tensor &t = only(ts, "reduce");
	if (!part_bounds(t).empty())
		return in_parts(ts, OpType::REDUCE,
		    [&](std::vector<at::Tensor> &p) { return reduce(p, o); });
	mccl_op_t op = op_of(o.reduceOp, t);
	mccl_dtype_t dt = dtype_of(t);
	Stager s("reduce", *pool_);
	bool root = o.rootRank == getRank();
	void *p = (root ? s.inout(t) : s.in(t)).data_ptr();
	void *out = root ? p : nullptr;
	size_t n = count_of(t);
	int to = (int)o.rootRank;

	return run(OpType::REDUCE, "reduce", ts, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_reduce(p, out, n, dt, op, to, comm_, r);
	    });
}

/* out gets every rank's in, rank 0's first; uneven sizes too. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::allgather(std::vector<std::vector<at::Tensor>> &outs,
    std::vector<at::Tensor> &ins, const c10d::AllgatherOptions &)
{
	const at::Tensor &in = only(ins, "all_gather");
	if (outs.size() != 1)
		throw bad("all_gather: one list of outputs per process");
	auto &out = outs[0];
	if ((int)out.size() != getSize())
		throw bad("all_gather: " + std::to_string(out.size()) +
		    " output tensors for a group of " +
		    std::to_string(getSize()));
	if (out[getRank()].numel() != in.numel())
		throw bad("all_gather: this rank's output has " +
		    std::to_string(out[getRank()].numel()) +
		    " elements, its input " + std::to_string(in.numel()));
	mccl_dtype_t dt = dtype_of(in);
	Stager s("all_gather", *pool_);
	void *src = s.in(in).data_ptr();
	at::Tensor flat = s.flat(total(out), in);
	bool even = true;
	int64_t off = 0;
	auto counts = std::make_shared<std::vector<size_t>>();
	auto displs = std::make_shared<std::vector<size_t>>();

	for (auto &t : out) {
		same_kind(in, t, "all_gather");
		s.back(t, flat.narrow(0, off, t.numel()));
		counts->push_back(count_of(t));
		displs->push_back((size_t)off * (in.is_complex() ? 2 : 1));
		even &= t.numel() == in.numel();
		off += t.numel();
	}
	void *dst = flat.data_ptr();
	size_t n = count_of(in);
	return run(OpType::ALLGATHER, "all_gather", out, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		if (even)
			return mccl_allgather(src, dst, n, dt, comm_, r);
		return mccl_allgatherv(src, n, dst, counts->data(),
		    displs->data(), dt, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::_allgather_base(at::Tensor &out, at::Tensor &in,
    const c10d::AllgatherOptions &)
{
	same_kind(in, out, "all_gather_into_tensor");
	if (out.numel() != in.numel() * getSize())
		throw bad("all_gather_into_tensor: the output has " +
		    std::to_string(out.numel()) + " elements, " +
		    std::to_string(in.numel()) + " x " +
		    std::to_string(getSize()) + " needed");
	mccl_dtype_t dt = dtype_of(in);
	Stager s("all_gather_into_tensor", *pool_);
	void *src = s.in(in).data_ptr();
	void *dst = s.out(out).data_ptr();
	size_t n = count_of(in);

	return run(OpType::_ALLGATHER_BASE, "all_gather_into_tensor", { out },
	    s.finish(), [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_allgather(src, dst, n, dt, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::allgather_coalesced(
    std::vector<std::vector<at::Tensor>> &outs, std::vector<at::Tensor> &ins,
    const c10d::AllgatherOptions &)
{
	if (ins.empty() || outs.size() != (size_t)getSize())
		throw bad("all_gather_coalesced: a list of inputs, and one "
		    "list of outputs per rank of the group");
	Stager s("all_gather_coalesced", *pool_);
	int64_t each = total(ins), off = 0;
	at::Tensor src = s.flat(each, ins[0]);
	at::Tensor dst = s.flat(each * getSize(), ins[0]);
	std::vector<at::Tensor> results;

	for (auto &t : ins) {
		same_kind(ins[0], t, "all_gather_coalesced");
		s.pack(src.narrow(0, off, t.numel()), t);
		off += t.numel();
	}
	for (int r = 0; r < getSize(); r++) {
		if (outs[r].size() != ins.size())
			throw bad("all_gather_coalesced: rank " +
			    std::to_string(r) + "'s outputs are not as many "
			    "as the inputs");
		off = r * each;
		for (size_t i = 0; i < ins.size(); i++) {
			if (outs[r][i].numel() != ins[i].numel())
				throw bad("all_gather_coalesced: output " +
				    std::to_string(i) + " of rank " +
				    std::to_string(r) + " differs in size "
				    "from input " + std::to_string(i));
			same_kind(ins[0], outs[r][i], "all_gather_coalesced");
			s.back(outs[r][i], dst.narrow(0, off, ins[i].numel()));
			off += ins[i].numel();
			results.push_back(outs[r][i]);
		}
	}
	mccl_dtype_t dt = dtype_of(ins[0]);
	void *sp = src.data_ptr(), *dp = dst.data_ptr();
	size_t n = count_of(src);
	return run(OpType::ALLGATHER_COALESCED, "all_gather_coalesced",
	    results, s.finish(), [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_allgather(sp, dp, n, dt, comm_, r);
	    });
}

#ifdef MCCL_C10D_TENSOR_COALESCED
/* t's elements in order, as a view (an output must take its results). */
static at::Tensor
flat_view(const at::Tensor &t, const char *what)
{
	if (!t.is_contiguous())
		throw bad(std::string(what) + ": the outputs must be "
		    "contiguous");
	return t.view({ -1 });
}

/* all_gather_into_tensor of each pair, as one all_gather of the inputs
 * laid end to end: out[i] is every rank's ins[i], rank 0's first. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::allgather_into_tensor_coalesced(
    std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
    const c10d::AllgatherOptions &)
{
	const char *what = "all_gather_into_tensor_coalesced";
	if (ins.empty() || outs.size() != ins.size())
		throw bad(std::string(what) + ": as many outputs as inputs, "
		    "one or more");
	Stager s(what, *pool_);
	int64_t each = total(ins), off = 0, n = getSize();
	at::Tensor src = s.flat(each, ins[0]);
	at::Tensor dst = s.flat(each * n, ins[0]);

	for (size_t i = 0; i < ins.size(); i++) {
		int64_t k = ins[i].numel();
		same_kind(ins[0], ins[i], what);
		same_kind(ins[0], outs[i], what);
		if (outs[i].numel() != k * n)
			throw bad(std::string(what) + ": output " +
			    std::to_string(i) + " has " +
			    std::to_string(outs[i].numel()) + " elements, " +
			    std::to_string(k) + " x " + std::to_string(n) +
			    " needed");
		s.pack(src.narrow(0, off, k), ins[i]);
		at::Tensor out = flat_view(outs[i], what);
		for (int64_t r = 0; r < n; r++)
			s.back(out.narrow(0, r * k, k),
			    dst.narrow(0, r * each + off, k));
		off += k;
	}
	mccl_dtype_t dt = dtype_of(ins[0]);
	void *sp = src.data_ptr(), *dp = dst.data_ptr();
	size_t count = count_of(src);
	return run(OpType::ALLGATHER_COALESCED, what, outs, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_allgather(sp, dp, count, dt, comm_, r);
	    });
}

/* reduce_scatter_tensor of each pair, as one reduce_scatter: rank r's
 * block holds every input's r-th slice, end to end. */
c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
    const c10d::ReduceScatterOptions &o)
{
	const char *what = "reduce_scatter_tensor_coalesced";
	if (outs.empty() || outs.size() != ins.size())
		throw bad(std::string(what) + ": as many outputs as inputs, "
		    "one or more");
	mccl_op_t op = op_of(o.reduceOp, outs[0]);
	Stager s(what, *pool_);
	int64_t each = total(outs), off = 0, n = getSize();
	at::Tensor src = s.flat(each * n, outs[0]);
	at::Tensor dst = s.flat(each, outs[0]);

	for (size_t i = 0; i < outs.size(); i++) {
		int64_t k = outs[i].numel();
		same_kind(outs[0], outs[i], what);
		same_kind(outs[0], ins[i], what);
		if (ins[i].numel() != k * n)
			throw bad(std::string(what) + ": input " +
			    std::to_string(i) + " has " +
			    std::to_string(ins[i].numel()) + " elements, " +
			    std::to_string(k) + " x " + std::to_string(n) +
			    " needed");
		at::Tensor in = ins[i].reshape({ -1 });
		for (int64_t r = 0; r < n; r++)
			s.pack(src.narrow(0, r * each + off, k),
			    in.narrow(0, r * k, k));
		s.back(outs[i], dst.narrow(0, off, k));
		off += k;
	}
	mccl_dtype_t dt = dtype_of(outs[0]);
	void *sp = src.data_ptr(), *dp = dst.data_ptr();
	size_t count = count_of(dst);
	return run(OpType::REDUCE_SCATTER, what, outs, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_reduce_scatter(sp, dp, count, dt, op, comm_, r);
	    });
}
#endif

static void
check_root(int root, int size, const char *what)
{
	if (root < 0 || root >= size)
		throw bad(std::string(what) + ": root rank " +
		    std::to_string(root) + " is outside the group of " +
		    std::to_string(size));
}

/* A list of size tensors, each like t: what gather/scatter/reduce_scatter
 * take on the side that has them. */
static void
check_list(const std::vector<at::Tensor> &ts, const at::Tensor &t, int size,
    const char *what)
{
	if ((int)ts.size() != size)
		throw bad(std::string(what) + ": " + std::to_string(ts.size()) +
		    " tensors in the list for a group of " +
		    std::to_string(size));
	for (auto &x : ts) {
		same_kind(t, x, what);
		if (x.numel() != t.numel())
			throw bad(std::string(what) + ": the list's tensors "
			    "must match the output (" +
			    std::to_string(t.numel()) + " elements), not " +
			    std::to_string(x.numel()));
	}
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::gather(std::vector<std::vector<at::Tensor>> &outs,
    std::vector<at::Tensor> &ins, const c10d::GatherOptions &o)
{
	const at::Tensor &in = only(ins, "gather");
	int root = (int)o.rootRank;
	check_root(root, getSize(), "gather");
	bool is_root = root == getRank();
	if (is_root && outs.size() != 1)
		throw bad("gather: the root takes one list of outputs");
	if (!is_root && !outs.empty() && !outs[0].empty())
		throw bad("gather: only the root takes outputs");
	mccl_dtype_t dt = dtype_of(in);
	Stager s("gather", *pool_);
	void *src = s.in(in).data_ptr(), *dst = nullptr;
	std::vector<at::Tensor> results;

	if (is_root) {
		check_list(outs[0], in, getSize(), "gather");
		at::Tensor flat = s.flat(in.numel() * getSize(), in);
		for (int r = 0; r < getSize(); r++)
			s.back(outs[0][r], flat.narrow(0, r * in.numel(),
			    in.numel()));
		dst = flat.data_ptr();
		results = outs[0];
	}
	size_t n = count_of(in);
	return run(OpType::GATHER, "gather", results, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_gather(src, dst, n, dt, root, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::scatter(std::vector<at::Tensor> &outs,
    std::vector<std::vector<at::Tensor>> &ins, const c10d::ScatterOptions &o)
{
	const at::Tensor &out = only(outs, "scatter");
	int root = (int)o.rootRank;
	check_root(root, getSize(), "scatter");
	bool is_root = root == getRank();
	if (is_root && ins.size() != 1)
		throw bad("scatter: the root takes one list of inputs");
	if (!is_root && !ins.empty() && !ins[0].empty())
		throw bad("scatter: only the root takes inputs");
	mccl_dtype_t dt = dtype_of(out);
	Stager s("scatter", *pool_);
	void *dst = s.out(out).data_ptr(), *src = nullptr;

	if (is_root) {
		check_list(ins[0], out, getSize(), "scatter");
		at::Tensor flat = s.flat(out.numel() * getSize(), out);
		for (int r = 0; r < getSize(); r++)
			s.pack(flat.narrow(0, r * out.numel(), out.numel()),
			    ins[0][r]);
		src = flat.data_ptr();
	}
	size_t n = count_of(out);
	return run(OpType::SCATTER, "scatter", outs, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_scatter(src, dst, n, dt, root, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::reduce_scatter(std::vector<at::Tensor> &outs,
    std::vector<std::vector<at::Tensor>> &ins,
    const c10d::ReduceScatterOptions &o)
{
	const at::Tensor &out = only(outs, "reduce_scatter");
	if (ins.size() != 1)
		throw bad("reduce_scatter: one list of inputs per process");
	check_list(ins[0], out, getSize(), "reduce_scatter");
	mccl_op_t op = op_of(o.reduceOp, out);
	mccl_dtype_t dt = dtype_of(out);
	Stager s("reduce_scatter", *pool_);
	at::Tensor flat = s.flat(out.numel() * getSize(), out);

	for (int r = 0; r < getSize(); r++)
		s.pack(flat.narrow(0, r * out.numel(), out.numel()),
		    ins[0][r]);
	void *src = flat.data_ptr(), *dst = s.out(out).data_ptr();
	size_t n = count_of(out);
	return run(OpType::REDUCE_SCATTER, "reduce_scatter", outs, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_reduce_scatter(src, dst, n, dt, op, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::_reduce_scatter_base(at::Tensor &out, at::Tensor &in,
    const c10d::ReduceScatterOptions &o)
{
	same_kind(in, out, "reduce_scatter_tensor");
	if (in.numel() != out.numel() * getSize())
		throw bad("reduce_scatter_tensor: the input has " +
		    std::to_string(in.numel()) + " elements, " +
		    std::to_string(out.numel()) + " x " +
		    std::to_string(getSize()) + " needed");
	mccl_op_t op = op_of(o.reduceOp, out);
	mccl_dtype_t dt = dtype_of(out);
	Stager s("reduce_scatter_tensor", *pool_);
	void *src = s.in(in).data_ptr(), *dst = s.out(out).data_ptr();
	size_t n = count_of(out);

	return run(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor",
	    { out }, s.finish(), [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_reduce_scatter(src, dst, n, dt, op, comm_, r);
	    });
}

/* Element counts and offsets of a split of t along its first dimension
 * (even where splits is empty). */
static void
split_of(const at::Tensor &t, const std::vector<int64_t> &splits, int size,
    std::vector<size_t> &counts, std::vector<size_t> &displs,
    const char *what)
{
	int64_t rows = t.dim() == 0 ? 1 : t.size(0);
	int64_t row = rows == 0 ? 0 : t.numel() / rows;
	int64_t mult = t.is_complex() ? 2 : 1, off = 0;

	if (splits.empty() && rows % size != 0)
		throw bad(std::string(what) + ": " + std::to_string(rows) +
		    " rows do not split evenly over " + std::to_string(size) +
		    " ranks");
	if (!splits.empty() && (int)splits.size() != size)
		throw bad(std::string(what) + ": " +
		    std::to_string(splits.size()) + " split sizes for a group "
		    "of " + std::to_string(size));
	for (int r = 0; r < size; r++) {
		int64_t k = splits.empty() ? rows / size : splits[r];
		if (k < 0)
			throw bad(std::string(what) + ": a negative split");
		counts.push_back((size_t)(k * row * mult));
		displs.push_back((size_t)(off * row * mult));
		off += k;
	}
	if (off != rows)
		throw bad(std::string(what) + ": the split sizes add up to " +
		    std::to_string(off) + " rows, the tensor has " +
		    std::to_string(rows));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::alltoall_base(at::Tensor &out, at::Tensor &in,
    std::vector<int64_t> &out_splits, std::vector<int64_t> &in_splits,
    const c10d::AllToAllOptions &)
{
	same_kind(in, out, "all_to_all_single");
	auto sc = std::make_shared<std::vector<size_t>>();
	auto sd = std::make_shared<std::vector<size_t>>();
	auto rc = std::make_shared<std::vector<size_t>>();
	auto rd = std::make_shared<std::vector<size_t>>();
	split_of(in, in_splits, getSize(), *sc, *sd, "all_to_all_single");
	split_of(out, out_splits, getSize(), *rc, *rd, "all_to_all_single");
	mccl_dtype_t dt = dtype_of(in);
	Stager s("all_to_all_single", *pool_);
	void *src = s.in(in).data_ptr(), *dst = s.out(out).data_ptr();
	bool even = in_splits.empty() && out_splits.empty();
	size_t n = count_of(in) / getSize();

	return run(OpType::ALLTOALL_BASE, "all_to_all_single", { out },
	    s.finish(), [=](mccl_request_t **r, mccl_status_t *) {
		if (even)
			return mccl_alltoall(src, dst, n, dt, comm_, r);
		return mccl_alltoallv(src, sc->data(), sd->data(), dst,
		    rc->data(), rd->data(), dt, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::alltoall(std::vector<at::Tensor> &outs,
    std::vector<at::Tensor> &ins, const c10d::AllToAllOptions &)
{
	if ((int)ins.size() != getSize() || (int)outs.size() != getSize())
		throw bad("all_to_all: a tensor per rank of the group in each "
		    "list");
	Stager s("all_to_all", *pool_);
	at::Tensor src = s.flat(total(ins), ins[0]);
	at::Tensor dst = s.flat(total(outs), ins[0]);
	auto sc = std::make_shared<std::vector<size_t>>();
	auto sd = std::make_shared<std::vector<size_t>>();
	auto rc = std::make_shared<std::vector<size_t>>();
	auto rd = std::make_shared<std::vector<size_t>>();
	int64_t si = 0, ri = 0, mult = ins[0].is_complex() ? 2 : 1;

	for (int r = 0; r < getSize(); r++) {
		same_kind(ins[0], ins[r], "all_to_all");
		same_kind(ins[0], outs[r], "all_to_all");
		s.pack(src.narrow(0, si, ins[r].numel()), ins[r]);
		s.back(outs[r], dst.narrow(0, ri, outs[r].numel()));
		sc->push_back((size_t)(ins[r].numel() * mult));
		sd->push_back((size_t)(si * mult));
		rc->push_back((size_t)(outs[r].numel() * mult));
		rd->push_back((size_t)(ri * mult));
		si += ins[r].numel();
		ri += outs[r].numel();
	}
	mccl_dtype_t dt = dtype_of(ins[0]);
	void *sp = src.data_ptr(), *dp = dst.data_ptr();
	return run(OpType::ALLTOALL, "all_to_all", outs, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_alltoallv(sp, sc->data(), sd->data(), dp,
		    rc->data(), rd->data(), dt, comm_, r);
	    });
}

static void
check_peer(int peer, int self, int size, const char *what)
{
	if (peer < 0 || peer >= size)
		throw bad(std::string(what) + ": rank " + std::to_string(peer) +
		    " is outside the group of " + std::to_string(size));
	if (peer == self)
		throw bad(std::string(what) + ": rank " + std::to_string(peer) +
		    " is this process");
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::send(std::vector<at::Tensor> &ts, int dst, int tag)
{
	const at::Tensor &t = only(ts, "send");
	check_peer(dst, getRank(), getSize(), "send");
	mccl_dtype_t dt = dtype_of(t);
	Stager s("send", *pool_);
	void *p = s.in(t).data_ptr();
	size_t n = count_of(t);

	return run(OpType::SEND, "send", ts, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_send(p, n, dt, dst, tag, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::recv(std::vector<at::Tensor> &ts, int src, int tag)
{
	const at::Tensor &t = only(ts, "recv");
	check_peer(src, getRank(), getSize(), "recv");
	mccl_dtype_t dt = dtype_of(t);
	Stager s("recv", *pool_);
	void *p = s.out(t).data_ptr();
	size_t n = count_of(t);

	return run(OpType::RECV, "recv", ts, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *st) {
		return mccl_recv_status(p, n, dt, src, tag, st, comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::recvAnysource(std::vector<at::Tensor> &ts, int tag)
{
	const at::Tensor &t = only(ts, "recv");
	mccl_dtype_t dt = dtype_of(t);
	Stager s("recv", *pool_);
	void *p = s.out(t).data_ptr();
	size_t n = count_of(t);

	return run(OpType::RECVANYSOURCE, "recv", ts, s.finish(),
	    [=](mccl_request_t **r, mccl_status_t *st) {
		return mccl_recv_status(p, n, dt, MCCL_ANY_SOURCE, tag, st,
		    comm_, r);
	    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupMCCL::barrier(const c10d::BarrierOptions &)
{
	return run(OpType::BARRIER, "barrier", {}, Staging(),
	    [=](mccl_request_t **r, mccl_status_t *) {
		return mccl_barrier(comm_, r);
	    });
}

} // namespace mccl_torch
