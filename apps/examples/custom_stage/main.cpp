// An application built on an installed Redwood (find_package(Redwood), see CMakeLists.txt here):
// it defines a stage of its own, registers it by type name as Redwood's own stages do, and runs
// a pipeline file that uses it between Redwood's sources and sinks.
//
//   custom_stage PIPELINE.yaml [KEY=VALUE ...]      (KEY=VALUE as the launcher's --set)
//
// The stage, `mean_brightness`, writes each frame's mean 8-bit value under the tensor key it is
// given (`output`, default "brightness"); at the end the program prints how many frames went
// through and their mean, then Redwood's run summary. A mistake in the file (an unknown key, a
// stage type nobody registered) is reported with its file, line and column, and exit code 1.

#include "pipelines/config.hpp"
#include "pipelines/pipeline.hpp"
#include "redwood/config.hpp"
#include "stages/picture_cv.hpp"
#include "stages/stage.hpp"

#include <opencv2/core.hpp>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::atomic<long> g_frames{0};
std::mutex g_mutex;
double g_sum = 0;

class MeanBrightness final : public redwood::Stage {
 public:
  explicit MeanBrightness(redwood::StageArgs& args)
      : Stage(args.name), output_(args.params.get<std::string>("output", "brightness")) {
    remember_place(args.params);
    produce(output_, redwood::TensorSpec{{1}});
  }

 private:
  void do_process(std::span<redwood::Frame* const> frames) override {
    for (redwood::Frame* frame : frames) {
      const cv::Scalar mean = cv::mean(redwood::as_mat(frame->image));  // a view of the frame's pixels, not a copy
      const double value = (mean[0] + mean[1] + mean[2]) / 3.0;
      frame->tensors[output_] = redwood::Tensor::from_vector<float>({1}, {static_cast<float>(value)});
      ++g_frames;
      std::lock_guard lock(g_mutex);
      g_sum += value;
    }
  }

  std::string output_;
};

}  // namespace

RW_REGISTER_STAGE("mean_brightness", MeanBrightness);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PIPELINE.yaml [KEY=VALUE ...]\n", argv[0]);
    return 2;
  }
  try {
    const std::vector<std::string> overrides(argv + 2, argv + argc);
    redwood::Pipeline pipeline(redwood::load_pipeline_file(argv[1], overrides));
    const redwood::PipelineStats stats = pipeline.run();
    const long frames = g_frames.load();
    std::printf("custom_stage (Redwood %s): %ld frames through mean_brightness, mean %.1f\n", REDWOOD_VERSION, frames,
                frames > 0 ? g_sum / static_cast<double>(frames) : 0.0);
    std::printf("%s", redwood::summary_text(stats).c_str());
    return 0;
  } catch (const redwood::Error& e) {
    std::fprintf(stderr, "custom_stage: %s\n", e.what());
    return 1;
  }
}
