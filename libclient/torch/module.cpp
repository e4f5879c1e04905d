/*
 * module.cpp: mccl._native, the Python module mccl.torch makes its
 * groups from (see backend.h).
 */
#include "backend.h"

#include <torch/extension.h>

namespace py = pybind11;
using mccl_torch::BackendBase;
using mccl_torch::ProcessGroupMCCL;

PYBIND11_MODULE(_native, m)
{
	m.doc() = "MCCL's torch.distributed backend in C++ (mccl.torch)";
	/* mccl.torch loads it only into the torch it was built for */
	m.attr("TORCH_VERSION") = MCCL_BUILT_FOR_TORCH;
	py::module::import("torch.distributed");
	/* mccl's exception of the code, where torch's own bindings (Work.wait,
	 * the group's calls, futures) meet one of ours */
	py::register_exception_translator([](std::exception_ptr p) {
		try {
			if (p)
				std::rethrow_exception(p);
		} catch (const mccl_torch::Error &e) {
			py::object mccl = py::module::import("mccl");
			py::object cls = mccl.attr("_ERRORS").attr("get")(
			    (int)e.code, mccl.attr("InternalError"));
			py::object exc = cls(e.what(), (int)e.code);
			PyErr_SetObject(cls.ptr(), exc.ptr());
		}
	});
#ifdef MCCL_C10D_OPTIONS
	using mccl_torch::OptionsMCCL;
	py::class_<OptionsMCCL, c10d::Backend::Options,
	    c10::intrusive_ptr<OptionsMCCL>>(m, "Options")
	    .def("__copy__", [](const OptionsMCCL &o) {
			return c10::make_intrusive<OptionsMCCL>(o);
		})
	    .def("__deepcopy__", [](const OptionsMCCL &o, py::dict) {
			return c10::make_intrusive<OptionsMCCL>(o);
		}, py::arg("memo"));
#endif
	auto pg = py::class_<ProcessGroupMCCL, BackendBase,
	    c10::intrusive_ptr<ProcessGroupMCCL>>(m, "ProcessGroupMCCL");
#ifdef MCCL_C10D_OPTIONS
	/* split_group reads it (the parent's, for its sub-groups) */
	pg.def_property_readonly("options",
	    &ProcessGroupMCCL::getBackendOptions);
#endif
	pg
	    .def(py::init([](uintptr_t comm, bool owns, int rank, int size,
		double timeout_s, const std::string &name) {
			return c10::make_intrusive<ProcessGroupMCCL>(
			    reinterpret_cast<mccl_comm_t *>(comm), owns, rank,
			    size, std::chrono::milliseconds(
			    (int64_t)(timeout_s * 1000)), name);
		}),
		py::arg("comm"), py::arg("owns_comm"), py::arg("rank"),
		py::arg("size"), py::arg("timeout_s"), py::arg("name"),
		py::call_guard<py::gil_scoped_release>())
	    .def("abort", &ProcessGroupMCCL::abort_all,
		"every pending operation ends, on every rank, with an error",
		py::call_guard<py::gil_scoped_release>())
	    .def("_drain", &ProcessGroupMCCL::drain,
		"returns once every operation called so far has started",
		py::call_guard<py::gil_scoped_release>())
	    .def("_hold_starts", &ProcessGroupMCCL::hold_starts,
		"tests: the operations called next start `seconds` from now, "
		"as after a CUDA copy")
	    .def("_queued_starts", &ProcessGroupMCCL::queued_starts)
	    .def("shutdown", &ProcessGroupMCCL::shutdown,
		"the group's threads stop; pending operations fail",
		py::call_guard<py::gil_scoped_release>())
	    .def_property_readonly("_comm_handle", [](ProcessGroupMCCL &pg) {
			return reinterpret_cast<uintptr_t>(pg.comm());
		})
	    .def("comm_split_count", &ProcessGroupMCCL::splits,
		"sub-groups split from this one so far (split_group names "
		"them by it)")
	    .def("_staging_stats", [](ProcessGroupMCCL &pg) {
			py::dict d;
			d["made"] = pg.pool().made();
			d["fallback"] = pg.pool().fallback();
			return d;
		}, "CUDA tensors' host memory: segments made so far, and why "
		"torch's pinned memory is used instead (empty: it is not)");
}
