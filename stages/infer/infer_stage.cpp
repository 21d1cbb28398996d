// infer: runs a model (on the CPU or a GPU, see below) on a tensor each frame carries. Frames from every
// stream are batched together (up to max_batch frames, a partial batch waiting at most
// timeout_ms): their tensors are concatenated on dim 0, run once, and the outputs split back.
// Dim 0 is "items of a frame": 1 for a whole picture, K for K crops from an earlier stage (a
// secondary model), 0 when a frame has none (the frame then gets no output).
//
//   - name: det
//     type: infer
//     model: det
//     input: det_in                       # tensor key feeding the model's (only) input
//     outputs: {sigmoid_0.tmp_0: det_prob} # model output -> tensor key (default: its own name)
//     max_batch: 4
//     timeout_ms: 5
//
// The model runs where its entry under `models:` says (device: cpu | cuda | auto, precision):
// the CPU Executor, or the runner a backend registered for the device (core/model_runner.hpp).

#include "core/log.hpp"
#include "core/model_runner.hpp"
#include "stages/frame_memory.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>

#include <cstring>
#include <mutex>

namespace redwood {
namespace {

// The model's runner on its configured device. `device: cuda` where CUDA is not built or not
// usable fails at load, naming the model, the config location and CUDA's reason; `device: auto`
// then runs on the CPU and logs why.
std::unique_ptr<ModelRunner> make_runner(const ModelEntry& model, const std::string& model_name) {
  if (model.device == "cpu") return make_cpu_runner(model.graph);
  const auto& registry = device_runner_registry();
  const auto it = registry.find("cuda");
  std::string reason = it == registry.end() ? "this Redwood was built without CUDA" : it->second.unavailable();
  if (reason.empty()) {
    try {
      auto runner = it->second.make(model.graph, model.precision);
      log().info("model '{}' runs on {}", model_name, runner->description());
      return runner;
    } catch (const Error& e) {
      reason = e.what();
    }
  }
  if (model.device == "auto") {
    log().warn("{}: model '{}': device auto: running on the CPU, CUDA is not usable: {}", model.device_where, model_name, reason);
    return make_cpu_runner(model.graph);
  }
  throw ConfigError(fmt::format("{}: model '{}': device cuda is not usable: {}", model.device_where, model_name, reason));
}

class InferStage final : public Stage {
 public:
  explicit InferStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    const ModelEntry& model = args.model("model");
    graph_ = model.graph;
    model_name_ = p.get<std::string>("model", "");
    if (graph_->inputs.size() != 1) {
      p.fail("model", fmt::format("has {} inputs; infer feeds models of one input", graph_->inputs.size()));
    }
    input_key_ = p.require<std::string>("input");
    input_where_ = p.origin().where(p.node("input"));
    consume(input_key_);
    max_batch_ = p.get<int>("max_batch", 1);
    timeout_ms_ = p.get<double>("timeout_ms", 5.0);
    if (max_batch_ < 1) p.fail("max_batch", "must be at least 1");
    if (timeout_ms_ < 0) p.fail("timeout_ms", "must be >= 0");
    const YAML::Node outs = p.node("outputs");
    if (outs && !outs.IsNull() && !outs.IsMap()) p.origin().fail(outs, fmt::format("stage '{}': outputs: expected a map from model output to tensor key", name()));
    std::set<std::string> named;
    for (const auto& out : graph_->outputs) {
      std::string key = out.name;
      if (outs && outs[out.name]) key = outs[out.name].as<std::string>();
      named.insert(out.name);
      output_keys_.push_back(key);
      TensorSpec spec;
      for (const auto& d : out.dims) spec.dims.push_back(d.value);
      if (!spec.dims.empty()) spec.dims[0] = -1;
      produce(key, spec);
    }
    if (outs && outs.IsMap()) {
      for (const auto& kv : outs) {
        if (!named.count(kv.first.as<std::string>())) {
          p.origin().fail(kv.first, fmt::format("stage '{}': the model has no output '{}'", name(), kv.first.as<std::string>()));
        }
      }
    }
    const Dim& batch = graph_->inputs[0].dims.empty() ? Dim{} : graph_->inputs[0].dims[0];
    fixed_batch_one_ = batch.known() && batch.value == 1;
    if (batch.known() && batch.value != 1) p.fail("model", fmt::format("input batch is fixed at {}; only 1 or dynamic are fed", batch.value));
    runner_ = make_runner(model, model_name_);
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);
    const TensorSpec& spec = available.at(input_key_);
    const ValueInfo& in = graph_->inputs[0];
    const auto cannot = [&](const std::string& why) {
      throw ConfigError(fmt::format("{}: stage '{}': tensor '{}' {} cannot feed input '{}' {} of model '{}': {}",
                                    input_where_, name(), input_key_, spec.description(), in.name, in.description(),
                                    model_name_, why));
    };
    if (in.dtype != DType::kF32) cannot("the model wants " + std::string(dtype_name(in.dtype)) + ", stages make float");
    if (in.has_shape && in.dims.size() != spec.dims.size()) cannot("rank differs");
    for (std::size_t i = 1; in.has_shape && i < in.dims.size(); ++i) {
      if (in.dims[i].known() && spec.dims[i] >= 0 && in.dims[i].value != spec.dims[i]) {
        cannot(fmt::format("dimension {} is {} here, {} in the model", i, spec.dims[i], in.dims[i].value));
      }
    }
  }

  int max_batch() const override { return max_batch_; }
  double batch_timeout_ms() const override { return timeout_ms_; }
  bool serial() const override { return true; }

 private:
  void do_process(std::span<Frame* const> frames) override {
    // Group frames whose item shapes agree (streams of different sizes cannot share a run).
    std::vector<Frame*> pending;
    for (Frame* f : frames) {
      auto it = f->tensors.find(input_key_);
      if (it == f->tensors.end() || !it->second.defined() || it->second.dim(0) == 0) continue;
      pending.push_back(f);
    }
    while (!pending.empty()) {
      const Shape item = item_shape(pending.front());
      std::vector<Frame*> group, rest;
      for (Frame* f : pending) (item_shape(f) == item ? group : rest).push_back(f);
      if (fixed_batch_one_) {
        for (Frame* f : group) run_group({f});
      } else {
        run_group(group);
      }
      pending.swap(rest);
    }
  }

  Shape item_shape(Frame* f) const {
    const Shape& s = f->tensors.at(input_key_).shape();
    return Shape(s.begin() + 1, s.end());
  }

  void run_group(const std::vector<Frame*>& group) {
    if (fixed_batch_one_ && group.size() == 1 && group[0]->tensors.at(input_key_).dim(0) > 1) {
      // A model of batch 1 fed K items: one run per item.
      Frame* f = group[0];
      const Tensor all = f->tensors.at(input_key_).contiguous();
      const std::int64_t k = all.dim(0);
      std::vector<std::vector<Tensor>> parts(output_keys_.size());
      for (std::int64_t i = 0; i < k; ++i) {
        auto outs = runner_->run({{graph_->inputs[0].name, slice_rows(all, i, 1, f->memory)}});
        for (std::size_t o = 0; o < outs.size(); ++o) parts[o].push_back(outs[o]);
      }
      for (std::size_t o = 0; o < parts.size(); ++o) f->tensors[output_keys_[o]] = concat_rows(parts[o], f->memory);
      return;
    }
    std::vector<Tensor> inputs;
    for (Frame* f : group) inputs.push_back(f->tensors.at(input_key_).contiguous());
    // The batch and the per-frame slices of the outputs come from the frames' pool.
    FrameMemory* memory = group.front()->memory;
    const Tensor batch = inputs.size() == 1 ? inputs[0] : concat_rows(inputs, memory);
    const auto outs = runner_->run({{graph_->inputs[0].name, batch}});
    std::int64_t row = 0;
    for (std::size_t i = 0; i < group.size(); ++i) {
      const std::int64_t k = inputs[i].dim(0);
      for (std::size_t o = 0; o < outs.size(); ++o) {
        if (outs[o].rank() == 0 || outs[o].dim(0) != batch.dim(0)) {
          throw Error(fmt::format("stage '{}': output '{}' is {}, expected {} rows (one per item)", name(),
                                  graph_->outputs[o].name, outs[o].description(), batch.dim(0)));
        }
        group[i]->tensors[output_keys_[o]] = group.size() == 1 ? outs[o] : slice_rows(outs[o].contiguous(), row, k, memory);
      }
      row += k;
    }
  }

  static Tensor slice_rows(const Tensor& t, std::int64_t first, std::int64_t count, FrameMemory* memory) {
    Shape shape = t.shape();
    const std::size_t row_bytes = t.nbytes() / static_cast<std::size_t>(shape[0]);
    shape[0] = count;
    Tensor out = frame_tensor(memory, t.dtype(), shape);
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + first * row_bytes, row_bytes * count);
    return out;
  }

  static Tensor concat_rows(const std::vector<Tensor>& parts, FrameMemory* memory) {
    Shape shape = parts.front().shape();
    shape[0] = 0;
    for (const auto& t : parts) shape[0] += t.dim(0);
    Tensor out = frame_tensor(memory, parts.front().dtype(), shape);
    char* dst = static_cast<char*>(out.raw_data());
    for (const auto& t : parts) {
      const Tensor c = t.contiguous();
      std::memcpy(dst, c.raw_data(), c.nbytes());
      dst += c.nbytes();
    }
    return out;
  }

  std::shared_ptr<const Graph> graph_;
  std::string model_name_;
  std::string input_key_, input_where_;
  std::vector<std::string> output_keys_;
  int max_batch_ = 1;
  double timeout_ms_ = 5;
  bool fixed_batch_one_ = false;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace

RW_REGISTER_STAGE("infer", InferStage);

}  // namespace redwood
