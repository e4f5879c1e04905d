/*
 * pool.cpp: a group's host memory for CUDA tensors (HostPool, backend.h).
 * The buffers are segments the daemon shares (mccl_alloc), so that the
 * library runs on them in place, page-locked for the GPU so that the
 * copies run by DMA and do not hold the caller.  Page-locking takes the
 * CUDA runtime's cudaHostRegister from the runtime torch loaded (dlsym):
 * this file needs no CUDA headers, as the rest of the backend.
 */
#include "backend.h"

#include <dlfcn.h>

namespace mccl_torch {

/* Buffers come in powers of two from this: one buffer serves an operation
 * of any smaller size, and a round of DDP's buckets finds its own. */
static constexpr size_t kMinBuffer = 1 << 20;

/* cudaHostRegisterPortable: page-locked for every device's context */
static constexpr unsigned kRegisterPortable = 1;

using HostRegisterFn = int (*)(void *, size_t, unsigned);
using HostUnregisterFn = int (*)(void *);
using DeviceSynchronizeFn = int (*)();

/* name from the CUDA runtime already loaded (by torch), or nullptr. */
static void *
cuda_runtime_symbol(const char *name)
{
	static const char *const libs[] = { "libcudart.so.13",
	    "libcudart.so.12", "libcudart.so.11.0", "libcudart.so" };
	void *fn = dlsym(RTLD_DEFAULT, name);

	for (const char *lib : libs) {
		if (fn != nullptr)
			break;
		/* RTLD_NOLOAD: only the runtime torch runs on, never another */
		void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
		if (h != nullptr) {
			fn = dlsym(h, name);
			dlclose(h);
		}
	}
	return fn;
}

HostPool::HostPool(mccl_comm_t *comm) : comm_(comm) {}

HostPool::~HostPool()
{
	close();
}

at::Tensor
HostPool::take(size_t bytes, const c10::Stream &stream)
{
	size_t size = kMinBuffer;
	while (size < bytes)
		size *= 2;
	std::unique_lock<std::mutex> lock(lock_);
	if (closed_)
		throw Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: the group was "
		    "destroyed (shut down)");
	auto &free = free_[size];
	void *ptr = nullptr;
	if (!free.empty()) {
		Free f = std::move(free.back());
		free.pop_back();
		ptr = f.ptr;
		f.after.block(stream);	/* on the GPU: the caller goes on */
	}
	lock.unlock();
	if (ptr == nullptr && (ptr = make(size)) == nullptr)
		return at::empty({ (int64_t)bytes }, at::TensorOptions()
		    .dtype(at::kByte).pinned_memory(true));
	auto self = shared_from_this();
	return at::from_blob(ptr, { (int64_t)size },
	    [self, size, stream](void *p) { self->give(p, size, stream); },
	    at::TensorOptions().dtype(at::kByte));
}

/* A new page-locked segment of size, or nullptr (then why, once). */
void *
HostPool::make(size_t size)
{
	static auto reg = reinterpret_cast<HostRegisterFn>(
	    cuda_runtime_symbol("cudaHostRegister"));
	std::lock_guard<std::mutex> g(lock_);

	if (!fallback_.empty())
		return nullptr;
	if (reg == nullptr) {
		fallback_ = "the CUDA runtime's cudaHostRegister was not found";
		return nullptr;
	}
	void *ptr = mccl_alloc(comm_, size);
	if (ptr == nullptr) {
		fallback_ = std::string("no segment from the daemon: ") +
		    mccl_last_error(comm_);
		return nullptr;
	}
	int rc = reg(ptr, size, kRegisterPortable);
	if (rc != 0) {
		mccl_free(comm_, ptr);
		fallback_ = "cudaHostRegister failed (error " +
		    std::to_string(rc) + ")";
		return nullptr;
	}
	made_.push_back(ptr);
	return ptr;
}

/* A buffer's last tensor is gone: free again once the copies queued on
 * stream so far (its copies back among them) ended. */
void
HostPool::give(void *ptr, size_t size, const c10::Stream &stream)
{
	c10::Event after(stream.device_type());

	try {
		after.record(stream);
	} catch (const std::exception &) {
		return;		/* CUDA is going away: so is the pool */
	}
	std::lock_guard<std::mutex> g(lock_);
	if (!closed_)
		free_[size].push_back(Free{ ptr, std::move(after) });
}

/* Every buffer unpinned and given back to the library, before the
 * communicator goes; tensors still holding one are never read again. */
void
HostPool::close()
{
	static auto unreg = reinterpret_cast<HostUnregisterFn>(
	    cuda_runtime_symbol("cudaHostUnregister"));
	static auto sync = reinterpret_cast<DeviceSynchronizeFn>(
	    cuda_runtime_symbol("cudaDeviceSynchronize"));
	std::vector<void *> made;
	{
		std::lock_guard<std::mutex> g(lock_);
		if (closed_)
			return;
		closed_ = true;
		made.swap(made_);
		free_.clear();
	}
	if (made.empty())
		return;
	if (sync != nullptr)	/* no copy still runs into one */
		sync();
	for (void *p : made) {
		if (unreg != nullptr)
			unreg(p);
		mccl_free(comm_, p);
	}
}

size_t
HostPool::made() const
{
	std::lock_guard<std::mutex> g(lock_);

	return made_.size();
}

std::string
HostPool::fallback() const
{
	std::lock_guard<std::mutex> g(lock_);

	return fallback_;
}

} // namespace mccl_torch
