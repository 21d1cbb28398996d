#pragma once
// fp16/bf16 graphs on the CPU: the CPU kernels compute in fp32 (a few data-movement ops, Cast and
// Min/Max/Mod take fp16 too), so the CPU executor runs compute_in_fp32 before the optimizer's
// passes (cpu_pipeline), with or without the optimizer; an fp16/bf16 graph then runs in fp32
// between casts at its inputs and outputs. The passes every device starts from
// (default_pipeline) and the CUDA runner's (gpu_pipeline, from chain_pipeline) leave it out: the
// GPU kernels have their own fp16/bf16 paths.

#include "core/passes/pass_manager.hpp"

namespace redwood::passes {

/// fp16/bf16 computed in fp32 (core/passes/compute_in_fp32.cpp): initializers, constants, Casts
/// to fp16/bf16, dtype attributes and value types inside the graph become fp32; fp16/bf16 graph
/// inputs get a Cast to fp32 after them and fp16/bf16 graph outputs a Cast back before them, so
/// the caller sees the declared types.
void compute_in_fp32(Graph& graph, std::vector<std::string>& log);
/// Whether compute_in_fp32 would change the graph: an fp16/bf16 input, output, value type,
/// initializer, tensor attribute, or Cast/dtype attribute naming fp16/bf16.
bool has_reduced_float(const Graph& graph);
/// The CPU executor's pipeline: with `fp32`, compute_in_fp32 when the graph holds fp16/bf16
/// (has_reduced_float); then, with `optimize`, default_pipeline(regions).
std::vector<NamedPass> cpu_pipeline(const Graph& graph, bool optimize, bool regions, bool fp32 = true);

}  // namespace redwood::passes
