#pragma once
// The CPU's figures for its DeviceProfile (runtime/device_profile.hpp): what identifies the CPU,
// and the measurement itself (runtime/cpu_profile.cpp says how each figure is taken).

#include "runtime/device_profile.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace redwood {
class Graph;
}

namespace redwood::runtime {

/// What the CPU's figures depend on: model name, the threads Redwood uses, the ISA, oneDNN's
/// version. Cheap: reads /proc/cpuinfo.
std::string cpu_profile_key();

/// Bytes that reach past the last-level cache: twice it (glibc reports one L3), at least 32 MiB and
/// at most `most` (first-touching each 4 KiB page of a larger buffer takes longer than what it is
/// for; in a VM, where a fault costs more and the reported L3 is the host's, most of the second).
std::size_t past_last_level_cache(std::size_t most);

/// Measures the CPU: peak matmul rates, memory bandwidth, per-op dispatch cost. About a second on
/// a 2-core VM; `quick` makes it about ten times shorter and less precise. Fills everything but
/// device, key, measured_at and measure_seconds, which device_profile() sets.
DeviceProfile measure_cpu_profile(bool quick);

/// A chain of `nodes` Tanh nodes over a [1, 64] fp32 tensor: the probes' model, whose compute is
/// next to nothing (the CPU's dispatch cost; a runner's round trip, runtime/runner_roundtrip.cpp).
std::shared_ptr<Graph> tanh_chain(int nodes);

}  // namespace redwood::runtime
