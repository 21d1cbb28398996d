// jsonl sink: the frame_json message of every frame, one per line, in a file.
//
//   - name: log
//     type: jsonl
//     path: results.jsonl    # relative to the config file's folder

#include "stages/sink/frame_json.hpp"
#include "stages/sink/sink.hpp"

#include <fmt/format.h>

#include <fstream>

namespace redwood {
namespace {

class JsonlSink final : public Sink {
 public:
  explicit JsonlSink(SinkArgs& a) : pipeline_(a.pipeline) {
    const auto path = a.params.origin().resolve(a.params.require<std::string>("path"));
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    out_.open(path);
    if (!out_) a.params.fail("path", fmt::format("cannot write '{}'", path.string()));
  }

  void write(const Frame& f, double latency_ms) override {
    line_.clear();
    append_frame_json(line_, f, pipeline_, latency_ms);
    line_.push_back('\n');
    out_.write(line_.data(), static_cast<std::streamsize>(line_.size()));
    ++written_;
  }
  void close() override { out_.close(); }

 private:
  std::string pipeline_;
  std::string line_;  // reused: no allocation per frame once grown
  std::ofstream out_;
};

}  // namespace

RW_REGISTER_SINK("jsonl", JsonlSink);

}  // namespace redwood
