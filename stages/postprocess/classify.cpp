// classify stage: a classifier's output -> Classification{attribute, class_id, label, score}
// on the detections its rows were cut from (a crops stage's Frame::crop_parents), or on the
// frame (Frame::classes) when it classified the whole picture.
//
//   - name: expression      # also the attribute's default
//     type: classify
//     input: expr_logits    # [K, C] or [K, C, 1, 1]: logits or probabilities, a row per item
//     crops: face_crops     # the crops tensor whose rows these are (absent: the whole picture, 1 row)
//     labels: labels/expression.txt  # one class per line, in id order (absent: ids as text)
//     attribute: expression # what the result is about (default: the stage's name)
//     softmax: auto         # on, off; auto: unless every row already reads as probabilities
//     top_k: 1              # classes kept per row, best first
//     min_score: 0          # classes scoring below are dropped
//
// A frame whose crops tensor had no row gets no output from the infer stage: nothing to attach,
// and no error. Rows that do not match the crops (or a whole picture's 1), or a class count other
// than the labels', are errors naming the stage: at load where the shapes are known, else on the
// frame.

#include "stages/postprocess/classify.hpp"

#include "stages/postprocess/labels.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace redwood {

void softmax_in_place(std::span<float> row) {
  if (row.empty()) return;
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float& v : row) {
    v = std::exp(v - top);
    sum += v;
  }
  for (float& v : row) v = static_cast<float>(v / sum);
}

bool looks_like_probabilities(std::span<const float> row, float tolerance) {
  double sum = 0;
  for (float v : row) {
    if (!(v >= 0.f && v <= 1.f)) return false;  // NaN too
    sum += v;
  }
  return !row.empty() && std::abs(sum - 1.0) <= tolerance;
}

std::vector<std::pair<int, float>> top_classes(std::span<const float> row, int k, float min_score) {
  std::vector<int> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto keep = static_cast<std::size_t>(std::clamp(k, 0, static_cast<int>(row.size())));
  // Best first, the lower id of equal scores; a NaN score ranks last.
  const auto better = [&](int a, int b) {
    const float x = row[static_cast<std::size_t>(a)], y = row[static_cast<std::size_t>(b)];
    if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y) ? true : (std::isnan(x) == std::isnan(y) && a < b);
    return x > y || (x == y && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), better);
  std::vector<std::pair<int, float>> out;
  for (std::size_t i = 0; i < keep; ++i) {
    const float score = row[static_cast<std::size_t>(ids[i])];
    if (score >= min_score) out.emplace_back(ids[i], score);
  }
  return out;
}

namespace {

class ClassifyStage final : public Stage {
 public:
  explicit ClassifyStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    input_ = p.require<std::string>("input");
    consume(input_);
    crops_ = p.get<std::string>("crops", "");
    if (p.has("crops") && crops_.empty()) p.fail("crops", "expected the key of a crops stage's tensor");
    if (!crops_.empty()) consume(crops_);
    labels_ = read_labels(p, "labels");
    attribute_ = p.get<std::string>("attribute", args.name);
    if (attribute_.empty()) p.fail("attribute", "must not be empty");
    const auto softmax = p.choice("softmax", "auto", {"auto", "on", "off"});
    softmax_ = softmax == "on" ? Softmax::kOn : softmax == "off" ? Softmax::kOff : Softmax::kAuto;
    top_k_ = p.get<int>("top_k", 1);
    if (top_k_ < 1) p.fail("top_k", "must be at least 1");
    if (!labels_.empty() && static_cast<std::size_t>(top_k_) > labels_.size()) {
      p.fail("top_k", fmt::format("{} is more than the {} classes of the labels file", top_k_, labels_.size()));
    }
    min_score_ = p.get<float>("min_score", 0.f);
    if (!std::isfinite(min_score_)) p.fail("min_score", "must be a number");
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);
    const TensorSpec& spec = available.at(input_);
    const auto& d = spec.dims;
    const bool shape_ok = d.size() == 2 || (d.size() == 4 && d[2] <= 1 && d[3] <= 1 && d[2] != 0 && d[3] != 0);
    if (!shape_ok || spec.dtype != DType::kF32) {
      fail_config(fmt::format("input '{}' is {}; a classifier's output is float [K, classes] or [K, classes, 1, 1]", input_,
                              spec.description()));
    }
    if (d[1] >= 0 && !labels_.empty() && static_cast<std::size_t>(d[1]) != labels_.size()) {
      fail_config(fmt::format("input '{}' has {} classes but the labels file names {}", input_, d[1], labels_.size()));
    }
    if (d[1] >= 0 && top_k_ > d[1]) fail_config(fmt::format("top_k {} is more than the {} classes of input '{}'", top_k_, d[1], input_));
    if (crops_.empty() && d[0] > 1) {
      fail_config(fmt::format("input '{}' is {}: {} rows for one picture (name the crops tensor they come from in crops:)",
                              input_, spec.description(), d[0]));
    }
  }

 private:
  enum class Softmax { kAuto, kOn, kOff };

  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) classify(*f);
  }

  [[noreturn]] void fail_frame(const Frame& f, const std::string& message) const {
    throw InvalidArgument(fmt::format("stage '{}' (classify), stream '{}' frame {}: {}", name(), f.stream_name, f.seq, message));
  }

  void classify(Frame& f) const {
    const std::vector<int>* parents = nullptr;
    if (!crops_.empty()) {
      const auto it = f.crop_parents.find(crops_);
      if (it == f.crop_parents.end()) {
        fail_frame(f, fmt::format("no crop parents for '{}': crops: names the tensor of a crops stage", crops_));
      }
      parents = &it->second;
    }
    const auto it = f.tensors.find(input_);
    if (it == f.tensors.end() || !it->second.defined()) {
      if (parents != nullptr && parents->empty()) return;  // no crop, no output: nothing to classify
      fail_frame(f, fmt::format("no tensor '{}'", input_));
    }
    const Tensor& t = it->second;
    const Shape& s = t.shape();
    if (t.dtype() != DType::kF32 || !(s.size() == 2 || (s.size() == 4 && s[2] == 1 && s[3] == 1))) {
      fail_frame(f, fmt::format("tensor '{}' is {}; expected float [K, classes] or [K, classes, 1, 1]", input_,
                                t.description()));
    }
    const std::int64_t rows = s[0], classes = s[1];
    const std::int64_t expected = parents != nullptr ? static_cast<std::int64_t>(parents->size()) : 1;
    if (rows != expected) {
      fail_frame(f, parents != nullptr ? fmt::format("tensor '{}' has {} rows for the {} crops of '{}'", input_, rows, expected, crops_)
                                       : fmt::format("tensor '{}' has {} rows; a whole picture's has 1", input_, rows));
    }
    if (classes < 1) fail_frame(f, fmt::format("tensor '{}' has no class", input_));
    if (!labels_.empty() && static_cast<std::size_t>(classes) != labels_.size()) {
      fail_frame(f, fmt::format("tensor '{}' has {} classes but the labels file names {}", input_, classes, labels_.size()));
    }
    // A copy to turn into probabilities: the frame's tensor stays as the model wrote it.
    const Tensor c = t.is_contiguous() ? t : t.contiguous();
    scores_.assign(c.data<float>(), c.data<float>() + c.numel());
    const auto row = [&](std::int64_t r) {
      return std::span<float>(scores_.data() + r * classes, static_cast<std::size_t>(classes));
    };
    bool apply = softmax_ == Softmax::kOn;
    if (softmax_ == Softmax::kAuto) {
      for (std::int64_t r = 0; r < rows && !apply; ++r) apply = !looks_like_probabilities(row(r));
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      if (apply) softmax_in_place(row(r));
      std::vector<Classification>* into = &f.classes;
      if (parents != nullptr) {
        const int parent = (*parents)[static_cast<std::size_t>(r)];
        if (parent < 0 || static_cast<std::size_t>(parent) >= f.detections.size()) {
          fail_frame(f, fmt::format("crop {} of '{}' was cut from detection {}; the frame has {}", r, crops_, parent,
                                    f.detections.size()));
        }
        into = &f.detections[static_cast<std::size_t>(parent)].classes;
      }
      for (const auto& [id, score] : top_classes(row(r), top_k_, min_score_)) {
        into->push_back(Classification{attribute_, id, label_of(labels_, id), score});
      }
    }
  }

  std::string input_, crops_, attribute_;
  std::vector<std::string> labels_;
  Softmax softmax_ = Softmax::kAuto;
  int top_k_ = 1;
  float min_score_ = 0.f;
  static thread_local std::vector<float> scores_;
};

thread_local std::vector<float> ClassifyStage::scores_;

}  // namespace

RW_REGISTER_STAGE("classify", ClassifyStage);

}  // namespace redwood
