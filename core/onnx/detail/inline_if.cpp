// Inlining an If whose condition is a constant: exporters leave such Ifs where the model's code
// branches on something that was fixed when it was exported (a flag, a shape known then), and
// Redwood's IR holds no subgraphs. The branch taken replaces the If:
//
//   c = Constant(true)                       c = Constant(true)
//   y = If(c) then { t = Relu(x); out t }    y = Relu(x)            (the branch's value written as y)
//            else { ... }
//
// Names the branch defines (node outputs, initializers) become "<if>/<name>", unless the graph
// already has that name, then "<if>/<name>_1" and so on; a branch output that no node of the
// branch writes (an initializer, a value of the enclosing graph, or one written as two outputs)
// reaches the If's output through an Identity node. Names the branch reads from the enclosing
// graph stay as they are, in graphs nested in the branch too: ONNX forbids a nested graph to
// define a name again, so no nested name is renamed by mistake.

#include "core/onnx/detail/onnx_proto.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <deque>
#include <unordered_map>
#include <unordered_set>

namespace redwood::onnx_detail {

namespace {

using Renames = std::unordered_map<std::string, std::string>;

void rename(std::string* name, const Renames& renames) {
  const auto it = renames.find(*name);
  if (it != renames.end()) *name = it->second;
}

// Renames what the nodes of a graph nested in the branch read from it.
void rename_reads(onnx::GraphProto& graph, const Renames& renames) {
  for (auto& node : *graph.mutable_node()) {
    for (auto& in : *node.mutable_input()) rename(&in, renames);
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) rename_reads(*a.mutable_g(), renames);
      for (auto& g : *a.mutable_graphs()) rename_reads(g, renames);
    }
  }
  for (auto& out : *graph.mutable_output()) rename(out.mutable_name(), renames);
}

void add_names(const onnx::GraphProto& graph, std::unordered_set<std::string>& names) {
  for (const auto& v : graph.input()) names.insert(v.name());
  for (const auto& v : graph.output()) names.insert(v.name());
  for (const auto& t : graph.initializer()) names.insert(t.name());
  for (const auto& n : graph.node()) {
    names.insert(n.name());
    names.insert(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) add_names(a.g(), names);
      for (const auto& g : a.graphs()) add_names(g, names);
    }
  }
}

bool is_default_domain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

class IfInliner {
 public:
  IfInliner(onnx::GraphProto& graph, const std::string& source, const std::filesystem::path& model_dir)
      : graph_(graph), source_(source), model_dir_(model_dir) {
    add_names(graph, used_);
    for (auto& t : *graph.mutable_initializer()) initializers_[t.name()] = &t;
  }

  void run() {
    std::deque<onnx::NodeProto> work;
    for (auto& node : *graph_.mutable_node()) work.push_back(std::move(node));
    graph_.clear_node();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> done;
    while (!work.empty()) {
      onnx::NodeProto node = std::move(work.front());
      work.pop_front();
      if (node.op_type() == "If" && is_default_domain(node)) {
        std::vector<onnx::NodeProto> taken = inline_branch(node);
        work.insert(work.begin(), std::make_move_iterator(taken.begin()), std::make_move_iterator(taken.end()));
        continue;
      }
      onnx::NodeProto* kept = done.Add();
      *kept = std::move(node);
      if (kept->op_type() == "Constant" && is_default_domain(*kept) && kept->output_size() == 1) {
        constants_[kept->output(0)] = kept;
      }
    }
    graph_.mutable_node()->Swap(&done);
  }

 private:
  // Whether the If takes its then branch; Unsupported when its condition is not a constant.
  bool condition(const onnx::NodeProto& node) {
    const std::string where = fmt::format("{}: {}", source_, node_label(node));
    RW_EXPECTS(node.input_size() >= 1 && !node.input(0).empty(), InvalidArgument, "{}: the condition is missing", where);
    const std::string& name = node.input(0);
    Tensor value;
    if (const auto it = initializers_.find(name); it != initializers_.end()) {
      value = tensor_from_proto(*it->second, source_, model_dir_);
    } else if (const auto c = constants_.find(name); c != constants_.end()) {
      value = constant_from_proto(*c->second, source_, model_dir_);
    } else {
      throw Unsupported(fmt::format(
          "{}: the condition '{}' is computed when the model runs; Redwood runs an If only when its condition is a "
          "constant (an initializer or a Constant node), by inlining the branch it takes",
          where, name));
    }
    RW_EXPECTS(value.dtype() == DType::kBool && value.numel() == 1, InvalidArgument,
               "{}: the condition '{}' is {}, not one bool", where, name, value.description());
    return static_cast<const std::uint8_t*>(value.raw_data())[0] != 0;
  }

  // A name not yet in the model, from `wanted`.
  std::string fresh(const std::string& wanted) {
    std::string name = wanted;
    for (int k = 1; used_.count(name); ++k) name = fmt::format("{}_{}", wanted, k);
    used_.insert(name);
    return name;
  }

  // The nodes that replace `node`: the branch it takes, renamed, and Identity nodes for the
  // outputs no node of the branch writes. The branch's initializers join the graph's.
  std::vector<onnx::NodeProto> inline_branch(onnx::NodeProto& node) {
    const std::string where = fmt::format("{}: {}", source_, node_label(node));
    const char* key = condition(node) ? "then_branch" : "else_branch";
    onnx::GraphProto branch;
    bool found = false;
    for (auto& a : *node.mutable_attribute()) {
      if (a.name() != key || !a.has_g()) continue;
      branch = std::move(*a.mutable_g());
      found = true;
    }
    RW_EXPECTS(found, InvalidArgument, "{}: the {} (the branch its condition takes) is missing", where, key);
    log().debug("{}: the condition is {}: the {} is inlined", where, key == std::string("then_branch"), key);
    RW_EXPECTS(branch.output_size() == node.output_size(), InvalidArgument,
               "{}: the {} has {} outputs, the If {}", where, key, branch.output_size(), node.output_size());
    RW_EXPECTS(branch.sparse_initializer_size() == 0, Unsupported, "{}: the {} has sparse initializers", where, key);
    const std::string prefix = node.name().empty() ? fresh("If") : node.name();

    std::unordered_set<std::string> written;
    for (const auto& n : branch.node()) written.insert(n.output().begin(), n.output().end());
    Renames renames;
    std::vector<std::pair<std::string, std::string>> copies;  // (branch value, If output) through Identity
    for (int j = 0; j < node.output_size(); ++j) {
      const std::string& value = branch.output(j).name();
      if (node.output(j).empty()) continue;  // an output nobody reads
      if (written.count(value) && !renames.count(value)) {
        renames[value] = node.output(j);
      } else {
        copies.emplace_back(value, node.output(j));
      }
    }
    for (const auto& t : branch.initializer()) renames[t.name()] = fresh(prefix + "/" + t.name());
    for (const auto& n : branch.node()) {
      for (const auto& out : n.output()) {
        if (!out.empty() && !renames.count(out)) renames[out] = fresh(prefix + "/" + out);
      }
    }

    for (auto& t : *branch.mutable_initializer()) {
      onnx::TensorProto* added = graph_.add_initializer();
      *added = std::move(t);
      rename(added->mutable_name(), renames);
      initializers_[added->name()] = added;
    }
    std::vector<onnx::NodeProto> nodes;
    for (auto& n : *branch.mutable_node()) {
      n.set_name(fresh(prefix + "/" + (n.name().empty() ? n.op_type() : n.name())));
      for (auto& in : *n.mutable_input()) rename(&in, renames);
      for (auto& out : *n.mutable_output()) rename(&out, renames);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) rename_reads(*a.mutable_g(), renames);
        for (auto& g : *a.mutable_graphs()) rename_reads(g, renames);
      }
      nodes.push_back(std::move(n));
    }
    for (const auto& [value, output] : copies) {
      onnx::NodeProto& copy = nodes.emplace_back();
      copy.set_op_type("Identity");
      copy.set_name(fresh(prefix + "/" + output));
      const auto it = renames.find(value);
      copy.add_input(it == renames.end() ? value : it->second);
      copy.add_output(output);
    }
    return nodes;
  }

  onnx::GraphProto& graph_;
  const std::string& source_;
  const std::filesystem::path& model_dir_;
  std::unordered_set<std::string> used_;  // every name of the model: values and nodes, nested graphs' too
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, const onnx::NodeProto*> constants_;  // Constant nodes kept, by output
};

}  // namespace

void inline_constant_ifs(onnx::GraphProto& graph, const std::string& source, const std::filesystem::path& model_dir) {
  IfInliner(graph, source, model_dir).run();
}

}  // namespace redwood::onnx_detail
