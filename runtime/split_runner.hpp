#pragma once
// SplitRunner: a model cut into single-device segments (runtime/cut_model.hpp), each run by a
// runner of its own device, a batch flowing through them as their inputs become ready:
//
//   submit ─stage inputs─► segment 1 (cuda) ─done─► segment 2 (cpu) ─done─► segment 3 (cuda) ─done─► row views ─► done
//          (host tensors,   its runner's slots       values cross as          ...                    (the batch's parts)
//           whole batch)                              host tensors
//
// A segment starts once every segment that makes one of its inputs is done, so segments on
// different branches of the model run at the same time on their devices, as the placement's
// schedule assumes. Each segment's runner keeps its own slots, so while segment 2 runs batch k on
// the CPU, segment 1 runs batch k+1 on the GPU: devices overlap across batches as pipeline stages
// do. A completion (on its runner's completion thread) submits the segments it unblocks; the
// segments form a DAG, so back-pressure waits but never deadlocks. Results are handed over in
// submit order (a later batch's last segment may finish first; it waits).
//
// Values cross between segments boxed: [1, ...] (the segments' graphs add and strip that
// dimension), because runners split a batch by rows on dim 0 and an intermediate value's dim 0
// need not be the batch. The values live in the split's own pool (an accelerator's page-locked
// memory where a segment runs on one, runtime/value_pool.hpp); the model's outputs reach the
// batch's parts as views of their rows, not copies, so an output's block stays out of the pool
// until the batch's last part of it is dropped.

#include "core/model_runner.hpp"
#include "runtime/partition.hpp"

#include <memory>

namespace redwood::runtime {

/// A runner for `partition` (every segment on its device: "cpu", or a device runner the registry
/// has). `config.slots` is each segment runner's; `config.device` the accelerators' index.
/// segment_stats() gives each segment runner's stats. Throws what making a segment's runner throws.
std::unique_ptr<ModelRunner> make_split_runner(const Partition& partition, const RunnerConfig& config);

}  // namespace redwood::runtime
