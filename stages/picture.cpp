#include "stages/picture.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

namespace redwood {

namespace {
// Rows are read with SIMD loads: a cache line, as OpenCV aligns its own buffers.
constexpr std::align_val_t kAlignment{64};
}  // namespace

Picture Picture::allocate(int width, int height, int channels) {
  RW_EXPECTS(width >= 0 && height >= 0 && channels >= 1, InvalidArgument, "a picture of {}x{} with {} channel(s)", width,
             height, channels);
  Picture p;
  p.width = width;
  p.height = height;
  p.channels = channels;
  p.stride = p.row_bytes();
  RW_EXPECTS(height == 0 || p.stride <= std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(height),
             InvalidArgument, "a picture of {}x{} with {} channels is past the address space", width, height, channels);
  const std::size_t bytes = std::max<std::size_t>(p.stride * static_cast<std::size_t>(height), 1);
  p.data = static_cast<std::uint8_t*>(::operator new(bytes, kAlignment));
  p.owner = std::shared_ptr<void>(p.data, [](void* d) { ::operator delete(d, kAlignment); });
  return p;
}

void copy_pixels(const Picture& from, const Picture& to) {
  RW_EXPECTS(from.width == to.width && from.height == to.height && from.channels == to.channels, InvalidArgument,
             "copying a {}x{} picture of {} channel(s) into one of {}x{} with {}", from.width, from.height, from.channels,
             to.width, to.height, to.channels);
  if (from.empty() || from.data == to.data) return;
  for (int y = 0; y < from.height; ++y) std::memcpy(to.row(y), from.row(y), from.row_bytes());
}

}  // namespace redwood
