// jsonl sink: the frame_json message of every frame, one per line, in a file.
//
//   - name: log
//     type: jsonl
//     path: results.jsonl    # relative to the config file's folder
//     queue: 1000            # lines waiting for the disk; beyond, frames are dropped and counted
//
// Lines are written by a thread of the sink's own, so a slow disk cannot stall the pipeline, with
// write(2) as they come (nothing waits in a user-space buffer). The file only ever holds complete
// lines (stages/sink/line_file.hpp). When the disk refuses a write the lines not written count as
// failed and the run ends with an error naming the file.

#include "core/error.hpp"
#include "core/thread_name.hpp"
#include "stages/sink/frame_json.hpp"
#include "stages/sink/line_file.hpp"
#include "stages/sink/sink.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace redwood {
namespace {

class JsonlSink final : public Sink {
 public:
  explicit JsonlSink(SinkArgs& a) : pipeline_(a.pipeline) {
    Params& p = a.params;
    const auto path = p.origin().resolve(p.require<std::string>("path"));
    queue_limit_ = p.get<std::int64_t>("queue", 1000);
    if (queue_limit_ < 1) p.fail("queue", "must be at least 1");
    try {
      file_.emplace(path);
    } catch (const IoError& e) {
      p.fail("path", e.what());
    }
    writer_ = std::thread([this] { write_loop(); });
  }

  ~JsonlSink() override { stop(); }

  void write(const Frame& f, double latency_ms) override {
    line_.clear();
    append_frame_json(line_, f, pipeline_, latency_ms);
    line_.push_back('\n');
    {
      std::lock_guard lock(mutex_);
      // The sink can no longer write: the run ends (the message names the file and the error).
      if (!error_.empty()) throw IoError(error_);
      if (queued_lines_ >= queue_limit_) {
        ++dropped_;
        return;
      }
      queued_.append(line_);
      ++queued_lines_;
    }
    wake_.notify_one();
  }

  void close() override {
    stop();
    std::lock_guard lock(mutex_);
    if (!error_.empty()) throw IoError(error_);
  }

 private:
  void write_loop() {
    set_thread_name("rw-sink-write");
    std::string chunk;  // swapped with queued_: both keep their capacity, no allocation per frame
    for (;;) {
      std::int64_t lines = 0;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || queued_lines_ > 0; });
        if (queued_lines_ == 0) return;  // stopping, and everything is written
        chunk.swap(queued_);
        lines = queued_lines_;
        queued_lines_ = 0;
      }
      try {
        file_->append(chunk);
        written_ += lines;
      } catch (const IoError& e) {
        std::lock_guard lock(mutex_);
        error_ = e.what();
        failed_ += lines + queued_lines_;
        queued_lines_ = 0;
        queued_.clear();
        return;
      }
      chunk.clear();
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

  std::string pipeline_;
  std::string line_;  // reused: no allocation per frame once grown
  std::optional<LineFile> file_;
  std::int64_t queue_limit_ = 1000;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string queued_;
  std::int64_t queued_lines_ = 0;
  bool stopping_ = false;
  std::string error_;
  std::thread writer_;
};

}  // namespace

RW_REGISTER_SINK("jsonl", JsonlSink);

}  // namespace redwood
