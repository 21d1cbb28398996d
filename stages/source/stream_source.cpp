// A network stream (rtsp://, http://, udp://...) through OpenCV's FFmpeg backend. A live source:
// when the pipeline falls behind, its oldest frames are dropped (and counted). A lost or refused
// connection is retried with exponential backoff (initial_backoff_ms doubling up to
// max_backoff_ms), each attempt logged and counted; max_reconnects > 0 ends the stream after that
// many reconnection attempts without a frame.
//
//   - name: door
//     type: stream
//     url: rtsp://192.168.1.20:554/stream1
//     initial_backoff_ms: 500
//     max_backoff_ms: 10000
//     max_reconnects: 0      # 0: forever

#include "core/log.hpp"
#include "stages/source/source.hpp"

#include <opencv2/videoio.hpp>

#include <thread>

namespace redwood {
namespace {

class StreamSource final : public Source {
 public:
  explicit StreamSource(Params& p)
      : url_(p.require<std::string>("url")), initial_ms_(p.get<int>("initial_backoff_ms", 500)),
        max_ms_(p.get<int>("max_backoff_ms", 10000)), max_reconnects_(p.get<int>("max_reconnects", 0)) {
    if (url_.find("://") == std::string::npos) p.fail("url", "expected a URL such as rtsp://host/path");
    if (initial_ms_ <= 0 || max_ms_ < initial_ms_) p.fail("max_backoff_ms", "need 0 < initial_backoff_ms <= max_backoff_ms");
    if (max_reconnects_ < 0) p.fail("max_reconnects", "must be >= 0 (0: forever)");
    backoff_ms_ = initial_ms_;
  }

  bool live() const override { return true; }
  std::int64_t reconnects() const override { return reconnects_.load(); }

  ReadStatus read(cv::Mat& image, double& pts_ms, const std::atomic<bool>& stop) override {
    while (!stop) {
      if (capture_.isOpened() && capture_.read(image) && !image.empty()) {
        // A frame: the connection is good again, so the next loss starts the backoff afresh.
        retries_ = 0;
        backoff_ms_ = initial_ms_;
        pts_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
        return ReadStatus::kFrame;
      }
      if (tried_) {
        if (max_reconnects_ > 0 && retries_ >= max_reconnects_) {
          log().error("stream {}: giving up after {} reconnection attempt(s)", url_, retries_);
          return ReadStatus::kEnd;
        }
        ++retries_;
        ++reconnects_;
        log().warn("stream {}: {}; reconnecting in {} ms (attempt {})", url_,
                   capture_.isOpened() ? "the stream broke off" : "cannot connect", backoff_ms_, retries_);
        // Sleep in small steps so that a stop request is honoured promptly.
        for (int waited = 0; waited < backoff_ms_ && !stop; waited += 10) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, backoff_ms_ - waited)));
        }
        backoff_ms_ = std::min(backoff_ms_ * 2, max_ms_);
      }
      tried_ = true;
      capture_.release();
      if (stop) break;
      if (capture_.open(url_, cv::CAP_FFMPEG) && retries_ > 0) log().info("stream {}: connected again", url_);
    }
    return ReadStatus::kEnd;
  }

 private:
  std::string url_;
  int initial_ms_, max_ms_, max_reconnects_;
  cv::VideoCapture capture_;
  bool tried_ = false;  // the first open is not a reconnection
  int retries_ = 0;     // reconnection attempts since the last good frame
  int backoff_ms_ = 0;
  std::atomic<std::int64_t> reconnects_{0};
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

RW_REGISTER_SOURCE("stream", StreamSource);

}  // namespace redwood
