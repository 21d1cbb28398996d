#pragma once
// Source: where a stream's frames come from (a video file, a network stream, a folder of
// pictures, a synthetic pattern). read() is the hot path: it returns a status value, never
// throws for an ordinary outcome (end of file, a lost connection); set-up errors throw, and so
// does a source that cannot go on (a stream given up after its reconnection attempts, a video
// with no readable frame): the pipeline then stops, drains the frames read so far through the
// sinks, and reports the error.
//
// A live source (camera, network) produces at its own pace: the pipeline drops its oldest
// waiting frame when it falls behind and counts the drop. A file source is read only as fast as
// the pipeline takes frames, so it never drops. Sources register by type name (RW_REGISTER_SOURCE).

#include "core/registry.hpp"
#include "stages/params.hpp"
#include "stages/picture.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace redwood {

class FrameMemory;

enum class ReadStatus { kFrame, kEnd };

class Source {
 public:
  virtual ~Source() = default;
  /// Frames arrive at their own pace (drop when behind) rather than on demand.
  virtual bool live() const = 0;
  /// Reads the next frame into `image` (8-bit BGR) and its time in the stream. The picture's
  /// buffer comes from `memory` (frame_picture(); null: the heap), the pipeline's frame pool. May
  /// block (a live source waits for its next frame, a reconnecting one for its backoff) but
  /// returns kEnd soon after `stop` becomes true.
  virtual ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>& stop) = 0;
  /// Frames per second the source was recorded at (0: unknown), for realtime pacing of files.
  virtual double frame_rate() const { return 0; }
  /// Starts over from the first frame (files); false when the source cannot.
  virtual bool rewind() { return false; }
  /// Makes the first pass begin `fraction` (0 to 1) of the way into the file, later passes
  /// (rewind) from its start: copies of one file run as independent cameras would, each at its
  /// own point of the content (--streams). Sources that are not files ignore it.
  virtual void begin_at(double fraction) {}
  /// The slow part of starting, done by the run before its clock starts (a paced file's first
  /// frame is due at the start): a video's decoder opened and the seek of begin_at() decoded.
  /// Never throws; what fails here is reported by the first read().
  virtual void prepare() {}
  /// Reconnections so far (network sources).
  virtual std::int64_t reconnects() const { return 0; }
  /// Time without frames because the connection was lost, summed over the outages so far
  /// (network sources; from the last good frame to the first one after reconnecting).
  virtual double outage_ms() const { return 0; }
  /// False while a network source has lost its connection (or has not made it yet).
  virtual bool connected() const { return true; }
};

using SourceFactory = std::function<std::unique_ptr<Source>(Params&)>;
/// Type name -> factory; filled by static registration (RW_REGISTER_SOURCE), read at load.
Registry<SourceFactory>& source_registry();
bool register_source(const std::string& type, SourceFactory factory);

}  // namespace redwood

#define RW_REGISTER_SOURCE(type, Class)                                                      \
  [[maybe_unused]] static const bool rw_source_registered_##Class = ::redwood::register_source( \
      type, [](::redwood::Params& p) -> std::unique_ptr<::redwood::Source> { return std::make_unique<Class>(p); })
