// A video file decoded through FFmpeg (stages/source/video_decoder.hpp): frames on demand (never
// dropped), optionally looped. A file FFmpeg cannot open or has no decoder for fails at load;
// one with no readable frame fails the stream when read; one that stops before the frame count
// its header declares (truncated) ends there with a warning.
//
//   - name: cam0
//     type: video
//     path: ../assets/video/vtest.avi
//     start_frame: 0
//     loop: false
//     decoder_threads: 0   # 0: automatic (below); 1-64 to set it
//
// decoder_threads 0 gives each file, when it starts, a thread per started megapixel of its
// picture, at most max(1, cores / video sources open) (automatic_decoder_threads): an SD file
// decodes on one thread, a 4K file on its own on up to nine, and a hundred streams on 16 cores
// one thread each (more threads than cores only add switching).

#include "core/error.hpp"
#include "core/log.hpp"
#include "stages/frame_memory.hpp"
#include "stages/source/source.hpp"
#include "stages/source/video_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <utility>
#include <thread>

namespace redwood {
namespace {

std::atomic<int> open_video_sources{0};

class VideoSource final : public Source {
 public:
  explicit VideoSource(Params& p)
      : path_(p.existing_file("path")), loop_(p.get<bool>("loop", false)), start_frame_(p.get<int>("start_frame", 0)),
        threads_(p.get<int>("decoder_threads", 0)) {
    if (start_frame_ < 0) p.fail("start_frame", "must be >= 0");
    if (threads_ < 0 || threads_ > 64) p.fail("decoder_threads", "must be from 0 (automatic) to 64");
    try {
      decoder_ = std::make_unique<VideoDecoder>(path_);
    } catch (const Error& e) {
      p.fail("path", e.what());
    }
    ++open_video_sources;
  }
  ~VideoSource() override { --open_video_sources; }

  bool live() const override { return false; }
  double frame_rate() const override { return decoder_->frame_rate(); }
  bool rewind() override {
    decoder_->rewind();
    frames_in_pass_ = 0;
    return true;
  }

  void begin_at(double fraction) override { begin_at_ = std::clamp(fraction, 0.0, 1.0); }

  void prepare() override {
    if (started_) return;
    start();
    try {
      // The first pass's first frame decoded now (the seek lands on a key frame before it, and
      // the frames up to it are decoded too), held for the first read.
      if (begin_at_ > 0 && seek_into_first_pass() && decoder_->read(held_, held_pts_)) {
        holding_ = true;
        ++frames_in_pass_;
      }
    } catch (...) {
      prepare_error_ = std::current_exception();
    }
  }

  ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>& stop) override {
    if (stop) return ReadStatus::kEnd;
    if (!started_) prepare();
    if (prepare_error_) std::rethrow_exception(std::exchange(prepare_error_, nullptr));
    if (holding_) {
      image = frame_picture(memory, held_.width, held_.height, held_.channels);  // the frame pool's buffer
      copy_pixels(held_, image);
      pts_ms = held_pts_;
      holding_ = false;
      held_ = {};
      return ReadStatus::kFrame;
    }
    if (frames_in_pass_ == 0 && !skip_to_start()) return no_frame();
    return read_frame(image, pts_ms, memory);
  }

 private:
  ReadStatus read_frame(Picture& image, double& pts_ms, FrameMemory* memory) {
    if (!decoder_->read(image, pts_ms, memory)) {
      if (frames_in_pass_ == 0) return no_frame();
      end_of_pass();
      if (!loop_) return ReadStatus::kEnd;
      rewind();
      if (!skip_to_start() || !decoder_->read(image, pts_ms, memory)) return ReadStatus::kEnd;
    }
    ++frames_in_pass_;
    return ReadStatus::kFrame;
  }

  // The first pass from begin_at_ of the frames after start_frame (a seek; the file's header
  // must declare its frame count, else the pass starts at start_frame as usual).
  bool seek_into_first_pass() {
    const std::int64_t declared = decoder_->declared_frames();
    if (declared <= start_frame_ + 1) return false;
    const auto offset = static_cast<std::int64_t>(begin_at_ * static_cast<double>(declared - start_frame_));
    if (offset <= 0 || !decoder_->seek_frame(start_frame_ + offset)) return false;
    frames_in_pass_ = offset;  // as if read: the pass's end and the truncation check still hold
    return true;
  }

  // The thread count is settled at the first read, when every source of the pipeline exists.
  void start() {
    int threads = threads_;
    if (threads == 0) {
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      threads = automatic_decoder_threads(cores, open_video_sources.load(), decoder_->width(), decoder_->height());
    }
    decoder_->set_threads(threads);
    started_ = true;
  }

  // Decodes and drops the frames before start_frame (exact, where a seek lands on a key frame).
  bool skip_to_start() {
    Picture dropped;
    double pts = 0;
    for (int i = 0; i < start_frame_; ++i) {
      if (!decoder_->read(dropped, pts)) return false;
    }
    return true;
  }

  ReadStatus no_frame() const {
    // Opened but nothing decodes: zero frames, or corrupt from the start.
    throw IoError(fmt::format("video '{}': no readable frame{}", path_.string(),
                              start_frame_ > 0 ? fmt::format(" from start_frame {}", start_frame_) : std::string()));
  }

  void end_of_pass() const {
    const std::int64_t declared = decoder_->declared_frames();
    if (declared > 0 && start_frame_ + frames_in_pass_ < declared - 1) {
      // Not an error (what was read is processed), but the file is not what it claims to be.
      log().warn("video '{}': reading stopped after frame {} of the {} the file declares (truncated or corrupt)",
                 path_.string(), start_frame_ + frames_in_pass_, declared);
    }
    if (const std::int64_t bad = decoder_->corrupt_packets(); bad > 0) {
      log().warn("video '{}': {} packet(s) failed to decode and were skipped", path_.string(), bad);
    }
  }

  std::filesystem::path path_;
  bool loop_;
  int start_frame_;
  int threads_;
  std::unique_ptr<VideoDecoder> decoder_;
  bool started_ = false;
  double begin_at_ = 0;
  Picture held_;  // prepare()'s frame (on the heap), until the first read
  double held_pts_ = 0;
  bool holding_ = false;
  std::exception_ptr prepare_error_;
  std::int64_t frames_in_pass_ = 0;
};

}  // namespace

RW_REGISTER_SOURCE("video", VideoSource);

}  // namespace redwood
