// Pictures into model inputs: every value is (p * scale - mean[c]) / std[c] of its pixel and
// channel (to float rounding: one multiply-add), in the layout and channel order asked for; text crops are resized to the strip's
// height, normalized the same way, and the rest of each row stays zero. The pixels left for a
// model's runner to normalize (image_to_pixels) are the same picture, and the CPU runner makes
// of them what image_to_tensor makes.

#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/cpu_runner.hpp"
#include "stages/postprocess/text_crops.hpp"
#include "stages/preprocess/image_tensor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <fstream>
#include <future>

namespace redwood {
namespace {

// A 5 x 3 BGR picture whose pixel (y, x) has channel c = 10 * y + 3 * x + c.
cv::Mat picture() {
  cv::Mat m(3, 5, CV_8UC3);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      for (int c = 0; c < 3; ++c) m.at<cv::Vec3b>(y, x)[c] = static_cast<std::uint8_t>(10 * y + 3 * x + c);
    }
  }
  return m;
}

ValueInfo input(Shape dims) {
  ValueInfo vi;
  vi.name = "x";
  vi.dtype = DType::kF32;
  vi.has_shape = true;
  for (auto d : dims) vi.dims.push_back(Dim{d, ""});
  return vi;
}

TEST(ImageTensor, NchwRgbValuesAreScaledAndNormalizedPerChannel) {
  ImageTensorOptions o;
  o.rgb = true;
  o.scale = 0.5f;
  o.mean = {1.f, 2.f, 3.f};
  o.std = {2.f, 4.f, 8.f};
  const Tensor t = image_to_tensor(picture(), input({1, 3, 3, 5}), o);
  ASSERT_EQ(t.shape(), (Shape{1, 3, 3, 5}));
  const float* v = t.data<float>();
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 3; ++y) {
      for (int x = 0; x < 5; ++x) {
        const float p = static_cast<float>(10 * y + 3 * x + (2 - c));  // RGB: channel c is BGR's 2 - c
        EXPECT_NEAR(v[(c * 3 + y) * 5 + x], (p * o.scale - o.mean[c]) / o.std[c], 1e-6) << c << " " << y << " " << x;
      }
    }
  }
}

TEST(ImageTensor, NhwcBgrKeepsThePixelsInterleaved) {
  ImageTensorOptions o;
  o.layout = ImageLayout::kNHWC;  // [1, 3, 5, 3] could be either
  o.rgb = false;
  o.mean = {0.1f, 0.2f, 0.3f};
  const Tensor t = image_to_tensor(picture(), input({1, 3, 5, 3}), o);
  ASSERT_EQ(t.shape(), (Shape{1, 3, 5, 3}));
  const float* v = t.data<float>();
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(v[(y * 5 + x) * 3 + c], static_cast<float>(10 * y + 3 * x + c) / 255.f - o.mean[c], 1e-6);
      }
    }
  }
}

// A window of a larger picture (rows not continuous), then a larger picture on the same thread
// (the per-thread planes grow), then one grey channel: each value from its own pixel.
// Extents a model declares that no picture can have are refused naming the input (found by
// tests/fuzz/image_tensor_fuzz.cpp): a zero made cv::resize throw cv::Exception, 2^32 + 5 was cut
// to 5 rows by the int it went through, and 2^31 became negative.
TEST(ImageTensor, ExtentsNoPictureCanHaveAreRefused) {
  const ImageTensorOptions o;
  for (const std::int64_t bad : {std::int64_t{0}, (std::int64_t{1} << 32) + 5, std::int64_t{1} << 31,
                                 kMaxPicturePixels + 1}) {
    for (const bool height : {true, false}) {
      const Shape dims = height ? Shape{1, 3, bad, 4} : Shape{1, 3, 4, bad};
      try {
        image_to_tensor(picture(), input(dims), o);
        FAIL() << "no exception for " << shape_str(dims);
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find(fmt::format("input 'x' is float{}: a picture's {} must be from 1 to "
                                                         "1073741824, not {}",
                                                         shape_str(dims), height ? "height" : "width", bad)),
                  std::string::npos)
            << e.what();
      }
    }
  }
  // Each extent fits, the two together do not.
  try {
    image_to_tensor(picture(), input({1, 3, 1 << 16, 1 << 15}), o);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("a 32768x65536 picture has more than 1073741824 pixels"), std::string::npos)
        << e.what();
  }
}

// A BMP header claiming 4 x 17039360 pixels: OpenCV recognises the format, then refuses the
// size with a cv::Exception, which escaped `redwood infer` and the images source (found by
// tests/fuzz/image_tensor_fuzz.cpp). Now an IoError naming the file; a file that is no picture
// still reads as empty.
TEST(ImageTensor, PicturesOpenCvRefusesAreIoErrorsNamingTheFile) {
  std::string bmp = std::string("BM", 2) + std::string(12, '\0');
  bmp[10] = 54;                                                     // pixel data offset
  const std::int32_t info[] = {40, 4, 0x01040000, 0x00180001, 0};   // size, width, height, planes+bpp, BI_RGB
  bmp.append(reinterpret_cast<const char*>(info), sizeof info);
  bmp.append(60, '\0');
  const cv::Mat bytes(1, static_cast<int>(bmp.size()), CV_8UC1, bmp.data());
  try {
    decode_image(bytes, "forged.bmp");
    FAIL() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("forged.bmp: OpenCV refuses the picture"), std::string::npos) << e.what();
  }
  const auto file = testing::temp_dir("forged-bmp") / "forged.bmp";
  std::ofstream(file, std::ios::binary) << bmp;
  EXPECT_THROW(read_image(file), IoError);
  EXPECT_THROW(read_image_or_first_frame(file), IoError);
  const std::string text = "not a picture";
  EXPECT_TRUE(decode_image(cv::Mat(1, static_cast<int>(text.size()), CV_8UC1, const_cast<char*>(text.data())), "t.txt")
                  .empty());
}

// Only the formats Redwood names are handed to OpenCV: these bytes (found by
// tests/fuzz/image_tensor_fuzz.cpp) carry DICOM's "DICM" at offset 128, and OpenCV's DICOM decoder
// (GDCM) failed an assert on them and aborted the process. Now they are no picture: empty.
TEST(ImageTensor, FormatsRedwoodDoesNotReadAreNoPicture) {
  const std::string dicom(
      "\x7e\x20\x20\x31\x31\x50\x60\x12\x04\x04\x00\xff\xd8\xff\xe0\x00\x10\x4a\x46\x49\x46\x00\x01\x01"
      "\x00\x00\x01\x00\x01\x00\x00\xff\xdb\x00\x43\x00\x1b\x12\x14\x17\x14\x11\x1b\x17\x16\x17\x1e\x1c"
      "\x1b\x20\x28\x42\x2b\x28\x25\x25\x28\x51\x3a\x3d\x31\x42\x60\x55\x65\x64\x5f\x55\xee\x5d\x5b\x6a"
      "\x78\x99\x81\x6a\x71\x90\x73\x5b\x5d\x85\xb5\x86\x90\x9e\xa3\xab\xad\xab\x67\x80\xbc\xc9\xba\xa6"
      "\xc7\x99\xa8\xab\xa4\xff\xc0\x00\x0b\x08\x00\x06\x00\x08\x01\x01\x11\x00\x79\x7a\xa6\xa7\xa8\xa9"
      "\xaa\xf8\xf9\xfa\xff\xda\x00\x08\x44\x49\x43\x4d\x28",
      133);
  EXPECT_TRUE(decode_image(cv::Mat(1, static_cast<int>(dicom.size()), CV_8UC1, const_cast<char*>(dicom.data())), "d")
                  .empty());
  const auto file = testing::temp_dir("dicom") / "scan.png";
  std::ofstream(file, std::ios::binary) << dicom;
  EXPECT_TRUE(read_image(file).empty());
  // The same signature behind a start that looks like a netpbm file but is not one to OpenCV
  // ("P6" with no space after it: its PxM decoder refuses it, so the next decoders are asked, and
  // GDCM took these bytes, found by the fuzzer on the GPU host, and aborted).
  std::string netpbm(
      "\x50\x36\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a"
      "\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a"
      "\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a"
      "\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x00\x00\x00\x03\x7a\x7a\x7a\x7a\x7a\x7a\x7a"
      "\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x7a\x0a\x37\x20\x31\x0a\x32\x20\x20"
      "\x20\x31\xf9\x0a\x32\x28\xe0\xdf\x44\x49\x43\x4d\xdf\x69\x6f\x73\x4c\x54\x5a",
      139);
  EXPECT_TRUE(decode_image(cv::Mat(1, static_cast<int>(netpbm.size()), CV_8UC1, netpbm.data()), "n").empty());
  netpbm[2] = ' ';  // a real netpbm start with DICOM's signature at 128: refused too
  EXPECT_TRUE(decode_image(cv::Mat(1, static_cast<int>(netpbm.size()), CV_8UC1, netpbm.data()), "n").empty());
  // A PNG still reads, from bytes and from a file.
  std::vector<std::uint8_t> png;
  ASSERT_TRUE(cv::imencode(".png", picture(), png));
  EXPECT_EQ(decode_image(cv::Mat(png), "p.png").size(), cv::Size(5, 3));
  const auto png_file = testing::temp_dir("png") / "p.png";
  std::ofstream(png_file, std::ios::binary)
      .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  EXPECT_EQ(read_image(png_file).size(), cv::Size(5, 3));
}

TEST(ImageTensor, WriteNormalizedReadsWindowsAndPicturesOfAnySize) {
  const float mean[3] = {0.5f, 0.25f, 0.125f}, std[3] = {0.5f, 2.f, 4.f};
  cv::Mat big(40, 64, CV_8UC3);
  cv::randu(big, 0, 256);
  for (const cv::Rect window : {cv::Rect(3, 5, 17, 9), cv::Rect(0, 0, 64, 40)}) {
    const cv::Mat pixels = big(window);
    std::vector<float> out(static_cast<std::size_t>(3 * window.area()), -1.f);
    write_normalized(pixels, 3, 1.f / 255, mean, std, true, out.data());
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < window.height; ++y) {
        for (int x = 0; x < window.width; ++x) {
          const float want = (pixels.at<cv::Vec3b>(y, x)[c] / 255.f - mean[c]) / std[c];
          EXPECT_NEAR(out[(static_cast<std::size_t>(c) * window.height + y) * window.width + x], want, 1e-5f)
              << "window " << window << " c " << c << " y " << y << " x " << x;
        }
      }
    }
  }
  cv::Mat grey;
  cv::cvtColor(big(cv::Rect(1, 2, 9, 7)), grey, cv::COLOR_BGR2GRAY);
  std::vector<float> out(static_cast<std::size_t>(grey.total()));
  write_normalized(grey, 1, 1.f / 255, mean, std, true, out.data());
  for (int y = 0; y < grey.rows; ++y) {
    for (int x = 0; x < grey.cols; ++x) {
      EXPECT_NEAR(out[static_cast<std::size_t>(y) * grey.cols + x], (grey.at<std::uint8_t>(y, x) / 255.f - mean[0]) / std[0], 1e-5f);
    }
  }
}

TEST(TextCrops, EachCropIsNormalizedAtTheStripHeightAndPaddedWithZeros) {
  TextCropOptions o;
  o.height = 3;
  o.max_width = 8;
  const Tensor t = crops_to_tensor({picture(), picture()}, o);
  ASSERT_EQ(t.shape(), (Shape{2, 3, 3, 8}));
  const float* v = t.data<float>();
  for (int k = 0; k < 2; ++k) {
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 3; ++y) {
        for (int x = 0; x < 8; ++x) {
          // The picture is already 3 rows high: width ceil(3 * 5 / 3) = 5, no resampling.
          const float want = x < 5 ? (static_cast<float>(10 * y + 3 * x + c) * o.scale - o.mean) / o.std : 0.f;
          EXPECT_NEAR(v[((k * 3 + c) * 3 + y) * 8 + x], want, 1e-6) << k << " " << c << " " << y << " " << x;
        }
      }
    }
  }
}

// rectify_quad against OpenCV's own warp of the same quad (cv::getPerspectiveTransform,
// cv::warpPerspective, INTER_CUBIC, BORDER_REPLICATE): the same bytes, a tall quad turned upright.
TEST(TextCrops, RectifiedCropsAreOpenCvsWarp) {
  cv::Mat frame(120, 160, CV_8UC3);
  cv::randu(frame, cv::Scalar::all(0), cv::Scalar::all(256));
  const std::vector<std::vector<PointF>> quads{{{10.4f, 20.2f}, {90.7f, 24.9f}, {88.1f, 41.3f}, {9.2f, 37.5f}},
                                               {{120.f, 10.f}, {135.5f, 11.f}, {133.f, 80.2f}, {118.5f, 79.f}},
                                               {{-5.f, 100.f}, {170.f, 98.f}, {171.f, 125.f}, {-6.f, 126.f}}};
  for (const auto& quad : quads) {
    const cv::Point2f q[4] = {{quad[0].x, quad[0].y}, {quad[1].x, quad[1].y}, {quad[2].x, quad[2].y}, {quad[3].x, quad[3].y}};
    const float w = std::max(cv::norm(q[0] - q[1]), cv::norm(q[2] - q[3]));
    const float h = std::max(cv::norm(q[0] - q[3]), cv::norm(q[1] - q[2]));
    const int cw = std::max(1, static_cast<int>(std::lround(w))), ch = std::max(1, static_cast<int>(std::lround(h)));
    const cv::Point2f dst[4] = {{0, 0}, {static_cast<float>(cw), 0}, {static_cast<float>(cw), static_cast<float>(ch)},
                                {0, static_cast<float>(ch)}};
    cv::Mat want;
    cv::warpPerspective(frame, want, cv::getPerspectiveTransform(q, dst), cv::Size(cw, ch), cv::INTER_CUBIC,
                        cv::BORDER_REPLICATE);
    if (want.rows >= 1.5 * want.cols) cv::rotate(want, want, cv::ROTATE_90_COUNTERCLOCKWISE);
    const cv::Mat got = rectify_quad(frame, quad);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0);
  }
}

// Options of each kind: NCHW RGB stretched; NHWC BGR letterboxed; grey.
struct PixelCase {
  Shape dims;
  ImageTensorOptions options;
};

std::vector<PixelCase> pixel_cases() {
  std::vector<PixelCase> cases;
  ImageTensorOptions rgb;
  rgb.mean = {0.485f, 0.456f, 0.406f};
  rgb.std = {0.229f, 0.224f, 0.225f};
  cases.push_back({{1, 3, 24, 40}, rgb});
  ImageTensorOptions bgr_letterbox;
  bgr_letterbox.rgb = false;
  bgr_letterbox.layout = ImageLayout::kNHWC;
  bgr_letterbox.resize = ResizeMode::kLetterbox;
  bgr_letterbox.pad_value = 114.f;
  bgr_letterbox.scale = 1.f;
  bgr_letterbox.mean = {127.5f, 127.5f, 127.5f};
  bgr_letterbox.std = {127.5f, 127.5f, 127.5f};
  cases.push_back({{1, 32, 32, 3}, bgr_letterbox});
  ImageTensorOptions grey;
  grey.mean = {0.5f, 0.f, 0.f};
  grey.std = {0.5f, 1.f, 1.f};
  cases.push_back({{1, 1, 20, 30}, grey});
  cases.push_back({{1, 3, 48, 64}, rgb});  // the picture's own size: no resize
  return cases;
}

cv::Mat random_picture(int rows, int cols) {
  cv::Mat m(rows, cols, CV_8UC3);
  cv::randu(m, 0, 256);
  return m;
}

TEST(ImagePixels, AreImageToTensorsPictureBeforeItIsNormalized) {
  const cv::Mat bgr = random_picture(48, 64);
  for (const PixelCase& k : pixel_cases()) {
    const ValueInfo vi = input(k.dims);
    ImageTransform tf_floats, tf_pixels;
    const Tensor floats = image_to_tensor(bgr, vi, k.options, &tf_floats);
    const Tensor px = image_to_pixels(bgr, vi, k.options, &tf_pixels);
    const PictureFit fit = fit_picture(bgr, vi, k.options);
    ASSERT_EQ(px.dtype(), DType::kU8);
    ASSERT_EQ(px.shape(), (Shape{1, fit.height, fit.width, fit.channels})) << shape_str(k.dims);
    EXPECT_EQ(fit.nchw, k.dims[1] == 3 || k.dims[1] == 1);
    EXPECT_EQ(tf_pixels.scale_x, tf_floats.scale_x);
    EXPECT_EQ(tf_pixels.scale_y, tf_floats.scale_y);
    EXPECT_EQ(tf_pixels.pad_x, tf_floats.pad_x);
    EXPECT_EQ(tf_pixels.pad_y, tf_floats.pad_y);
    EXPECT_EQ(tf_pixels.tensor_width, tf_floats.tensor_width);
    const PictureInput picture = picture_input(fit, k.options);
    ASSERT_EQ(picture_model_shape(px.shape(), picture), floats.shape());
    std::vector<float> normalized(static_cast<std::size_t>(floats.numel()));
    normalize_picture(px.data<std::uint8_t>(), 1, fit.height, fit.width, picture, normalized.data());
    const auto want = floats.to_float_vector();
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(normalized[i], want[i], 1e-6) << shape_str(k.dims) << " value " << i;
    }
  }
}

// y = 2x + 1 over the model's input: the CPU runner fed pixels (with their normalization) gives
// what it gives fed image_to_tensor's floats, for pictures of two sizes in one batch and padding.
TEST(ImagePixels, TheCpuRunnerGivesWhatImageToTensorsFloatsGive) {
  for (const PixelCase& k : pixel_cases()) {
    const auto dir = testing::temp_dir("pixels-runner");
    testing::OnnxBuilder b(13);
    std::vector<std::int64_t> dims(k.dims.begin(), k.dims.end());
    dims[0] = -1;
    b.input("x", onnx::TensorProto::FLOAT, dims, {"N"});
    b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
    b.initializer("one", Tensor::from_vector<float>({1}, {1.f}));
    b.node("Mul", {"x", "two"}, {"twice"}, "mul");
    b.node("Add", {"twice", "one"}, {"y"}, "add");
    b.output("y", onnx::TensorProto::FLOAT, dims, {"N"});
    b.save(dir / "affine.onnx");
    auto runner = make_cpu_runner(load_onnx(dir / "affine.onnx"));
    const ValueInfo vi = input(k.dims);
    const std::vector<cv::Mat> pictures{random_picture(48, 64), random_picture(30, 50)};
    InferBatch batch;
    batch.inputs.emplace_back();
    for (const cv::Mat& bgr : pictures) batch.inputs[0].push_back(image_to_pixels(bgr, vi, k.options));
    batch.picture = picture_input(fit_picture(pictures[0], vi, k.options), k.options);
    batch.run_rows = 4;
    std::promise<InferResult> promise;
    auto future = promise.get_future();
    runner->submit(std::move(batch), [&promise](InferResult& r) { promise.set_value(std::move(r)); });
    InferResult r = future.get();
    ASSERT_FALSE(r.error);
    for (std::size_t i = 0; i < pictures.size(); ++i) {
      const Tensor want = runner->run({{"x", image_to_tensor(pictures[i], vi, k.options)}}).at(0);
      const Tensor& got = r.outputs.at(0).at(i);
      ASSERT_EQ(got.shape(), want.shape());
      const auto g = got.to_float_vector(), w = want.to_float_vector();
      for (std::size_t j = 0; j < w.size(); ++j) ASSERT_NEAR(g[j], w[j], 2e-6) << shape_str(k.dims) << " picture " << i << " value " << j;
    }
  }
}

}  // namespace
}  // namespace redwood
