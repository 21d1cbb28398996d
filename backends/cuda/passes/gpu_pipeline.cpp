#include "backends/cuda/passes/gpu_pipeline.hpp"

namespace redwood::passes {

std::vector<NamedPass> gpu_pipeline(const GpuPipelineOptions& options) {
  std::vector<NamedPass> pipeline = chain_pipeline();
  if (options.nhwc_storage.has_value()) {
    const DType storage = *options.nhwc_storage;
    const bool round = options.round_tf32, stem = options.space_to_depth_stem;
    pipeline.push_back({"choose_gpu_layout", [storage, round, stem](Graph& g, std::vector<std::string>& log) {
                          choose_gpu_layout(g, log, storage, round, stem);
                        }});
    if (options.fuse_shortcuts) pipeline.push_back({"fuse_conv_shortcut", fuse_conv_shortcut});
  }
  return pipeline;
}

}  // namespace redwood::passes
