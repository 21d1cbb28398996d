// video sink: the frames with their detections drawn (boxes or quads, track ids and trails,
// labels, text, keypoints) and the analytics' lines and zones with their counts, written
// as a video. One file per stream: "{stream}" in the path is replaced by the stream's name.
//
//   - name: annotated
//     type: video
//     path: out/{stream}.avi
//     fps: 10
//     fourcc: MJPG
//     queue: 16          # drawn frames waiting for the encoder; beyond, frames are dropped and counted
//     min_free_mb: 64    # stop writing (an error) when the file system has less than this free
//
// The delivery thread draws on a copy of the picture and queues it; a thread of the sink's own
// encodes and writes, so a slow encoder or disk cannot stall the pipeline. OpenCV's writer
// reports no write errors, so the sink guards the disk itself: before each frame it checks the
// free space where the file lives, and at the end it reads every file back (it must open and hold
// the frames written). Either failure ends the run with an error naming the file, and the frames
// that could not be written count as failed.

#include "core/thread_name.hpp"
#include "stages/picture_cv.hpp"
#include "stages/sink/sink.hpp"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <sys/statvfs.h>

#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace redwood {
namespace {

class VideoSink final : public Sink {
 public:
  explicit VideoSink(SinkArgs& a) : streams_(a.stream_names) {
    Params& p = a.params;
    pattern_ = p.origin().resolve(p.require<std::string>("path")).string();
    fps_ = p.get<double>("fps", 10.0);
    if (!(fps_ > 0 && fps_ <= 1000)) p.fail("fps", "must be above 0 and at most 1000");
    const auto fourcc = p.get<std::string>("fourcc", "MJPG");
    if (fourcc.size() != 4) p.fail("fourcc", "expected four characters such as MJPG");
    fourcc_ = cv::VideoWriter::fourcc(fourcc[0], fourcc[1], fourcc[2], fourcc[3]);
    if (streams_.size() > 1 && pattern_.find("{stream}") == std::string::npos) {
      p.fail("path", "several streams need '{stream}' in the path");
    }
    queue_limit_ = p.get<int>("queue", 16);
    if (queue_limit_ < 1 || queue_limit_ > 1024) p.fail("queue", "must be from 1 to 1024 (frames)");
    const auto min_free_mb = p.get<std::int64_t>("min_free_mb", 64);
    if (min_free_mb < 0 || min_free_mb > (std::int64_t{1} << 30)) p.fail("min_free_mb", "must be from 0 to 2^30");
    min_free_bytes_ = min_free_mb << 20;
    writer_ = std::thread([this] { write_loop(); });
  }

  ~VideoSink() override { stop(); }

  void write(const Frame& f, double) override {
    {
      std::lock_guard lock(mutex_);
      // The sink can no longer write: the run ends (the message names the file and the error).
      if (!error_.empty()) throw IoError(error_);
    }
    auto it = files_.find(f.stream);
    if (it == files_.end()) it = files_.emplace(f.stream, open(f)).first;
    cv::Mat canvas = as_mat(f.image).clone();
    draw(canvas, f);
    {
      std::lock_guard lock(mutex_);
      if (static_cast<int>(queued_.size()) >= queue_limit_) {
        ++dropped_;
        return;
      }
      queued_.push_back({&it->second, std::move(canvas)});
    }
    wake_.notify_one();
  }

  void close() override {
    stop();
    std::string error;
    {
      std::lock_guard lock(mutex_);
      error = error_;
    }
    for (auto& [_, file] : files_) {
      file.writer.release();
      if (!error.empty()) continue;
      std::int64_t lost = 0;
      error = read_back_problem(file, lost);
      written_ -= lost;
      failed_ += lost;
    }
    if (!error.empty()) throw IoError(error);
  }

 private:
  struct File {
    std::string path;
    cv::VideoWriter writer;
    std::int64_t frames = 0;  // written (by the writer thread; read after it stopped)
  };
  struct Queued {
    File* file;
    cv::Mat canvas;
  };

  File open(const Frame& f) {
    File file;
    file.path = pattern_;
    if (auto at = file.path.find("{stream}"); at != std::string::npos) file.path.replace(at, 8, f.stream_name);
    std::filesystem::path parent = std::filesystem::path(file.path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec || !file.writer.open(file.path, fourcc_, fps_, cv::Size(f.image.width, f.image.height))) {
      throw IoError(fmt::format("video sink: cannot write '{}'{}", file.path, ec ? ": " + ec.message() : ""));
    }
    return file;
  }

  /// A colour per track (golden-ratio hues, so neighbouring ids differ), or per kind untracked.
  static cv::Scalar colour_of(const Detection& d) {
    if (d.track_id < 0) return d.kind == "text" ? cv::Scalar(0, 0, 255) : cv::Scalar(0, 255, 0);
    const double hue = std::fmod(static_cast<double>(d.track_id) * 0.618033988749895, 1.0) * 180.0;
    cv::Mat3b hsv(1, 1, cv::Vec3b(static_cast<std::uint8_t>(hue), 220, 255)), bgr;
    cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
    return {static_cast<double>(bgr(0, 0)[0]), static_cast<double>(bgr(0, 0)[1]), static_cast<double>(bgr(0, 0)[2])};
  }

  /// Boxes (or quads), keypoints, the caption (track id, label, text, secondary classes), the
  /// track's trail; then the analytics' lines and zones with their counts.
  static void draw(cv::Mat& canvas, const Frame& f) {
    for (const Overlay& o : f.overlays) {
      std::vector<cv::Point> pts;
      for (const PointF& p : o.points) pts.push_back(to_cv(p));
      if (pts.size() >= 2) cv::polylines(canvas, pts, o.closed, {0, 215, 255}, 2);
      if (!pts.empty() && !o.text.empty()) {
        cv::putText(canvas, o.text, pts.front() + cv::Point(4, -6), cv::FONT_HERSHEY_SIMPLEX, 0.55, {0, 0, 0}, 4);
        cv::putText(canvas, o.text, pts.front() + cv::Point(4, -6), cv::FONT_HERSHEY_SIMPLEX, 0.55, {0, 215, 255}, 1);
      }
    }
    for (const Detection& d : f.detections) {
      const cv::Scalar colour = colour_of(d);
      const cv::Rect2f box = to_cv(d.box);
      if (d.quad.size() == 4) {
        const std::vector<cv::Point> q{to_cv(d.quad[0]), to_cv(d.quad[1]), to_cv(d.quad[2]), to_cv(d.quad[3])};
        cv::polylines(canvas, q, true, colour, 2);
      } else {
        cv::rectangle(canvas, box, colour, 2);
      }
      for (const auto& k : d.keypoints) cv::circle(canvas, to_cv(k), 2, {255, 0, 0}, -1);
      for (std::size_t i = 1; i < d.trail.size(); ++i) cv::line(canvas, to_cv(d.trail[i - 1]), to_cv(d.trail[i]), colour, 2);
      std::string caption;
      const auto add = [&](const std::string& part) {
        if (!part.empty()) caption += (caption.empty() ? "" : " ") + part;
      };
      if (d.track_id >= 0) add("#" + std::to_string(d.track_id));
      add(d.label);
      add(d.text);
      for (const Classification& c : d.classes) add(c.label);
      if (!caption.empty()) {
        // A dark outline keeps the caption readable on any background.
        cv::putText(canvas, caption, box.tl() + cv::Point2f(0, -4), cv::FONT_HERSHEY_SIMPLEX, 0.55, {0, 0, 0}, 4);
        cv::putText(canvas, caption, box.tl() + cv::Point2f(0, -4), cv::FONT_HERSHEY_SIMPLEX, 0.55, colour, 1);
      }
    }
  }

  /// Why `file` may not take `bytes` more: less than min_free_mb would be left ("" when it may).
  std::string space_problem(const File& file, std::size_t bytes) const {
    if (min_free_bytes_ == 0) return "";
    struct statvfs fs {};
    const auto folder = std::filesystem::path(file.path).parent_path();
    if (statvfs(folder.empty() ? "." : folder.c_str(), &fs) != 0) return "";  // not a file system we can ask
    const auto free = static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_frsize);
    if (free - static_cast<std::int64_t>(bytes) >= min_free_bytes_) return "";
    return fmt::format("video sink: '{}': the disk is (nearly) full: {} MiB free, min_free_mb is {}", file.path, free >> 20,
                       min_free_bytes_ >> 20);
  }

  /// Whether a closed file reads back as a video with the frames written ("" when it does); the
  /// frames missing from it go to `lost`.
  static std::string read_back_problem(const File& file, std::int64_t& lost) {
    cv::VideoCapture check(file.path);
    if (!check.isOpened()) {
      lost = file.frames;
      return fmt::format("video sink: '{}' does not read back as a video after writing {} frame(s): a write failed "
                         "(disk full?)",
                         file.path, file.frames);
    }
    // The container's frame count: exact for AVI; others estimate it from the duration, so a
    // frame short in a hundred is within their error. None at all: the index never made it out.
    const auto count = static_cast<std::int64_t>(check.get(cv::CAP_PROP_FRAME_COUNT));
    if (file.frames > 0 && count < file.frames - std::max<std::int64_t>(0, file.frames / 100)) {
      lost = file.frames - std::max<std::int64_t>(0, count);
      return fmt::format("video sink: '{}' holds {} of the {} frame(s) written: a write failed (disk full?)", file.path,
                         std::max<std::int64_t>(0, count), file.frames);
    }
    return "";
  }

  void write_loop() {
    set_thread_name("rw-sink-write");
    for (;;) {
      Queued item;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
        if (queued_.empty()) return;  // stopping, and everything is written
        item = std::move(queued_.front());
        queued_.pop_front();
      }
      const std::string problem = space_problem(*item.file, item.canvas.total() * item.canvas.elemSize());
      if (!problem.empty()) {
        std::lock_guard lock(mutex_);
        error_ = problem;
        failed_ += 1 + static_cast<std::int64_t>(queued_.size());
        queued_.clear();
        return;
      }
      item.file->writer.write(item.canvas);
      ++item.file->frames;
      ++written_;
    }
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (writer_.joinable()) writer_.join();
  }

  std::vector<std::string> streams_;
  std::string pattern_;
  double fps_ = 10;
  int fourcc_ = 0;
  int queue_limit_ = 16;
  std::int64_t min_free_bytes_ = 0;
  std::map<int, File> files_;  // by stream; opened on the delivery thread, written on the writer's
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queued_;
  bool stopping_ = false;
  std::string error_;
  std::thread writer_;
};

}  // namespace

RW_REGISTER_SINK("video", VideoSink);

}  // namespace redwood
