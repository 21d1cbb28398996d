#include "core/passes/pass_manager.hpp"

namespace redwood::passes {

std::vector<NamedPass> default_pipeline(bool regions) {
  std::vector<NamedPass> pipeline{
      {"fold_constants", fold_constants},
      {"eliminate_dead_code", eliminate_dead_code},
      {"fold_pad_into_conv", fold_pad_into_conv},
      {"fold_conv_affine", fold_conv_affine},
      {"recognize_hardswish", recognize_hardswish},
      {"fuse_epilogue", fuse_epilogue},
      {"eliminate_dead_code", eliminate_dead_code},
  };
  if (regions) {
    pipeline.push_back({"form_regions", form_regions});
    // After the regions, so that it only fuses what they left outside (a chain node would split
    // a region). Not in the regions-free pipeline: the reference-only executor stays the unfused
    // ground truth.
    pipeline.push_back({"fuse_elementwise", fuse_elementwise});
  }
  return pipeline;
}

std::vector<NamedPass> chain_pipeline() {
  std::vector<NamedPass> pipeline = default_pipeline(false);
  pipeline.push_back({"fuse_elementwise", fuse_elementwise});
  return pipeline;
}

std::vector<PassRecord> optimize(Graph& graph, const std::vector<NamedPass>& pipeline) {
  const std::vector<NamedPass> passes = pipeline.empty() ? default_pipeline() : pipeline;
  std::vector<PassRecord> records;
  for (const auto& p : passes) {
    PassRecord r{p.name, {}};
    p.run(graph, r.changes);
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace redwood::passes
