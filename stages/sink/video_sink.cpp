// video sink: the frames with their detections drawn (boxes or quads, text, keypoints), written
// as a video. One file per stream: "{stream}" in the path is replaced by the stream's name.
//
//   - name: annotated
//     type: video
//     path: out/{stream}.avi
//     fps: 10
//     fourcc: MJPG

#include "stages/sink/sink.hpp"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

namespace redwood {
namespace {

class VideoSink final : public Sink {
 public:
  explicit VideoSink(SinkArgs& a) : streams_(a.stream_names) {
    Params& p = a.params;
    pattern_ = p.origin().resolve(p.require<std::string>("path")).string();
    fps_ = p.get<double>("fps", 10.0);
    if (!(fps_ > 0 && fps_ <= 1000)) p.fail("fps", "must be above 0 and at most 1000");
    const auto fourcc = p.get<std::string>("fourcc", "MJPG");
    if (fourcc.size() != 4) p.fail("fourcc", "expected four characters such as MJPG");
    fourcc_ = cv::VideoWriter::fourcc(fourcc[0], fourcc[1], fourcc[2], fourcc[3]);
    if (streams_.size() > 1 && pattern_.find("{stream}") == std::string::npos) {
      p.fail("path", "several streams need '{stream}' in the path");
    }
  }

  void write(const Frame& f, double) override {
    auto& w = writers_[f.stream];
    if (!w.isOpened()) {
      std::string path = pattern_;
      if (auto at = path.find("{stream}"); at != std::string::npos) path.replace(at, 8, f.stream_name);
      std::filesystem::path parent = std::filesystem::path(path).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent);
      if (!w.open(path, fourcc_, fps_, f.image.size())) throw IoError(fmt::format("video sink: cannot write '{}'", path));
    }
    cv::Mat canvas = f.image.clone();
    for (const Detection& d : f.detections) {
      const cv::Scalar colour = d.kind == "face" ? cv::Scalar(0, 255, 0) : cv::Scalar(0, 0, 255);
      if (d.quad.size() == 4) {
        std::vector<cv::Point> q(d.quad.begin(), d.quad.end());
        cv::polylines(canvas, q, true, colour, 2);
      } else {
        cv::rectangle(canvas, d.box, colour, 2);
      }
      for (const auto& k : d.keypoints) cv::circle(canvas, k, 2, {255, 0, 0}, -1);
      if (!d.text.empty()) cv::putText(canvas, d.text, d.box.tl() + cv::Point2f(0, -4), cv::FONT_HERSHEY_SIMPLEX, 0.6, colour, 2);
    }
    w.write(canvas);
    ++written_;
  }

  void close() override {
    for (auto& [_, w] : writers_) w.release();
  }

 private:
  std::vector<std::string> streams_;
  std::string pattern_;
  double fps_ = 10;
  int fourcc_ = 0;
  std::map<int, cv::VideoWriter> writers_;
};

}  // namespace

RW_REGISTER_SINK("video", VideoSink);

}  // namespace redwood
