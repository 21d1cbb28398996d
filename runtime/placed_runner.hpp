#pragma once
// PlacedRunner: a model whose devices the partitioner chooses, once, when its input shapes are
// first known (prepare(), or the first batch): the model runs on one device's own runner when
// the placement keeps it whole, else split (runtime/split_runner.hpp). The segments do not depend
// on the shapes, so the placement made at the first shapes serves every later batch size. A
// whole-device placement is kept in the placement cache (runtime/placement_cache.hpp): a restart
// makes that device's runner at once, without the analysis.
//
// This is what `device: auto` and a `device: cuda` model with ops the GPU lacks get in a
// pipeline (stages/infer/infer_stage.cpp); the placement and its predicted time are logged.

#include "core/model_runner.hpp"
#include "runtime/partition.hpp"

#include <memory>

namespace redwood::runtime {

/// A runner that places `graph` with `options` (device 0 "cpu", device 1 the accelerator whose
/// runner `config` configures) when its input shapes are first known. `model_name` is for logs.
std::unique_ptr<ModelRunner> make_placed_runner(std::shared_ptr<const Graph> graph, PartitionOptions options,
                                                const RunnerConfig& config, std::string model_name);

/// The placement a PlacedRunner chose (null before it chose, or for another runner).
const Partition* placed_partition(const ModelRunner& runner);

/// Op types of `graph`'s nodes (after the device-neutral passes) that `device` has no kernel for
/// at any shape, sorted.
std::vector<std::string> ops_without_kernel(const Graph& graph, Device device);

}  // namespace redwood::runtime
