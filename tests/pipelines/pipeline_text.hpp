#pragma once
// Pipeline tests write their YAML inline; this anchors it to a file name for messages and
// relative paths (the assets folder), and builds it with overrides.

#include "pipelines/config.hpp"
#include "support/test_support.hpp"

#include <string>
#include <vector>

namespace redwood::testing {

/// YAML text as if it were "<assets>/test.yaml", so "models/..." and "video/..." resolve.
inline PipelineFile pipeline_text(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return parse_pipeline_text(yaml, assets_dir() / "test.yaml", overrides);
}

}  // namespace redwood::testing
