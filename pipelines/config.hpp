#pragma once
// Pipeline files: YAML naming sources, models, stages, sinks and service settings (schema in
// docs/pipelines.md). Loading parses the file and applies command-line overrides; the pipeline
// builder then reads every key through Params, so any mistake is reported at file:line:column.

#include "stages/params.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace redwood {

struct PipelineFile {
  std::shared_ptr<ConfigOrigin> origin;
  YAML::Node root;
};

/// Parses a pipeline file (a syntax error names file:line:column) and applies each override
/// ("stages.det.max_batch=4"; see apply_override).
PipelineFile load_pipeline_file(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});
/// The same from text (tests); `file` names it in messages and anchors relative paths.
PipelineFile parse_pipeline_text(const std::string& text, const std::filesystem::path& file,
                                 const std::vector<std::string>& overrides = {});

/// Sets one value: "a.b.c=value". Map keys are followed (and created when missing); in a list
/// (sources, stages, sinks) a part selects the element whose `name` matches, or an index. The
/// value is parsed as YAML, so lists (`[1, 2]`) and maps work. Throws ConfigError.
void apply_override(PipelineFile& file, const std::string& assignment);

}  // namespace redwood
