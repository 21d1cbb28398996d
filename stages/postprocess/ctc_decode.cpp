// ctc_decode stage: recognizer output [K, T, classes] -> text of the frame's K text detections
// (one row each, in order, as text_crops made them).
//
//   - name: rec_post
//     type: ctc_decode
//     input: rec_prob
//     dictionary: ../assets/models/ppocr_keys_v1.txt
//     min_score: 0.5       # recognitions below are dropped (text stays empty)

#include "stages/postprocess/ctc_decode.hpp"

#include "core/error.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>
#include <opencv2/core.hpp>

#include <fstream>

namespace redwood {

CtcDictionary::CtcDictionary(const std::filesystem::path& file) {
  std::ifstream in(file);
  RW_EXPECTS(in, IoError, "{}: cannot read the dictionary", file.string());
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    chars_.push_back(line);
  }
  RW_EXPECTS(!chars_.empty(), IoError, "{}: the dictionary is empty", file.string());
}

CtcResult CtcDictionary::decode(const float* probs, std::size_t steps, std::size_t classes) const {
  CtcResult r;
  std::size_t previous = 0;
  double sum = 0;
  int kept = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    const float* row = probs + t * classes;
    // The best class of the step: OpenCV's minMaxLoc picks AVX2 at run time, about 2.5x the
    // scalar loop over PP-OCR's 6,625 classes (the first of equal maxima either way).
    cv::Point best_at;
    cv::minMaxLoc(cv::Mat(1, static_cast<int>(classes), CV_32F, const_cast<float*>(row)), nullptr, nullptr, nullptr,
                  &best_at);
    const auto best = static_cast<std::size_t>(best_at.x);
    if (best != 0 && best != previous) {
      r.text += best <= chars_.size() ? chars_[best - 1] : std::string(" ");
      sum += row[best];
      ++kept;
    }
    previous = best;
  }
  r.score = kept ? static_cast<float>(sum / kept) : 0.f;
  return r;
}

namespace {

class CtcDecodeStage final : public Stage {
 public:
  explicit CtcDecodeStage(StageArgs& args) : Stage(args.name), dictionary_(load(args.params)) {
    Params& p = args.params;
    remember_place(p);
    input_ = p.require<std::string>("input");
    min_score_ = p.get<float>("min_score", 0.5f);
    consume(input_);
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);
    const auto& dims = available.at(input_).dims;
    if (dims.size() != 3) fail_config(fmt::format("input '{}' is {}; CTC reads [K, steps, classes]", input_, available.at(input_).description()));
    if (dims[2] >= 0 && static_cast<std::size_t>(dims[2]) != dictionary_.classes()) {
      fail_config(fmt::format("input '{}' has {} classes but the dictionary makes {} (blank + {} characters + space)",
                              input_, dims[2], dictionary_.classes(), dictionary_.classes() - 2));
    }
  }

 private:
  static CtcDictionary load(Params& p) { return CtcDictionary(p.existing_file("dictionary")); }

  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      auto it = f->tensors.find(input_);
      if (it == f->tensors.end() || !it->second.defined()) continue;
      const Tensor probs = it->second.contiguous();
      const auto steps = static_cast<std::size_t>(probs.dim(1)), classes = static_cast<std::size_t>(probs.dim(2));
      std::int64_t row = 0;
      for (Detection& d : f->detections) {
        if (d.kind != "text" || d.quad.size() != 4 || row >= probs.dim(0)) continue;
        const CtcResult r = dictionary_.decode(probs.data<float>() + row * steps * classes, steps, classes);
        ++row;
        if (r.score >= min_score_) {
          d.text = r.text;
          d.text_score = r.score;
        }
      }
    }
  }

  CtcDictionary dictionary_;
  std::string input_;
  float min_score_ = 0.5f;
};

}  // namespace

RW_REGISTER_STAGE("ctc_decode", CtcDecodeStage);

}  // namespace redwood
