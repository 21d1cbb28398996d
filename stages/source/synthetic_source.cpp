// A synthetic pattern for tests and demos: a moving gradient with the frame number drawn on it.
// With fps > 0 it paces itself; live: true makes it behave like a camera (the pipeline drops
// its oldest frames when it falls behind) — the way tests exercise drop counting.
//
//   - name: test
//     type: synthetic
//     width: 320
//     height: 240
//     frames: 100     # 0: endless
//     fps: 0          # 0: as fast as the pipeline takes them
//     live: false

#include "stages/frame_memory.hpp"
#include "stages/picture_cv.hpp"
#include "stages/source/source.hpp"

#include <opencv2/imgproc.hpp>

#include <thread>

namespace redwood {
namespace {

class SyntheticSource final : public Source {
 public:
  explicit SyntheticSource(Params& p)
      : width_(p.get<int>("width", 320)), height_(p.get<int>("height", 240)),
        frames_(p.get<std::int64_t>("frames", 100)), fps_(p.get<double>("fps", 0.0)),
        live_(p.get<bool>("live", false)) {
    if (width_ < 8 || height_ < 8) p.fail(p.has("width") ? "width" : "height", "must be at least 8");
    if (frames_ < 0) p.fail("frames", "must be >= 0 (0: endless)");
    if (fps_ < 0) p.fail("fps", "must be >= 0");
    if (live_ && fps_ <= 0) p.fail("live", "a live synthetic source needs fps > 0");
  }

  bool live() const override { return live_; }
  double frame_rate() const override { return fps_; }
  bool rewind() override {
    next_ = 0;
    start_ = std::chrono::steady_clock::now();
    return true;
  }

  ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>& stop) override {
    if (stop || (frames_ > 0 && next_ >= frames_)) return ReadStatus::kEnd;
    if (fps_ > 0) {
      const auto due = start_ + std::chrono::duration<double>(static_cast<double>(next_) / fps_);
      std::this_thread::sleep_until(std::chrono::time_point_cast<std::chrono::steady_clock::duration>(due));
    }
    image = frame_picture(memory, width_, height_, 3);
    cv::Mat bgr = as_mat(image);
    for (int y = 0; y < height_; ++y) {
      auto* row = bgr.ptr<cv::Vec3b>(y);
      for (int x = 0; x < width_; ++x) {
        row[x] = cv::Vec3b(static_cast<uchar>((x + next_) & 255), static_cast<uchar>(y & 255),
                           static_cast<uchar>((x + y) & 255));
      }
    }
    cv::putText(bgr, std::to_string(next_), {8, height_ / 2}, cv::FONT_HERSHEY_SIMPLEX, 1.0, {255, 255, 255}, 2);
    pts_ms = fps_ > 0 ? 1000.0 * static_cast<double>(next_) / fps_ : static_cast<double>(next_);
    ++next_;
    return ReadStatus::kFrame;
  }

 private:
  int width_, height_;
  std::int64_t frames_;
  double fps_;
  bool live_;
  std::int64_t next_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

RW_REGISTER_SOURCE("synthetic", SyntheticSource);

}  // namespace redwood
