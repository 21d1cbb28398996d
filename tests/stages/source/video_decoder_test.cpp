// The video source's FFmpeg decoder: the same pixels, times and frame rate as OpenCV's
// VideoCapture (which decodes through the same libraries), rewinding to the first frame, the
// thread count it is given, and clear errors for files it cannot read.

#include "core/error.hpp"
#include "stages/picture_cv.hpp"
#include "stages/source/video_decoder.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <opencv2/videoio.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

namespace redwood {
namespace {

std::filesystem::path clip() { return testing::assets_dir() / "video" / "vtest-captions.avi"; }

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

TEST(VideoDecoder, SamePicturesTimesAndRateAsOpenCv) {
  if (!std::filesystem::exists(clip())) GTEST_SKIP() << clip() << " is missing: run scripts/setup.sh";
  cv::VideoCapture capture(clip().string());
  ASSERT_TRUE(capture.isOpened());
  VideoDecoder decoder(clip());
  EXPECT_DOUBLE_EQ(decoder.frame_rate(), capture.get(cv::CAP_PROP_FPS));
  EXPECT_EQ(decoder.declared_frames(), static_cast<std::int64_t>(capture.get(cv::CAP_PROP_FRAME_COUNT)));
  for (int i = 0; i < 40; ++i) {
    cv::Mat expected;
    Picture got;
    double pts = -1;
    ASSERT_TRUE(capture.read(expected));
    ASSERT_TRUE(decoder.read(got, pts)) << "frame " << i;
    ASSERT_EQ(got.channels, 3);
    ASSERT_EQ(as_mat(got).size(), expected.size());
    EXPECT_EQ(cv::norm(as_mat(got), expected, cv::NORM_INF), 0) << "frame " << i;
    EXPECT_NEAR(pts, capture.get(cv::CAP_PROP_POS_MSEC), 1e-6) << "frame " << i;
  }
}

TEST(VideoDecoder, ReadsToTheEndAndRewindsToTheFirstFrame) {
  if (!std::filesystem::exists(clip())) GTEST_SKIP() << clip() << " is missing: run scripts/setup.sh";
  VideoDecoder decoder(clip());
  Picture first, frame;
  double pts = 0;
  ASSERT_TRUE(decoder.read(first, pts));
  std::int64_t frames = 1;
  while (decoder.read(frame, pts)) ++frames;
  EXPECT_EQ(frames, decoder.declared_frames());
  EXPECT_EQ(decoder.corrupt_packets(), 0);
  EXPECT_FALSE(decoder.read(frame, pts));  // stays at the end
  decoder.rewind();
  ASSERT_TRUE(decoder.read(frame, pts));
  EXPECT_EQ(cv::norm(as_mat(frame), as_mat(first), cv::NORM_INF), 0);
  EXPECT_EQ(pts, 0.0);
}

TEST(VideoDecoder, SeeksToExactlyTheFrameAskedFor) {
  if (!std::filesystem::exists(clip())) GTEST_SKIP() << clip() << " is missing: run scripts/setup.sh";
  // OpenCV's pictures read in order are the reference; a seek lands on the key frame before the
  // target and decodes forward, so the pixels must be the same exactly.
  cv::VideoCapture capture(clip().string());
  std::vector<cv::Mat> in_order;
  for (int i = 0; i <= 400; ++i) {
    cv::Mat m;
    ASSERT_TRUE(capture.read(m));
    in_order.push_back(m.clone());
  }
  VideoDecoder decoder(clip());
  Picture frame;
  double pts = 0;
  for (int index : {397, 5, 0, 250, 123}) {
    ASSERT_TRUE(decoder.seek_frame(index));
    ASSERT_TRUE(decoder.read(frame, pts)) << index;
    EXPECT_EQ(cv::norm(as_mat(frame), in_order[static_cast<std::size_t>(index)], cv::NORM_INF), 0) << "frame " << index;
    EXPECT_NEAR(pts, index * 1000.0 / decoder.frame_rate(), 1e-6) << index;
    ASSERT_TRUE(decoder.read(frame, pts));
    EXPECT_EQ(cv::norm(as_mat(frame), in_order[static_cast<std::size_t>(index) + 1], cv::NORM_INF), 0) << "frame " << index + 1;
  }
  EXPECT_FALSE(decoder.seek_frame(-1));
}

TEST(VideoDecoder, DecodesOnTheThreadsItIsGiven) {
  if (!std::filesystem::exists(clip())) GTEST_SKIP() << clip() << " is missing: run scripts/setup.sh";
  Picture frame;
  double pts = 0;
  const int before = thread_count();
  {
    VideoDecoder one(clip());
    one.set_threads(1);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(one.read(frame, pts));
    EXPECT_EQ(thread_count(), before) << "one thread: decoding runs on the caller's";
    one.rewind();
    ASSERT_TRUE(one.read(frame, pts));
    EXPECT_EQ(thread_count(), before) << "a rewind starts no thread";
  }
  VideoDecoder four(clip());
  four.set_threads(4);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(four.read(frame, pts));
  EXPECT_GE(thread_count(), before + 3) << "four decoder threads (the caller's among them, or all four of FFmpeg's)";
}

TEST(VideoDecoder, AutomaticThreadsFollowThePictureSizeWithinTheSourcesShareOfCores) {
  EXPECT_EQ(automatic_decoder_threads(16, 1, 768, 576), 1) << "SD decodes on one thread";
  EXPECT_EQ(automatic_decoder_threads(16, 1, 1280, 720), 1);
  EXPECT_EQ(automatic_decoder_threads(16, 1, 1920, 1080), 3) << "2.07 megapixels: three";
  EXPECT_EQ(automatic_decoder_threads(16, 1, 3840, 2160), 9);
  EXPECT_EQ(automatic_decoder_threads(16, 4, 3840, 2160), 4) << "at most the source's share of the cores";
  EXPECT_EQ(automatic_decoder_threads(16, 100, 3840, 2160), 1) << "at least one";
  EXPECT_EQ(automatic_decoder_threads(0, 0, 3840, 2160), 1) << "no cores known, no source counted";
  EXPECT_EQ(automatic_decoder_threads(16, 1, 0, 0), 1) << "a size the header lacks counts as one megapixel";
  if (!std::filesystem::exists(clip())) GTEST_SKIP() << clip() << " is missing: run scripts/setup.sh";
  VideoDecoder decoder(clip());
  EXPECT_EQ(decoder.width(), 768);
  EXPECT_EQ(decoder.height(), 576);
}

TEST(VideoDecoder, FilesItCannotReadAreIoErrorsNamingTheFile) {
  const auto dir = testing::temp_dir("video_decoder");
  const auto junk = dir / "junk.avi";
  std::ofstream(junk) << std::string(4096, 'x');
  try {
    VideoDecoder decoder(junk);
    FAIL() << "opened a file of 'x'";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("video '" + junk.string() + "': FFmpeg cannot open it"), std::string::npos) << e.what();
  }
  EXPECT_THROW(VideoDecoder(dir / "missing.avi"), IoError);
  // A picture is a file FFmpeg opens, but a still PNG has a video stream of one frame: it reads.
  // Audio only has no video stream at all.
  if (std::system("command -v ffmpeg >/dev/null 2>&1") != 0) GTEST_SKIP() << "ffmpeg not found";
  const auto audio = dir / "tone.wav";
  ASSERT_EQ(std::system(("ffmpeg -nostdin -loglevel error -y -f lavfi -i sine=d=0.1 '" + audio.string() + "'").c_str()), 0);
  try {
    VideoDecoder decoder(audio);
    FAIL() << "opened a file with no video";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("has no video stream"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace redwood
