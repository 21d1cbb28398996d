// Fuzz target: pictures given to `redwood infer --input`, `redwood bench --input` and the
// `images` source, decoded as they are (decode_image: cv::imdecode with IMREAD_COLOR, which is
// what read_image's cv::imread does with the file's bytes), then made into a model input by
// image_to_tensor: the
// extents and layout the input declares, --size for dynamic extents, stretch or letterbox, RGB or
// BGR, grey, the frame pool or the heap.
//
// An input is 4 bytes saying what the model input looks like, then the picture file:
//
//   byte 0: bits 0-1 layout (0, 3 auto; 1 NCHW; 2 NHWC)   bit 2 RGB   bit 3 letterbox
//           bit 4 one channel (grey)   bit 5 the channel extent is symbolic
//           bit 6 tensors from a frame pool   bit 7 a malformed input (byte 3, bits 4-5, says how)
//   byte 1, byte 2: the height and width: 0 symbolic, 1-223 that extent, 224-255 one of
//           kAbsurd (zero, negative, past int, past 2^56): these must be refused, never sized
//   byte 3: bits 0-1 batch (0: 1, 1: symbolic, 2: 2, 3: 0)   bits 2-3 --size for dynamic
//           extents (0: none, 1: 17x9, 2: 1x1, 3: 64x48)   bits 4-5 the malformation: int64
//           dtype, rank 3, no shape, undefined dtype
//
// Extents stay small or absurd on purpose: a model input of 30000x30000 is legitimate and
// would make a 10 GB tensor, which says nothing about the code and only stalls the fuzzer.
// OpenCV's decoders are not Redwood's code; they run uninstrumented (scripts/fuzz.sh and ctest
// cap the pixels they accept at 512x512 with OPENCV_IO_MAX_IMAGE_PIXELS, so that a forged header
// is refused at once instead of sizing a large picture, and then a large tensor, per input).

#include "core/error.hpp"
#include "core/log.hpp"
#include "fuzz/fuzz_target.hpp"
#include "stages/frame_memory.hpp"
#include "stages/preprocess/image_tensor.hpp"

#include <opencv2/core/utility.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>

#include <array>
#include <limits>

namespace {

using redwood::Dim;

constexpr std::array<std::int64_t, 12> kAbsurd = {
    0,
    -1,
    -7,
    std::numeric_limits<std::int32_t>::min(),
    std::numeric_limits<std::int32_t>::max(),
    std::int64_t{1} << 31,
    (std::int64_t{1} << 32) + 5,
    std::int64_t{1} << 40,
    std::int64_t{1} << 62,
    std::numeric_limits<std::int64_t>::max(),
    std::numeric_limits<std::int64_t>::min(),
    redwood::kMaxPicturePixels + 1,
};

Dim extent(std::uint8_t code, const char* symbol) {
  Dim d;
  if (code == 0) {
    d.symbol = symbol;
  } else if (code < 224) {
    d.value = code;
  } else {
    d.value = kAbsurd[(code - 224) % kAbsurd.size()];
  }
  return d;
}

Dim fixed(std::int64_t value) {
  Dim d;
  d.value = value;
  return d;
}

// Never destroyed, as the backends' static pools are not (backends/cuda/device_memory.cpp): a
// buddy pool destroyed after the main thread's thread-locals (its thread caches) reads them.
redwood::FrameMemory* g_pool = nullptr;

// Makes the model input the header describes and the tensor of `picture` for it.
void run(const cv::Mat& picture, std::uint8_t flags, std::uint8_t height_code, std::uint8_t width_code,
         std::uint8_t size_code) {
  redwood::ValueInfo input;
  input.name = "image";
  input.dtype = redwood::DType::kF32;
  input.has_shape = true;
  const int layout = flags & 3;
  const Dim batch = (size_code & 3) == 0 ? fixed(1) : (size_code & 3) == 1 ? extent(0, "n") : fixed((size_code & 3) == 2 ? 2 : 0);
  const Dim channels = (flags & 0x20) ? extent(0, "c") : fixed((flags & 0x10) ? 1 : 3);
  const Dim height = extent(height_code, "h"), width = extent(width_code, "w");
  if (layout == 2 || ((layout == 0 || layout == 3) && (flags & 1))) {
    input.dims = {batch, height, width, channels};
  } else {
    input.dims = {batch, channels, height, width};
  }
  if (flags & 0x80) {
    switch ((size_code >> 4) & 3) {
      case 0: input.dtype = redwood::DType::kI64; break;
      case 1: input.dims.pop_back(); break;
      case 2: input.has_shape = false; input.dims.clear(); break;
      case 3: input.dtype = redwood::DType::kUndefined; break;
    }
  }

  redwood::ImageTensorOptions options;
  options.layout = layout == 1 ? redwood::ImageLayout::kNCHW
                   : layout == 2 ? redwood::ImageLayout::kNHWC
                                 : redwood::ImageLayout::kAuto;
  options.rgb = flags & 4;
  options.resize = (flags & 8) ? redwood::ResizeMode::kLetterbox : redwood::ResizeMode::kStretch;
  options.pad_value = 114.f;
  static constexpr int kSizes[4][2] = {{0, 0}, {17, 9}, {1, 1}, {64, 48}};
  options.width = kSizes[(size_code >> 2) & 3][0];
  options.height = kSizes[(size_code >> 2) & 3][1];
  options.mean = {0.485f, 0.456f, 0.406f};
  options.std = {0.229f, 0.224f, 0.225f};

  redwood::ImageTransform transform;
  const redwood::Tensor t =
      redwood::image_to_tensor(picture, input, options, &transform, (flags & 0x40) ? g_pool : nullptr);
  (void)t.description();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  redwood::set_log_level("off");
  cv::setNumThreads(1);  // one thread: the same work for the same input, every time
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);  // decoders' complaints cost more than the run
  g_pool = new redwood::FrameMemory(redwood::FrameMemoryConfig{});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  const cv::Mat encoded(1, static_cast<int>(size - 4), CV_8UC1, const_cast<std::uint8_t*>(data + 4));
  try {
    const cv::Mat picture = size > 4 ? redwood::decode_image(encoded, "fuzz picture") : cv::Mat();
    if (picture.empty()) return 0;  // not a picture OpenCV reads: read_image_or_first_frame's IoError
    run(picture, data[0], data[1], data[2], data[3]);
  } catch (const redwood::Error&) {
  }
  return 0;
}
