#pragma once
// Pipeline tests write their YAML inline; this anchors it to a file name for messages and
// relative paths (the assets folder), and builds it with overrides.

#include "pipelines/config.hpp"
#include "pipelines/pipeline.hpp"
#include "stages/params.hpp"
#include "support/test_support.hpp"

#include <string>
#include <vector>

namespace redwood::testing {

/// YAML text as if it were "<assets>/test.yaml", so "models/..." and "video/..." resolve.
inline PipelineFile pipeline_text(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return parse_pipeline_text(yaml, assets_dir() / "test.yaml", overrides);
}

/// The message of the ConfigError that building `yaml` throws ("" when none).
inline std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    Pipeline p(pipeline_text(yaml, overrides));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

/// "<assets>/test.yaml:LINE:COLUMN:", how an error names a place in pipeline_text's YAML.
inline std::string where(int line, int column) {
  return (assets_dir() / "test.yaml").string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ":";
}

}  // namespace redwood::testing
