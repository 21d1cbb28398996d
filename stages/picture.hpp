#pragma once
// Picture: a frame's pixels, with no dependency on OpenCV. 8-bit samples, `channels` of them
// interleaved per pixel (3: blue, green, red, OpenCV's order; 1: grey), rows `stride` bytes
// apart. Copies share the bytes: `owner` counts the references and gives the bytes back where
// they came from (the frame pool, the heap, a cv::Mat) when the last copy goes, so a frame hands
// its picture on without copying pixels. stages/picture_cv.hpp views a picture as a cv::Mat and
// keeps a cv::Mat as a picture, neither copying; FrameMemory::picture() takes one from the pool.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace redwood {

/// 8-bit pixels with shared ownership of their bytes; empty by default.
struct Picture {
  int width = 0, height = 0;
  int channels = 0;               // per pixel: 3 (BGR) or 1 (grey)
  std::size_t stride = 0;         // bytes from the start of one row to the next
  std::uint8_t* data = nullptr;   // the first row
  std::shared_ptr<void> owner;    // keeps `data` alive; null for a view of bytes kept elsewhere

  bool empty() const { return data == nullptr || width <= 0 || height <= 0; }
  std::uint8_t* row(int y) const { return data + static_cast<std::size_t>(y) * stride; }
  /// The bytes of one row's pixels (the stride may add padding after them).
  std::size_t row_bytes() const { return static_cast<std::size_t>(width) * static_cast<std::size_t>(channels); }

  /// A picture of its own on the heap: rows contiguous, 64-byte aligned, pixels uninitialized.
  static Picture allocate(int width, int height, int channels);
};

/// Copies `from`'s pixels into `to`, which has the same width, height and channels (throws
/// InvalidArgument otherwise).
void copy_pixels(const Picture& from, const Picture& to);

}  // namespace redwood
