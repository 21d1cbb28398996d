#pragma once
// The GPUs as Redwood knows them: asked of the driver once per process (probe_devices(), the
// only place that asks for a device's properties) and kept. Every other part of the backend
// (kernels choosing tiles by SM count, the PDL and wgmma checks, the memory pools, the plan
// cache's key, the runners) reads them here, so a process sees one answer and asks once.
//
// Where no GPU is usable (a machine without one answering the partitioner's "does the GPU run
// this node", or planning a schedule in a test), plans are made for the planning target: an
// H200's figures (132 SMs, sm_90), named as such. Nothing runs there; only plan-time choices that
// depend on the SM count (tiles, split-K) read it, and they decide nothing a run could see.

#include "backends/cuda/device_probe.hpp"

namespace redwood::cuda {

/// The driver's answer, read on first use: versions, devices, and why none is usable.
const ProbeResult& cuda_devices();

/// GPU `index`; throws Unsupported naming the index and the reason when there is no such usable
/// device.
const DeviceInfo& cuda_device(int index);

/// The calling thread's current GPU (cudaGetDevice); throws Unsupported when none is usable.
const DeviceInfo& current_cuda_device();

/// What a plan is made for: the current GPU, else the planning target (see above), whose
/// index is -1 and whose name says what it is.
const DeviceInfo& planning_device();

}  // namespace redwood::cuda
