// ONNX's checker, run on the model the importer has parsed (not read again from its path) with
// the model's folder, for the external data it looks for. Where the checker is stricter than
// ONNX Runtime, the model is first brought within the checker's rules for the length of the
// check, with a warning naming what the checker would refuse:
//
//   the checker refuses                         ONNX Runtime                here
//   nodes out of topological order              sorts them                  sort_graph (before)
//   a graph without a name                      names need not be set       named for the check
//   a graph input or output without a shape     rank unknown until run      given one for the check
//   an IR version newer than the checker's      reads IR versions it knows  checked as the newest it knows
//
// The top of onnx::checker::check_model (the IR version, metadata and opset imports) is
// repeated here: the library's check_model takes no folder unless it reads the file itself.

#include "core/onnx/detail/onnx_proto.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>

#include <fmt/format.h>

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace redwood::onnx_detail {

namespace {

// Changes made to a model for the checker, undone when the check is over (also when it throws).
class Leniency {
 public:
  Leniency() = default;
  Leniency(const Leniency&) = delete;
  Leniency& operator=(const Leniency&) = delete;
  ~Leniency() {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  }
  void later(std::function<void()> undo) { undo_.push_back(std::move(undo)); }

 private:
  std::vector<std::function<void()>> undo_;
};

// Names every graph of the model that has none (the checker requires one), for the check.
void name_graphs(onnx::GraphProto& graph, const std::string& name, const std::string& source, Leniency& leniency) {
  if (graph.name().empty()) {
    log().warn("{}: {} has no name: ONNX's checker requires one, ONNX Runtime does not", source, name);
    graph.set_name(name);
    leniency.later([&graph] { graph.clear_name(); });
  }
  for (auto& node : *graph.mutable_node()) {
    for (auto& a : *node.mutable_attribute()) {
      const std::string inner = fmt::format("the graph of {} attribute '{}'", node_label(node), a.name());
      if (a.has_g()) name_graphs(*a.mutable_g(), inner, source, leniency);
      for (auto& g : *a.mutable_graphs()) name_graphs(g, inner, source, leniency);
    }
  }
}

// Gives the outermost graph's tensor inputs and outputs without a shape (rank unknown) an empty
// one for the check (the checker requires the field; ONNX Runtime takes the rank from the run).
void shape_values(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values, const char* what,
                  const std::string& source, Leniency& leniency) {
  for (auto& v : values) {
    if (!v.has_type() || !v.type().has_tensor_type() || v.type().tensor_type().has_shape()) continue;
    log().warn("{}: {} '{}' has no shape (its rank is unknown): ONNX's checker requires one, ONNX Runtime does not",
               source, what, v.name());
    auto* tensor_type = v.mutable_type()->mutable_tensor_type();
    tensor_type->mutable_shape();
    leniency.later([tensor_type] { tensor_type->clear_shape(); });
  }
}

void run_checker(onnx::ModelProto& model, const std::filesystem::path& model_dir, const std::string& source) {
  namespace checker = onnx::checker;
  RW_EXPECTS(model.ir_version() > 0, InvalidArgument, "{}: the model does not say its IR version", source);
  int ir_version = static_cast<int>(model.ir_version());
  if (ir_version > onnx::Version::IR_VERSION) {
    log().warn("{}: IR version {} is newer than ONNX's checker knows ({}); checked as {}", source, ir_version,
               static_cast<int>(onnx::Version::IR_VERSION), static_cast<int>(onnx::Version::IR_VERSION));
    ir_version = onnx::Version::IR_VERSION;
  }
  std::unordered_set<std::string> keys;
  for (const auto& entry : model.metadata_props()) {
    RW_EXPECTS(keys.insert(entry.key()).second, InvalidArgument, "{}: the model's metadata has the key '{}' twice",
               source, entry.key());
  }
  std::unordered_map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) opsets[op.domain()] = static_cast<int>(op.version());
  RW_EXPECTS(ir_version < 3 || !opsets.empty(), InvalidArgument,
             "{}: the model (IR version {}) imports no opset; from IR version 3 on, a model names its opsets", source,
             ir_version);
  RW_EXPECTS(ir_version >= 3 || opsets.empty(), InvalidArgument,
             "{}: the model (IR version {}) imports opsets, which IR versions before 3 do not", source, ir_version);
  if (opsets.empty()) opsets[onnx::ONNX_DOMAIN] = 1;

  checker::CheckerContext context;
  context.set_ir_version(ir_version);
  context.set_opset_imports(opsets);
  context.set_model_dir(model_dir.empty() ? std::string() : model_dir.string());
  checker::LexicalScopeContext scope;
  checker::check_graph(model.graph(), context, scope);
  if (ir_version >= 8) checker::check_model_local_functions(model, context, scope);
}

}  // namespace

void check_opsets(const onnx::ModelProto& model, const std::string& source) {
  const int newest =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().LastReleaseVersionMap().at(onnx::ONNX_DOMAIN);
  for (const auto& op : model.opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;
    RW_EXPECTS(op.version() <= newest, Unsupported,
               "{}: the model imports opset {} of the default ONNX domain; Redwood reads opsets up to {}, the newest "
               "that its ONNX library (version {}) knows",
               source, op.version(), newest, onnx::LAST_RELEASE_VERSION);
    RW_EXPECTS(op.version() >= 1, InvalidArgument, "{}: the model imports opset {} of the default ONNX domain", source,
               op.version());
  }
}

void check_model(onnx::ModelProto& model, const std::string& source, const std::filesystem::path& model_dir) {
  Leniency leniency;
  name_graphs(*model.mutable_graph(), "the model's graph", source, leniency);
  shape_values(*model.mutable_graph()->mutable_input(), "input", source, leniency);
  shape_values(*model.mutable_graph()->mutable_output(), "output", source, leniency);
  try {
    run_checker(model, model_dir, source);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InvalidArgument(fmt::format("{}: the ONNX checker rejects the model: {}", source, e.what()));
  }
}

}  // namespace redwood::onnx_detail
