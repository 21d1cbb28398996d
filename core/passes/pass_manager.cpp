#include "core/passes/pass_manager.hpp"

namespace redwood::passes {

std::vector<NamedPass> default_pipeline() {
  return {
      {"fold_constants", fold_constants},
      {"eliminate_dead_code", eliminate_dead_code},
      {"fold_conv_affine", fold_conv_affine},
      {"recognize_hardswish", recognize_hardswish},
      {"fuse_epilogue", fuse_epilogue},
      {"eliminate_dead_code", eliminate_dead_code},
  };
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
