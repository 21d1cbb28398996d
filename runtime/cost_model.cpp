#include "runtime/cost_model.hpp"

#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/log.hpp"
#include "core/model_runner.hpp"
#include "core/ops/names.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace redwood::runtime {
namespace {

double numel(const TensorDesc& d) { return d.defined() ? static_cast<double>(shape_numel(d.shape)) : 0.0; }
double nbytes(const TensorDesc& d) { return d.defined() ? numel(d) * static_cast<double>(dtype_size(d.dtype)) : 0.0; }

double product(const std::vector<std::int64_t>& v) {
  double p = 1;
  for (auto x : v) p *= static_cast<double>(x);
  return p;
}

bool is_conv(const std::string& op) { return op == "Conv" || op.rfind("rw.Conv", 0) == 0; }

std::string describe(const std::vector<TensorDesc>& descs) {
  std::string out;
  for (const TensorDesc& d : descs) {
    if (!out.empty()) out += ",";
    out += d.defined() ? fmt::format("{}{}", dtype_name(d.dtype), shape_str(d.shape)) : "-";
  }
  return out;
}

constexpr std::size_t kSamplesKept = 16;
constexpr int kHistoryFormat = 1;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

NodeWork node_work(const Node& node, const std::vector<TensorDesc>& inputs, const std::vector<TensorDesc>& outputs) {
  NodeWork w;
  for (const TensorDesc& d : inputs) w.bytes += nbytes(d);
  for (const TensorDesc& d : outputs) w.bytes += nbytes(d);
  const double out = outputs.empty() ? 0.0 : numel(outputs[0]);
  auto in = [&](std::size_t i) -> const TensorDesc* {
    return i < inputs.size() && inputs[i].defined() ? &inputs[i] : nullptr;
  };
  const std::string& op = node.op_type;
  if (is_conv(op) && in(1) != nullptr && !in(1)->shape.empty()) {
    // Each output value sums C/group x R x S products: the weight's size over its K filters.
    const double k = static_cast<double>(in(1)->shape[0]);
    w.flops = 2.0 * out * (k > 0 ? numel(*in(1)) / k : 0.0);
  } else if (op == "ConvTranspose" && in(0) != nullptr && in(1) != nullptr && !in(1)->shape.empty()) {
    // Each input value scatters into K/group x R x S outputs.
    const double c = static_cast<double>(in(1)->shape[0]);
    w.flops = 2.0 * numel(*in(0)) * (c > 0 ? numel(*in(1)) / c : 0.0);
  } else if ((op == "MatMul" || op == "Gemm") && in(0) != nullptr && !in(0)->shape.empty()) {
    const Shape& a = in(0)->shape;
    const bool trans_a = op == "Gemm" && node.attr_int("transA", 0) != 0;
    const double k = static_cast<double>(a.size() >= 2 && trans_a ? a[a.size() - 2] : a.back());
    w.flops = 2.0 * out * k;
  } else if (op == "MaxPool" || op == "AveragePool") {
    w.flops = out * product(node.attr_ints("kernel_shape", {1}));
  } else {
    // Elementwise, reductions, normalizations, data movement: about one operation per value
    // read or written; memory bandwidth is what bounds them.
    double values = out;
    for (const TensorDesc& d : inputs) values = std::max(values, d.host != nullptr ? 0.0 : numel(d));
    w.flops = values;
  }
  return w;
}

std::string CostHistory::key(const DeviceProfile& device, const std::string& precision, const Node& node,
                             const std::vector<TensorDesc>& inputs, const std::vector<TensorDesc>& outputs) {
  std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  if (node.has_attr(ops::attr::kActivation)) {
    // Appended in two steps: `"+" + string` inlined into `op +=` trips GCC 12's -Wrestrict (a
    // false positive, GCC bug 105329) in Release builds.
    op += '+';
    op += node.attr_string(ops::attr::kActivation, "");
  }
  return fmt::format("{} {}|{}|{}|{}->{}", device.device, device.name, precision, op, describe(inputs),
                     describe(outputs));
}

std::string CostHistory::segment_key(const DeviceProfile& device) {
  return fmt::format("{} {}|segment", device.device, device.name);
}

std::string CostHistory::handover_key(const DeviceProfile& host) {
  return fmt::format("{} {}|handover", host.device, host.name);
}

std::string CostHistory::pipeline_handover_key(const DeviceProfile& host) {
  return fmt::format("ran {} {}|handover in a pipeline", host.device, host.name);
}

std::string CostHistory::cut_key(const DeviceProfile& device, const std::string& precision,
                                 const std::vector<std::string>& node_keys) {
  std::string text;
  for (const auto& k : node_keys) text += k + '\n';
  return fmt::format("cut {} {}|{}|{}|{} nodes", device.device, device.name, precision, hash_hex(xxh64(text.data(), text.size())),
                     node_keys.size());
}

std::string CostHistory::model_key(std::uint64_t graph_hash, const std::string& device, const std::string& precision,
                                   const std::vector<TensorDesc>& inputs) {
  return fmt::format("model {}|{}|{}|{}", hash_hex(graph_hash), device, precision, describe(inputs));
}

std::string CostHistory::segment_rows_key(const std::string& cut_key, std::int64_t rows) {
  return fmt::format("ran {}|{} rows", cut_key, rows);
}

std::map<std::int64_t, double> CostHistory::segment_rows_times(const std::string& cut_key) const {
  const std::string prefix = fmt::format("ran {}|", cut_key);
  std::map<std::int64_t, double> out;
  for (const auto& [key, ms] : entries(prefix)) {
    std::int64_t rows = 0;
    try {
      rows = std::stoll(key.substr(prefix.size()));
    } catch (const std::exception&) {
      continue;
    }
    if (rows > 0 && key == segment_rows_key(cut_key, rows)) out[rows] = ms;
  }
  return out;
}

std::map<std::int64_t, double> CostHistory::model_times(std::uint64_t graph_hash, const std::string& device,
                                                        const std::string& precision, const std::vector<TensorDesc>& inputs,
                                                        std::int64_t batch_rows) const {
  // A key's rows are dim 0 of the first input that carries the batch; the key at those rows is
  // made again and compared whole, so that other shapes never match.
  std::size_t batch_input = 0;  // among the defined inputs (each described with one '[')
  bool found = false;
  for (const TensorDesc& d : inputs) {
    if (!d.defined()) continue;
    if (!d.shape.empty() && d.shape[0] == batch_rows) {
      found = true;
      break;
    }
    ++batch_input;
  }
  std::map<std::int64_t, double> out;
  if (!found) return out;
  const std::string prefix = fmt::format("model {}|{}|{}|", hash_hex(graph_hash), device, precision);
  std::lock_guard lock(mutex_);
  for (auto it = samples_.lower_bound(prefix); it != samples_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    std::size_t at = prefix.size();
    for (std::size_t k = 0; k <= batch_input && at != std::string::npos; ++k) at = it->first.find('[', at + (k > 0 ? 1 : 0));
    if (at == std::string::npos || it->second.empty()) continue;
    std::int64_t rows = 0;
    try {
      rows = std::stoll(it->first.substr(at + 1));
    } catch (const std::exception&) {
      continue;
    }
    if (rows <= 0) continue;
    std::vector<TensorDesc> at_rows = inputs;
    for (TensorDesc& d : at_rows) {
      if (d.defined() && !d.shape.empty() && d.shape[0] == batch_rows) d.shape[0] = rows;
    }
    if (it->first == model_key(graph_hash, device, precision, at_rows)) out[rows] = median(it->second);
  }
  return out;
}

std::uint64_t CostHistory::node_entries_hash() const {
  std::lock_guard lock(mutex_);
  std::string text;
  for (const auto& [k, v] : samples_) {
    if (k.rfind("model ", 0) == 0 || k.rfind("ran ", 0) == 0) continue;  // a run's: every run adds samples
    text += k;
    for (double x : v) text += fmt::format(" {}", x);
    text += '\n';
  }
  return text.empty() ? 0 : xxh64(text.data(), text.size());
}

std::optional<double> CostHistory::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto it = samples_.find(key);
  if (it == samples_.end() || it->second.empty()) return std::nullopt;
  return median(it->second);
}

void CostHistory::record(const std::string& key, double ms) {
  std::lock_guard lock(mutex_);
  auto& v = samples_[key];
  if (v.size() == kSamplesKept) v.erase(v.begin());  // the oldest goes: a history follows the machine
  v.push_back(ms);
}

std::size_t CostHistory::size() const {
  std::lock_guard lock(mutex_);
  return samples_.size();
}

std::map<std::string, double> CostHistory::entries() const { return entries(""); }

std::map<std::string, double> CostHistory::entries(const std::string& prefix) const {
  std::lock_guard lock(mutex_);
  std::map<std::string, double> out;
  for (auto it = samples_.lower_bound(prefix); it != samples_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (!it->second.empty()) out[it->first] = median(it->second);
  }
  return out;
}

void CostHistory::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return;
  std::map<std::string, std::vector<double>> loaded;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    RW_EXPECTS(j.at("format").get<int>() == kHistoryFormat, InvalidArgument, "format {} (this Redwood reads {})",
               j.at("format").dump(), kHistoryFormat);
    for (const auto& [k, v] : j.at("entries").items()) {
      std::vector<double> samples = v.get<std::vector<double>>();
      RW_EXPECTS(!samples.empty() && samples.size() <= kSamplesKept, InvalidArgument, "entry '{}': {} samples", k,
                 samples.size());
      for (double s : samples) RW_EXPECTS(s >= 0 && s < 1e7, InvalidArgument, "entry '{}': sample {}", k, s);
      loaded[k] = std::move(samples);
    }
  } catch (const std::exception& e) {
    log().warn("{}: ignoring the cost history, it is not valid: {}", path, e.what());
    return;
  }
  std::lock_guard lock(mutex_);
  for (auto& [k, v] : loaded) samples_[k] = std::move(v);
}

void CostHistory::save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = kHistoryFormat;
  j["entries"] = nlohmann::json::object();
  {
    std::lock_guard lock(mutex_);
    for (const auto& [k, v] : samples_) j["entries"][k] = v;
  }
  write_file_atomically(path, j.dump(1));
}

std::string CostHistory::default_path() { return (cache_dir() / "history" / "costs.json").string(); }

std::string cost_precision(int device, const std::string& precision,
                           const std::map<std::string, std::string>& device_options) {
  if (device == 0) return "fp32";
  const auto changes_costs = [](const std::string& option) {
    for (const auto& [kind, factory] : device_runner_registry()) {
      if (factory.option_changes_costs && !factory.option_changes_costs(option)) return false;
    }
    return true;
  };
  std::string out = precision;
  for (const auto& [name, value] : device_options) {
    if (changes_costs(name)) out += fmt::format(" {}={}", name, value);
  }
  return out;
}

CostModel::CostModel(std::vector<DeviceProfile> profiles, std::string precision, const CostHistory* history,
                     const std::map<std::string, std::string>& device_options)
    : profiles_(std::move(profiles)),
      precision_(std::move(precision)),
      history_(history),
      scale_(profiles_.size(), 1.0) {
  RW_EXPECTS(!profiles_.empty(), InvalidArgument, "CostModel: no device");
  for (std::size_t d = 0; d < profiles_.size(); ++d) {
    key_precision_.push_back(cost_precision(static_cast<int>(d), precision_, device_options));
  }
}

std::string CostModel::device_precision(int device) const { return cost_precision(device, precision_); }

double CostModel::roofline_ms(int device, const NodeWork& work) const {
  const DeviceProfile& p = profiles_[static_cast<std::size_t>(device)];
  auto rate = p.peak_gflops.find(device_precision(device));
  if (rate == p.peak_gflops.end()) rate = p.peak_gflops.find("fp32");
  const double gflops = rate != p.peak_gflops.end() && rate->second > 0 ? rate->second : 1.0;
  const double gbps = p.memory_gbps > 0 ? p.memory_gbps : 1.0;
  // GFLOP/s and GB/s are 1e6 operations or bytes per millisecond.
  return p.launch_ms + std::max(work.flops / (gflops * 1e6), work.bytes / (gbps * 1e6));
}

CostEstimate CostModel::node_ms(int device, const Node& node, const std::vector<TensorDesc>& inputs,
                                const std::vector<TensorDesc>& outputs) const {
  if (history_ != nullptr) {
    const DeviceProfile& p = profiles_[static_cast<std::size_t>(device)];
    const std::string& precision = key_precision_[static_cast<std::size_t>(device)];
    if (auto ms = history_->find(CostHistory::key(p, precision, node, inputs, outputs))) {
      return {*ms, true};
    }
  }
  return {roofline_ms(device, node_work(node, inputs, outputs)) * scale_[static_cast<std::size_t>(device)], false};
}

void CostModel::calibrate(const std::vector<std::tuple<int, double, double>>& samples) {
  for (std::size_t d = 0; d < profiles_.size(); ++d) {
    std::vector<double> ratios;
    for (const auto& [device, roofline, measured] : samples) {
      if (static_cast<std::size_t>(device) == d && roofline > 0 && measured > 0) ratios.push_back(measured / roofline);
    }
    scale_[d] = ratios.empty() ? 1.0 : median(ratios);
  }
}

PlacementProblem::Link CostModel::link(int a, int b) const {
  // A hop between the host and accelerator x, in either direction.
  auto hop = [&](int x, bool to_device) {
    const DeviceProfile& p = profiles_[static_cast<std::size_t>(x)];
    const double pinned = to_device ? p.h2d_pinned_gbps : p.d2h_pinned_gbps;
    const double gbps = pinned > 0 ? pinned : to_device ? p.h2d_pageable_gbps : p.d2h_pageable_gbps;
    return PlacementProblem::Link{gbps > 0 ? gbps : 1.0, p.copy_latency_ms};
  };
  if (a == 0) return hop(b, true);
  if (b == 0) return hop(a, false);
  const auto up = hop(a, false), down = hop(b, true);
  return {std::min(up.gbps, down.gbps), up.latency_ms + down.latency_ms};
}

}  // namespace redwood::runtime
