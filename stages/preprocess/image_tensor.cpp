#include "stages/preprocess/image_tensor.hpp"

#include "core/error.hpp"
#include "stages/picture_cv.hpp"
#include "stages/preprocess/linear_resize.hpp"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

namespace redwood {

namespace {

// The picture formats Redwood reads (those the images source lists), known by their first bytes:
// PNG, JPEG, BMP, TIFF, WebP, and the netpbm P1-P6 (PBM, PGM, PPM). OpenCV decodes more (DICOM
// through GDCM, JPEG 2000, OpenEXR, Radiance HDR, Sun raster, PFM), and GDCM failed an assert and
// aborted on a crafted file (tests/fuzz/image_tensor_fuzz.cpp): those are no picture here.
// OpenCV picks the first decoder whose signature matches, so a file that starts like one of ours
// but fails that decoder's fuller check (a "P6" with no space after it) would reach the next
// ones: DICOM's signature ("DICM" at byte 128) is refused outright.
constexpr std::size_t kSignatureBytes = 132;

bool is_known_picture(const unsigned char* p, std::size_t n) {
  const auto starts = [&](std::string_view signature, std::size_t at = 0) {
    return n >= at + signature.size() && std::memcmp(p + at, signature.data(), signature.size()) == 0;
  };
  if (starts("DICM", 128)) return false;
  const bool netpbm = n >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6' && std::isspace(p[2]) != 0;
  return starts("\x89PNG\r\n\x1a\n") || starts("\xff\xd8\xff") || starts("BM") ||
         starts(std::string_view("II*\0", 4)) || starts(std::string_view("MM\0*", 4)) ||
         (starts("RIFF") && starts("WEBP", 8)) || netpbm;
}

}  // namespace

cv::Mat decode_image(const cv::Mat& bytes, const std::string& source) {
  RW_EXPECTS(bytes.empty() || (bytes.isContinuous() && bytes.elemSize() == 1), InvalidArgument,
             "{}: decode_image takes the file's bytes as one continuous 8-bit row", source);
  if (!is_known_picture(bytes.data, bytes.total())) return {};
  try {
    return cv::imdecode(bytes, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    throw IoError(fmt::format("{}: OpenCV refuses the picture: {}", source, e.err));
  }
}

cv::Mat read_image(const std::filesystem::path& file) {
  unsigned char head[kSignatureBytes] = {};
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(head), sizeof head);
  if (!is_known_picture(head, static_cast<std::size_t>(in.gcount()))) return {};
  try {
    return cv::imread(file.string(), cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    throw IoError(fmt::format("{}: OpenCV refuses the picture: {}", file.string(), e.err));
  }
}

cv::Mat read_image_or_first_frame(const std::filesystem::path& file) {
  RW_EXPECTS(std::filesystem::is_regular_file(file), IoError, "{}: no such file", file.string());
  cv::Mat image = read_image(file);
  if (!image.empty()) return image;
  cv::VideoCapture capture(file.string());
  RW_EXPECTS(capture.isOpened(), IoError, "{}: neither an image nor a video OpenCV can open",
             file.string());
  cv::Mat frame;
  RW_EXPECTS(capture.read(frame) && !frame.empty(), IoError, "{}: the video has no readable frame",
             file.string());
  return frame;
}

PictureFit fit_picture(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options) {
  RW_EXPECTS(!bgr.empty() && bgr.type() == CV_8UC3, InvalidArgument,
             "input '{}': expected an 8-bit 3-channel picture", input.name);
  RW_EXPECTS(input.dtype == DType::kF32 || input.dtype == DType::kUndefined, Unsupported,
             "input '{}' is {}; pictures can only feed float inputs", input.name, input.description());
  RW_EXPECTS(input.has_shape && input.dims.size() == 4, InvalidArgument,
             "input '{}' is {}; a picture feeds a rank-4 input (NCHW or NHWC)", input.name,
             input.description());
  ImageLayout layout = options.layout;
  if (layout == ImageLayout::kAuto) {
    const Dim& last = input.dims[3];
    const Dim& second = input.dims[1];
    layout = (last.known() && (last.value == 3 || last.value == 1) &&
              !(second.known() && (second.value == 3 || second.value == 1)))
                 ? ImageLayout::kNHWC
                 : ImageLayout::kNCHW;
  }
  const bool nchw = layout == ImageLayout::kNCHW;
  const Dim& c_dim = nchw ? input.dims[1] : input.dims[3];
  const Dim& h_dim = nchw ? input.dims[2] : input.dims[1];
  const Dim& w_dim = nchw ? input.dims[3] : input.dims[2];
  const std::int64_t channels = c_dim.known() ? c_dim.value : 3;
  RW_EXPECTS(channels == 3 || channels == 1, InvalidArgument,
             "input '{}' is {}: {} channels, a picture has 3 (or 1 as grey)", input.name,
             input.description(), channels);
  RW_EXPECTS(!input.dims[0].known() || input.dims[0].value == 1, InvalidArgument,
             "input '{}' is {}: batch {} from one picture", input.name, input.description(),
             input.dims[0].value);
  // Fixed extents come from the model file: each is checked before OpenCV sizes a picture with it
  // (a zero made cv::resize throw its own exception, and 2^32 + 5 was cut to 5 by the int).
  const auto extent = [&](const Dim& dim, int fallback, const char* what) -> std::int64_t {
    if (!dim.known()) return fallback;
    RW_EXPECTS(dim.value >= 1 && dim.value <= kMaxPicturePixels, InvalidArgument,
               "input '{}' is {}: a picture's {} must be from 1 to {}, not {}", input.name, input.description(), what,
               kMaxPicturePixels, dim.value);
    return dim.value;
  };
  const std::int64_t tall = extent(h_dim, options.height > 0 ? options.height : bgr.rows, "height");
  const std::int64_t wide = extent(w_dim, options.width > 0 ? options.width : bgr.cols, "width");
  RW_EXPECTS(tall * wide <= kMaxPicturePixels, InvalidArgument,
             "input '{}' is {}: a {}x{} picture has more than {} pixels, the most OpenCV decodes", input.name,
             input.description(), wide, tall, kMaxPicturePixels);
  return {nchw, static_cast<int>(channels), static_cast<int>(tall), static_cast<int>(wide)};
}

PictureInput picture_input(const PictureFit& fit, const ImageTensorOptions& options) {
  return PictureInput::from_mean_std(options.scale, options.mean, options.std, fit.channels, fit.nchw);
}

namespace {

// The geometry and colour steps both ways share: resize (stretch or letterbox) to the fit, then
// the model's channel order. The last step writes into `into` (a tensor's pixels) when given.
// The intermediate pictures live in this thread's buffers (they only grow): the picture returned
// is valid until the thread's next call, which is all its callers need.
cv::Mat fitted_picture(const cv::Mat& bgr, const PictureFit& fit, const ImageTensorOptions& options,
                       ImageTransform* transform, cv::Mat* into) {
  thread_local std::vector<std::uint8_t> inner_bytes, resized_bytes, ordered_bytes;
  thread_local LinearResize resize;  // cv::resize's INTER_LINEAR bytes, without its buffers
  const bool reorder = fit.channels == 1 || options.rgb;
  const int height = fit.height, width = fit.width;
  cv::Mat resized = into != nullptr && !reorder ? *into : scratch_mat(resized_bytes, height, width, bgr.type());
  ImageTransform tf;
  tf.tensor_width = width;
  tf.tensor_height = height;
  if (options.resize == ResizeMode::kLetterbox && (height != bgr.rows || width != bgr.cols)) {
    const double s = std::min(static_cast<double>(width) / bgr.cols, static_cast<double>(height) / bgr.rows);
    const int w = std::max(1, static_cast<int>(std::lround(bgr.cols * s)));
    const int h = std::max(1, static_cast<int>(std::lround(bgr.rows * s)));
    cv::Mat inner = scratch_mat(inner_bytes, h, w, bgr.type());
    resize.resize(bgr, inner);
    const int left = (width - w) / 2, top = (height - h) / 2;
    cv::copyMakeBorder(inner, resized, top, height - h - top, left, width - w - left, cv::BORDER_CONSTANT,
                       cv::Scalar::all(options.pad_value));
    tf.scale_x = static_cast<float>(w) / bgr.cols;
    tf.scale_y = static_cast<float>(h) / bgr.rows;
    tf.pad_x = static_cast<float>(left);
    tf.pad_y = static_cast<float>(top);
  } else if (height != bgr.rows || width != bgr.cols) {
    resize.resize(bgr, resized);
    tf.scale_x = static_cast<float>(width) / bgr.cols;
    tf.scale_y = static_cast<float>(height) / bgr.rows;
  } else {
    resized = bgr;
  }
  if (transform) *transform = tf;
  cv::Mat ordered = into != nullptr ? *into : scratch_mat(ordered_bytes, height, width, CV_8UC(fit.channels));
  if (fit.channels == 1) {
    cv::cvtColor(resized, ordered, cv::COLOR_BGR2GRAY);
  } else if (options.rgb) {
    cv::cvtColor(resized, ordered, cv::COLOR_BGR2RGB);
  } else if (into == nullptr) {
    ordered = resized;
  } else if (resized.data != into->data) {
    resized.copyTo(ordered);  // the picture was the input's size already
  }
  return ordered;
}

}  // namespace

Tensor image_to_tensor(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options) {
  return image_to_tensor(bgr, input, options, nullptr);
}

Tensor image_to_tensor(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options,
                       ImageTransform* transform, FrameMemory* memory) {
  const PictureFit fit = fit_picture(bgr, input, options);
  const cv::Mat ordered = fitted_picture(bgr, fit, options, transform, nullptr);
  const Shape shape = fit.nchw ? Shape{1, fit.channels, fit.height, fit.width} : Shape{1, fit.height, fit.width, fit.channels};
  Tensor out = frame_tensor(memory, DType::kF32, shape);
  write_normalized(ordered, fit.channels, options.scale, options.mean.data(), options.std.data(), fit.nchw,
                   out.data<float>());
  return out;
}

Tensor image_to_pixels(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options,
                       ImageTransform* transform, FrameMemory* memory) {
  const PictureFit fit = fit_picture(bgr, input, options);
  Tensor out = frame_tensor(memory, DType::kU8, {1, fit.height, fit.width, fit.channels});
  cv::Mat into(fit.height, fit.width, CV_8UC(fit.channels), out.raw_data());
  fitted_picture(bgr, fit, options, transform, &into);
  return out;
}

void write_normalized(const cv::Mat& pixels, int channels, float scale, const float* mean, const float* std, bool nchw,
                      float* dst) {
  // (p * scale - mean) / std as one multiply-add per value: alpha * p + beta, the very alpha and
  // beta a runner gets for a picture (picture_input), so both ways give the same values.
  std::array<float, 3> means{0.f, 0.f, 0.f}, stds{1.f, 1.f, 1.f};
  for (int c = 0; c < channels; ++c) {
    means[c] = mean[c];
    stds[c] = std[c];
  }
  const PictureInput picture = PictureInput::from_mean_std(scale, means, stds, channels, false);
  const float* alpha = picture.alpha.data();
  const float* beta = picture.beta.data();
  const int width = pixels.cols, height = pixels.rows;
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  if (nchw || channels == 1) {
    // Planes: OpenCV's split and convertTo, which pick AVX2 at run time (this file is built for
    // baseline x86-64, and a strided per-channel loop vectorizes poorly): about 3x faster than
    // the loop. The 8-bit planes live in a per-thread buffer that only grows, so a frame
    // allocates nothing here once the largest picture has been seen.
    thread_local std::vector<std::uint8_t> scratch;
    cv::Mat planes[3];
    if (channels == 1) {
      planes[0] = pixels;
    } else {
      if (scratch.size() < 3 * plane) scratch.resize(3 * plane);
      for (int c = 0; c < 3; ++c) planes[c] = cv::Mat(height, width, CV_8UC1, scratch.data() + c * plane);
      cv::split(pixels, planes);
    }
    for (int c = 0; c < channels; ++c) {
      cv::Mat out(height, width, CV_32FC1, dst + c * plane);
      planes[c].convertTo(out, CV_32F, alpha[c], beta[c]);
    }
    return;
  }
  // Interleaved: core's loop, a row at a time (a window's rows are apart).
  for (int y = 0; y < height; ++y) {
    normalize_picture(pixels.ptr<std::uint8_t>(y), 1, 1, width, picture, dst + static_cast<std::size_t>(y) * width * channels);
  }
}

}  // namespace redwood
