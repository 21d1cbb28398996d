// A video file read through OpenCV: frames on demand (never dropped), optionally looped. A file
// OpenCV cannot open fails at load; one with no readable frame fails the stream when read; one
// that stops before the frame count its header declares (truncated) ends there with a warning.
//
//   - name: cam0
//     type: video
//     path: ../assets/video/vtest.avi
//     start_frame: 0
//     loop: false

#include "core/error.hpp"
#include "core/log.hpp"
#include "stages/source/source.hpp"

#include <fmt/format.h>

#include <opencv2/videoio.hpp>

namespace redwood {
namespace {

class VideoSource final : public Source {
 public:
  explicit VideoSource(Params& p)
      : path_(p.existing_file("path")), loop_(p.get<bool>("loop", false)),
        start_frame_(p.get<int>("start_frame", 0)) {
    if (start_frame_ < 0) p.fail("start_frame", "must be >= 0");
    open();
    if (!capture_.isOpened()) p.fail("path", "OpenCV cannot open this video");
  }

  bool live() const override { return false; }
  double frame_rate() const override { return fps_; }
  bool rewind() override {
    open();
    frames_in_pass_ = 0;
    return capture_.isOpened();
  }

  ReadStatus read(cv::Mat& image, double& pts_ms, const std::atomic<bool>& stop) override {
    if (stop) return ReadStatus::kEnd;
    if (!capture_.read(image) || image.empty()) {
      if (frames_in_pass_ == 0) {
        // Opened but nothing decodes: zero frames, or corrupt from the start.
        throw IoError(fmt::format("video '{}': no readable frame{}", path_.string(),
                                  start_frame_ > 0 ? fmt::format(" from start_frame {}", start_frame_) : std::string()));
      }
      const double declared = capture_.get(cv::CAP_PROP_FRAME_COUNT);
      if (declared > 0 && start_frame_ + frames_in_pass_ < static_cast<std::int64_t>(declared) - 1) {
        // Not an error (what was read is processed), but the file is not what it claims to be.
        log().warn("video '{}': reading stopped after frame {} of the {:.0f} the file declares (truncated or corrupt)",
                   path_.string(), start_frame_ + frames_in_pass_, declared);
      }
      if (!loop_) return ReadStatus::kEnd;
      open();
      frames_in_pass_ = 0;
      if (!capture_.read(image) || image.empty()) return ReadStatus::kEnd;
    }
    ++frames_in_pass_;
    pts_ms = capture_.get(cv::CAP_PROP_POS_MSEC);
    return ReadStatus::kFrame;
  }

 private:
  void open() {
    capture_.open(path_.string());
    if (start_frame_ > 0) capture_.set(cv::CAP_PROP_POS_FRAMES, start_frame_);
    if (fps_ == 0 && capture_.isOpened()) fps_ = std::max(0.0, capture_.get(cv::CAP_PROP_FPS));
  }

  std::filesystem::path path_;
  bool loop_;
  int start_frame_;
  cv::VideoCapture capture_;
  double fps_ = 0;
  std::int64_t frames_in_pass_ = 0;
};

}  // namespace

RW_REGISTER_SOURCE("video", VideoSource);

}  // namespace redwood
