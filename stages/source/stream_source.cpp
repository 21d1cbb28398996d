// A network stream (rtsp://, http://, tcp://, udp://...) through OpenCV's FFmpeg backend. A live
// source: when the pipeline falls behind, its oldest frames are dropped (and counted). A lost or
// refused connection is retried with exponential backoff (initial_backoff_ms doubling up to
// max_backoff_ms), each attempt logged and counted; when frames flow again the log says how long
// the outage lasted, and the statistics sum it (outage_ms). max_reconnects > 0 gives up after
// that many attempts in a row without a frame: the stream then fails with an error naming the
// URL (the pipeline drains what it read and exits non-zero). A server that accepts but never
// sends is caught by open_timeout_ms and read_timeout_ms. Opening runs on a thread of its own, so
// that a stop (Ctrl-C) never waits for an open that hangs until open_timeout_ms; a read that
// stalls holds a stop up to read_timeout_ms.
//
//   - name: door
//     type: stream
//     url: rtsp://192.168.1.20:554/stream1
//     initial_backoff_ms: 500
//     max_backoff_ms: 10000
//     max_reconnects: 0      # 0: forever
//     open_timeout_ms: 10000
//     read_timeout_ms: 5000

#include "core/error.hpp"
#include "core/log.hpp"
#include "stages/frame_memory.hpp"
#include "stages/picture_cv.hpp"
#include "stages/source/source.hpp"

#include <fmt/format.h>
#include <opencv2/videoio.hpp>

#include <thread>

namespace redwood {
namespace {

using SteadyClock = std::chrono::steady_clock;

class StreamSource final : public Source {
 public:
  explicit StreamSource(Params& p)
      : url_(p.require<std::string>("url")), initial_ms_(p.get<int>("initial_backoff_ms", 500)),
        max_ms_(p.get<int>("max_backoff_ms", 10000)), max_reconnects_(p.get<int>("max_reconnects", 0)),
        open_timeout_ms_(p.get<int>("open_timeout_ms", 10000)), read_timeout_ms_(p.get<int>("read_timeout_ms", 5000)) {
    if (url_.find("://") == std::string::npos) p.fail("url", "expected a URL such as rtsp://host/path");
    if (initial_ms_ <= 0 || max_ms_ < initial_ms_) p.fail("max_backoff_ms", "need 0 < initial_backoff_ms <= max_backoff_ms");
    if (max_reconnects_ < 0) p.fail("max_reconnects", "must be >= 0 (0: forever)");
    if (open_timeout_ms_ <= 0) p.fail("open_timeout_ms", "must be > 0");
    if (read_timeout_ms_ <= 0) p.fail("read_timeout_ms", "must be > 0");
    backoff_ms_ = initial_ms_;
  }

  bool live() const override { return true; }
  std::int64_t reconnects() const override { return reconnects_.load(); }
  /// Outages that ended, plus the one going on (a stream that never comes back reports the time
  /// since it was lost, up to the moment it was given up or stopped).
  bool connected() const override { return lost_since_us_.load() < 0; }
  double outage_ms() const override {
    const std::int64_t since = lost_since_us_.load();
    const std::int64_t ongoing = since < 0 ? 0 : std::max<std::int64_t>(0, now_us() - since);
    return static_cast<double>(outage_us_.load() + ongoing) / 1000.0;
  }

  ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>& stop) override {
    while (!stop) {
      if (capture_ && capture_->isOpened() && read_picture(image, memory)) {
        const auto now = SteadyClock::now();
        if (lost_) {
          // Frames again: report the gap, from the last good frame (or the loss) to now.
          const auto gap = now - lost_at_;
          end_outage();
          log().warn("stream {}: resumed after {:.2f} s without frames ({} reconnection attempt(s))", url_,
                     std::chrono::duration<double>(gap).count(), retries_);
          lost_ = false;
        }
        // The connection is good again, so the next loss starts the backoff afresh.
        retries_ = 0;
        backoff_ms_ = initial_ms_;
        last_frame_at_ = now;
        had_frame_ = true;
        pts_ms = std::chrono::duration<double, std::milli>(now - start_).count();
        return ReadStatus::kFrame;
      }
      if (tried_) {
        if (!lost_) {
          lost_ = true;
          lost_at_ = had_frame_ ? last_frame_at_ : SteadyClock::now();
          lost_since_us_ = std::chrono::duration_cast<std::chrono::microseconds>(lost_at_ - start_).count();
        }
        if (max_reconnects_ > 0 && retries_ >= max_reconnects_) {
          end_outage();  // given up: the outage counts until now
          throw IoError(fmt::format("stream {}: {} after {} reconnection attempt(s) (max_reconnects {})", url_,
                                    had_frame_ ? "lost and not back" : "no answer", retries_, max_reconnects_));
        }
        ++retries_;
        ++reconnects_;
        log().warn("stream {}: {}; reconnecting in {} ms (attempt {})", url_,
                   capture_ && capture_->isOpened() ? "the stream broke off" : "cannot connect", backoff_ms_, retries_);
        // Sleep in small steps so that a stop request is honoured promptly.
        for (int waited = 0; waited < backoff_ms_ && !stop; waited += 10) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, backoff_ms_ - waited)));
        }
        backoff_ms_ = std::min(backoff_ms_ * 2, max_ms_);
      }
      tried_ = true;
      capture_.reset();
      if (stop) break;
      capture_ = open(stop);
      if (capture_ && retries_ > 0) log().info("stream {}: connected again", url_);
    }
    if (lost_) end_outage();  // stopped while lost: the outage counts until the stop
    return ReadStatus::kEnd;
  }

 private:
  /// Reads the next picture into a buffer from `memory` of the last picture's size, into which
  /// OpenCV's reader copies its frame (it keeps a buffer of the right size and type). A picture
  /// of another size or type (the first one, or the stream changed) comes in a Mat of its own,
  /// from `memory` too, which the picture keeps. False when no frame came.
  bool read_picture(Picture& image, FrameMemory* memory) {
    cv::Mat into;
    if (last_width_ > 0) {
      image = frame_picture(memory, last_width_, last_height_, 3);
      into = as_mat(image);
    }
    if (memory) into.allocator = memory->mat_allocator();
    if (!capture_->read(into) || into.empty()) {
      image = {};
      return false;
    }
    if (into.data != image.data) image = from_mat(std::move(into));
    last_width_ = image.channels == 3 ? image.width : 0;
    last_height_ = image.height;
    return true;
  }

  /// Opens the URL on a thread of its own and waits for it, or for `stop`: FFmpeg's open blocks
  /// up to open_timeout_ms and cannot be interrupted. An abandoned open ends on its thread, which
  /// owns the capture until then; nothing waits for it. nullptr: not opened (or stopped).
  std::shared_ptr<cv::VideoCapture> open(const std::atomic<bool>& stop) const {
    struct Attempt {
      std::shared_ptr<cv::VideoCapture> capture = std::make_shared<cv::VideoCapture>();
      std::atomic<bool> done{false};
      bool opened = false;
    };
    auto attempt = std::make_shared<Attempt>();
    const std::vector<int> params{cv::CAP_PROP_OPEN_TIMEOUT_MSEC, open_timeout_ms_, cv::CAP_PROP_READ_TIMEOUT_MSEC,
                                  read_timeout_ms_};
    std::thread([attempt, url = url_, params] {
      attempt->opened = attempt->capture->open(url, cv::CAP_FFMPEG, params);
      attempt->done = true;
    }).detach();
    while (!attempt->done.load()) {
      if (stop) return nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return attempt->opened ? attempt->capture : nullptr;
  }

  std::int64_t now_us() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - start_).count();
  }
  void end_outage() {
    if (lost_since_us_.load() < 0) return;
    outage_us_ += std::max<std::int64_t>(0, now_us() - lost_since_us_.load());
    lost_since_us_ = -1;
  }

  std::string url_;
  int initial_ms_, max_ms_, max_reconnects_, open_timeout_ms_, read_timeout_ms_;
  std::shared_ptr<cv::VideoCapture> capture_;  // null: not open
  int last_width_ = 0, last_height_ = 0;       // of the last BGR picture read (0: none yet)
  bool tried_ = false;      // the first open is not a reconnection
  bool had_frame_ = false;  // a frame ever arrived
  bool lost_ = false;       // in an outage: no frame since the connection failed
  int retries_ = 0;         // reconnection attempts since the last good frame
  int backoff_ms_ = 0;
  SteadyClock::time_point lost_at_, last_frame_at_;
  std::atomic<std::int64_t> reconnects_{0};
  std::atomic<std::int64_t> outage_us_{0};
  std::atomic<std::int64_t> lost_since_us_{-1};  // since start_, while an outage goes on; -1 otherwise
  SteadyClock::time_point start_ = SteadyClock::now();
};

}  // namespace

RW_REGISTER_SOURCE("stream", StreamSource);

}  // namespace redwood
