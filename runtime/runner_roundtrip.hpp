#pragma once
// A model runner's round trip on a device: what a batch spends in one of the device's runners
// beyond its copies and compute (the submit's own work, the wake of the thread that runs the
// batch or notices its end, the call of its completion), measured with a one-node model one
// batch at a time. It is what handing a split's batch to a segment on that device costs, which
// the partitioner takes as a segment's hand-over before any batch of a split measured one on
// this machine (DeviceProfile::runner_roundtrip_ms, docs/planner.md "Device profiles").

#include <string>

namespace redwood::runtime {

/// The median round trip, in ms, of `batches` batches (after a few unmeasured ones) through a
/// runner of device kind `kind` ("cpu", or a device runner the registry has) on device `index`:
/// each batch's time from submit to its completion being called, less the copies and compute its
/// runner recorded for it. Throws what making or running the runner throws.
double measure_runner_roundtrip(const std::string& kind, int index, int batches);

}  // namespace redwood::runtime
