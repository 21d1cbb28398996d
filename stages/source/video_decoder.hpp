#pragma once
// A video file decoded through FFmpeg's libraries (libavformat, libavcodec, libswscale) into
// 8-bit BGR pictures: what the `video` source reads.
//
// Why not cv::VideoCapture, which decodes through the same libraries: OpenCV 4.6 (Debian 12's)
// gives every decoder as many threads as the machine has cores and has no way to ask for fewer.
// A hundred streams on the 16-core GPU host made 1,600 decoder threads, and their switching cost
// 6 cores where decoding itself needs 3.4 (scripts/thread_cpu.py). Here the thread count is the
// caller's; a decoder keeps its threads across rewinds (a looped file is not reopened); and the
// picture is converted straight into the caller's buffer (the frame pool), with the same
// conversion OpenCV uses (swscale, bicubic flags), so the pixels are OpenCV's.
//
// Heap allocations per frame, in steady state: none in this code (the packet, the decoded frame
// and the swscale context are reused; the picture comes from the frame pool). FFmpeg's own stay,
// and its API gives no way to avoid them, since every new reference to one of its refcounted
// buffers mallocs an AVBufferRef (av_buffer_ref). On the OCR clip (MPEG-4 part 2, 768x576), with
// one decoder thread, 49 a frame: 42 inside avcodec_send_packet (the MPEG-4 decoder referencing
// each picture's planes and side tables through av_frame_ref and av_buffer_replace, and
// avcodec_default_get_buffer2 handing out its pooled planes as new AVBufferRefs; a get_buffer2
// of our own would call av_buffer_create, two allocations a plane instead of one) and 5 inside
// av_read_frame (each packet read into a new buffer, av_grow_packet, and queued, which FFmpeg
// keeps internal). Frame threads add about 80 (with two: 130 a frame): each thread's copy of
// the picture tables (av_buffer_make_writable) and the references handed between threads.
// The automatic thread count (automatic_decoder_threads) gives an SD picture one thread, which
// decodes fast enough (this clip: about 0.5 ms a frame on one core).

#include "stages/picture.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>

namespace redwood {

class FrameMemory;

class VideoDecoder {
 public:
  /// Opens the file, finds its best video stream and FFmpeg's decoder for it; throws IoError
  /// naming the file and FFmpeg's reason when any of that fails.
  explicit VideoDecoder(const std::filesystem::path& path);
  ~VideoDecoder();
  VideoDecoder(const VideoDecoder&) = delete;
  VideoDecoder& operator=(const VideoDecoder&) = delete;

  /// Decoder threads (0: FFmpeg's own choice, one per core), taken when the decoder starts: at
  /// the first read. 1 until set.
  void set_threads(int threads);
  /// Decodes the next picture into `bgr` (8-bit BGR at the picture's size: in the buffer `bgr`
  /// has when it is that size and no other picture shares it, else in a new one from `memory`,
  /// the heap when null) and its time in the stream, in ms from its start. False at the end of
  /// the file. A packet FFmpeg cannot decode is skipped and counted (corrupt_packets()).
  bool read(Picture& bgr, double& pts_ms, FrameMemory* memory = nullptr);
  /// Back to the first frame (a seek, the decoder and its threads kept; the file is reopened
  /// only when it cannot seek). The next read() returns the first frame again.
  void rewind();
  /// Goes to frame `index` (counted from the first, at the declared frame rate): a seek to the key
  /// frame before it, then the frames up to it decoded and dropped, so the next read() returns
  /// exactly that frame. False (nothing changed) when the file has no frame rate or cannot seek.
  bool seek_frame(std::int64_t index);

  /// Frames per second the stream declares (0 when it does not).
  double frame_rate() const;
  /// Frames the file's header declares (0 when it does not say).
  std::int64_t declared_frames() const;
  /// Packets that failed to decode since the last rewind.
  std::int64_t corrupt_packets() const;
  /// The picture's size as the stream's header gives it (0 where it does not).
  int width() const;
  int height() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Decoder threads for `decoder_threads: 0`: one per started megapixel of the picture (FFmpeg
/// decodes an SD picture on one thread at hundreds to thousands of frames a second, and each frame
/// thread adds a frame of delay and its hand-over allocations), at most the cores shared out among
/// the open video sources, at least one. A size the header does not give counts as one megapixel.
int automatic_decoder_threads(int cores, int open_sources, int width, int height);

}  // namespace redwood
