/*
 * split.cpp: what torch 2's c10d::Backend asks of a group beyond its
 * operations: sub-groups by split (split_group, and DeviceMesh where the
 * world was bound to a device), its options, and the eager start of a
 * group bound to a device (init_process_group(device_id=...)).
 */
#include "backend.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>

namespace mccl_torch {

#ifdef MCCL_C10D_SPLIT
/*
 * The sub-group of ranks (ranks of this group, sorted), or none where this
 * rank is not among them.  Every rank of the group calls it, as a
 * collective: mccl_comm_split, coloured by the sub-group's first rank.
 * torch asks once per device type of the group (CPU and CUDA are both
 * this backend): the second call of one split gets the first's answer.
 */
c10::intrusive_ptr<c10d::Backend>
ProcessGroupMCCL::split(const c10::intrusive_ptr<c10d::Store> &store,
    const std::vector<int> &ranks, const c10::intrusive_ptr<Options> &opts)
{
	if (store && store == last_split_store_)
		return last_split_;
	auto me = std::find(ranks.begin(), ranks.end(), getRank());
	bool member = me != ranks.end();
	int color = member ? ranks.front() : MCCL_UNDEFINED;
	int key = member ? (int)(me - ranks.begin()) : 0;
	mccl_comm_t *sub = nullptr;

	drain();	/* the split comes after what was called before it */
	check(mccl_comm_split(comm_, color, key, &sub), "split_group");
	splits_++;
	c10::intrusive_ptr<BackendBase> group;
	if (sub != nullptr) {
		auto timeout = opts && opts->timeout != kBackendDefaultTimeout ?
		    opts->timeout : std::chrono::milliseconds(0);
		group = c10::make_intrusive<ProcessGroupMCCL>(sub, true, key,
		    (int)ranks.size(), timeout, name_);
	}
	last_split_store_ = store;
	last_split_ = group;
	return group;
}
#endif

#ifdef MCCL_C10D_OPTIONS
c10::intrusive_ptr<c10d::Backend::Options>
ProcessGroupMCCL::getBackendOptions()
{
	return c10::make_intrusive<OptionsMCCL>(name_, timeout_.count() > 0 ?
	    timeout_ : kBackendDefaultTimeout);
}
#endif

#ifdef MCCL_C10D_EAGER_CONNECT
/* The group's job is formed when it is made; a CUDA device's host memory
 * is made now too, so the first operation finds it ready. */
void
ProcessGroupMCCL::eagerConnectSingleDevice(at::Device device)
{
	if (!device.is_cpu() && !device.is_cuda())
		throw Error(MCCL_ERR_INVALID_ARGUMENT, "mccl: device_id " +
		    device.str() + ": the mccl backend works on CPU and CUDA "
		    "tensors");
	if (!device.is_cuda())
		return;
	auto *impl = c10::impl::getDeviceGuardImpl(device.type());
	pool_->take(1, impl->getStream(device));	/* and back at once */
}
#endif

} // namespace mccl_torch
