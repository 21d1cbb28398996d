#pragma once
// Sink: where results leave a pipeline. write() gets each frame of a stream in sequence order
// (the pipeline's sequencer guarantees it), from one thread at a time. A sink must not stall the
// pipeline: one that can fall behind (a network subscriber) drops and counts instead. Sinks
// register by type name (RW_REGISTER_SINK).

#include "core/registry.hpp"
#include "stages/frame.hpp"
#include "stages/params.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redwood {

struct SinkArgs {
  std::string name;
  Params& params;
  std::string pipeline;                   // the pipeline's name (message topics start with it)
  std::vector<std::string> stream_names;  // by stream index
  std::vector<bool> stream_live;          // by stream index: a live source (a camera), not replayable
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(const Frame& frame, double latency_ms) = 0;
  /// Flushes and closes (end of run); throws when what the sink took could not all be written.
  virtual void close() {}
  /// Where stream `stream` should begin, for a durable sink (one that keeps what it took across
  /// runs, e.g. a JetStream stream): the seq after the last frame of it that the sink holds from
  /// an earlier run of this pipeline (a worker restarted after a crash, a stream that another
  /// worker ran before a re-shard). The run then starts the stream's source there, when the
  /// source is replayable (a file, a synthetic pattern). nullopt: the sink keeps nothing across
  /// runs, or cannot tell now. Called before the run starts, once per replayable stream.
  virtual std::optional<std::int64_t> resume_at(std::size_t stream) { return std::nullopt; }
  std::int64_t written() const { return written_.load(); }
  std::int64_t dropped() const { return dropped_.load(); }
  /// Frames the sink took but could not write (a full disk): the run ends with an error.
  std::int64_t failed() const { return failed_.load(); }

 protected:
  std::atomic<std::int64_t> written_{0};
  std::atomic<std::int64_t> dropped_{0};
  std::atomic<std::int64_t> failed_{0};
};

using SinkFactory = std::function<std::unique_ptr<Sink>(SinkArgs&)>;
/// Type name -> factory; filled by static registration (RW_REGISTER_SINK), read at load.
Registry<SinkFactory>& sink_registry();
bool register_sink(const std::string& type, SinkFactory factory);

}  // namespace redwood

#define RW_REGISTER_SINK(type, Class)                                                      \
  [[maybe_unused]] static const bool rw_sink_registered_##Class = ::redwood::register_sink( \
      type, [](::redwood::SinkArgs& a) -> std::unique_ptr<::redwood::Sink> { return std::make_unique<Class>(a); })
