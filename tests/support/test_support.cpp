#include "support/test_support.hpp"

#include "core/log.hpp"
#include "runtime/executor.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <future>

#include <cmath>
#include <numeric>
#include <sstream>
#include <cstdio>
#include <sys/wait.h>
#include <cstdlib>
#include <random>

namespace redwood::testing {

Tensor f32(Shape shape, std::vector<float> values) { return Tensor::from_vector<float>(std::move(shape), values); }

Tensor i64(std::vector<std::int64_t> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return Tensor::from_vector<std::int64_t>({n}, values);
}

Tensor i64(Shape shape, std::vector<std::int64_t> values) {
  return Tensor::from_vector<std::int64_t>(std::move(shape), values);
}

Tensor iota_f32(Shape shape, float start) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), start);
  return Tensor::from_vector<float>(std::move(shape), v);
}


Tensor random_tensor(DType dtype, Shape shape, double lo, double hi, std::uint32_t seed) {
  Tensor f = Tensor::empty(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  const bool integral = !is_floating(dtype);
  for (float& v : f.values<float>()) {
    const double x = dist(rng);
    v = static_cast<float>(integral ? std::round(x) : x);
  }
  return dtype == DType::kF32 ? f : f.cast(dtype);
}

NodeSpec make_spec(std::string op_type, std::vector<Tensor> inputs,
                   std::map<std::string, AttributeValue> attributes, std::size_t num_outputs) {
  NodeSpec spec;
  spec.op_type = std::move(op_type);
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attributes);
  spec.num_outputs = num_outputs;
  return spec;
}

std::shared_ptr<Graph> make_x_to_y_graph(std::string name) {
  auto graph = std::make_shared<Graph>();
  graph->name = std::move(name);
  graph->opset = 17;
  ValueInfo x;
  x.name = "x";
  x.dtype = DType::kF32;
  graph->inputs = {x};
  ValueInfo y = x;
  y.name = "y";
  graph->outputs = {y};
  return graph;
}

ValueInfo batched_nchw(std::string name, std::int64_t c, std::int64_t h, std::int64_t w) {
  ValueInfo v;
  v.name = std::move(name);
  v.dtype = DType::kF32;
  v.has_shape = true;
  v.dims = {{-1, "N"}, {c, ""}, {h, ""}, {w, ""}};
  return v;
}

ScopedEnv::ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
  if (const char* v = std::getenv(name_.c_str()); v != nullptr) {
    had_ = true;
    before_ = v;
  }
  set(value);
}

ScopedEnv::~ScopedEnv() { set(had_ ? before_.c_str() : nullptr); }

void ScopedEnv::set(const char* value) const {
  if (value != nullptr) {
    setenv(name_.c_str(), value, 1);
  } else {
    unsetenv(name_.c_str());
  }
}

Node make_node(std::string name, std::string op_type, std::vector<std::string> inputs,
               std::vector<std::string> outputs) {
  Node n;
  n.name = std::move(name);
  n.op_type = std::move(op_type);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

struct LogCapture::Sink {
  std::ostringstream text;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
};

LogCapture::LogCapture() : sink_(std::make_unique<Sink>()) { log().sinks().push_back(sink_->sink); }

LogCapture::~LogCapture() { std::erase(log().sinks(), sink_->sink); }

std::string LogCapture::text() const {
  sink_->sink->flush();
  return sink_->text.str();
}

std::vector<Tensor> run_node(const NodeSpec& spec) {
  auto graph = std::make_shared<Graph>();
  graph->name = "test_" + spec.op_type;
  graph->opset = spec.opset;
  Node node;
  node.name = spec.op_type + "_0";
  node.op_type = spec.op_type;
  node.attributes = spec.attributes;
  std::map<std::string, Tensor> feeds;
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    const Tensor& t = spec.inputs[i];
    if (!t.defined()) {
      node.inputs.push_back("");
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    node.inputs.push_back(name);
    ValueInfo vi{name, t.dtype(), dtype_to_onnx(t.dtype()), true, {}};
    for (auto d : t.shape()) vi.dims.push_back(Dim{d, {}});
    graph->value_info[name] = vi;
    if (i < spec.constant.size() && spec.constant[i]) {
      graph->initializers[name] = t;
    } else {
      graph->inputs.push_back(vi);
      feeds[name] = t;
    }
  }
  for (std::size_t o = 0; o < spec.num_outputs; ++o) {
    const std::string name = "out" + std::to_string(o);
    node.outputs.push_back(name);
    graph->outputs.push_back(ValueInfo{name, DType::kUndefined, 0, false, {}});
  }
  graph->nodes.push_back(std::move(node));
  // The kernel itself: an fp16/bf16 node runs (or is refused) as declared, not in fp32.
  ExecutorOptions options;
  options.compute_in_fp32 = false;
  Executor exec(graph, options);
  return exec.run(feeds);
}

void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(shape_str(actual.shape()), shape_str(expected.shape()));
  std::int64_t worst = -1;
  double worst_excess = 0;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < expected.numel(); ++i) {
    const double a = actual.get_as_double(i);
    const double e = expected.get_as_double(i);
    if (std::isnan(e) && std::isnan(a)) continue;
    const double excess = std::abs(a - e) - (atol + rtol * std::abs(e));
    if (excess > 0 || std::isnan(a) != std::isnan(e)) {
      ++bad;
      if (worst < 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
    }
  }
  if (bad > 0) {
    ADD_FAILURE() << bad << " of " << expected.numel() << " elements differ; worst at flat index "
                  << worst << ": actual " << actual.get_as_double(worst) << ", expected "
                  << expected.get_as_double(worst) << " (rtol " << rtol << ", atol " << atol << ")";
  }
}

LauncherResult run_command(const std::string& command) {
  LauncherResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

LauncherResult run_launcher(const std::string& args) {
#ifdef REDWOOD_BINARY
  return run_command(std::string(REDWOOD_BINARY) + " " + args);
#else
  return run_command("redwood " + args);
#endif
}

std::filesystem::path assets_dir() {
  if (const char* env = std::getenv("REDWOOD_ASSETS")) return env;
#ifdef REDWOOD_ASSETS_DIR
  return REDWOOD_ASSETS_DIR;
#else
  return "assets";
#endif
}

double relative_l2(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape()) return INFINITY;
  const Tensor a = actual.cast(DType::kF32).contiguous(), e = expected.cast(DType::kF32).contiguous();
  double num = 0, den = 0;
  const float* ap = a.data<float>();
  const float* ep = e.data<float>();
  for (std::int64_t i = 0; i < e.numel(); ++i) {
    if (std::isnan(ap[i]) || std::isnan(ep[i])) return INFINITY;
    num += (double(ap[i]) - ep[i]) * (double(ap[i]) - ep[i]);
    den += double(ep[i]) * ep[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

InferResult run_batch(ModelRunner& runner, InferBatch batch) {
  std::promise<InferResult> promise;
  auto future = promise.get_future();
  runner.submit(std::move(batch), [&promise](InferResult& r) { promise.set_value(std::move(r)); });
  return future.get();
}

Tensor run_one(ModelRunner& runner, const Tensor& x) {
  InferBatch batch;
  batch.inputs = {{x}};
  InferResult r = run_batch(runner, std::move(batch));
  if (r.error) std::rethrow_exception(r.error);
  return r.outputs[0][0];
}

}  // namespace redwood::testing
