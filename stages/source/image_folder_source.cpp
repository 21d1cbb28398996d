// A folder of pictures, read in name order, one frame each (never dropped).
//
//   - name: stills
//     type: images
//     path: ../data/pictures
//     loop: false

#include "stages/frame_memory.hpp"
#include "stages/picture_cv.hpp"
#include "stages/preprocess/image_tensor.hpp"
#include "stages/source/source.hpp"

#include <algorithm>

namespace redwood {
namespace {

bool is_picture(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".tif" || ext == ".tiff" ||
         ext == ".webp" || ext == ".ppm" || ext == ".pgm";
}

class ImageFolderSource final : public Source {
 public:
  explicit ImageFolderSource(Params& p) : loop_(p.get<bool>("loop", false)) {
    const auto folder = p.existing_file("path");
    if (!std::filesystem::is_directory(folder)) p.fail("path", "not a folder");
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.is_regular_file() && is_picture(entry.path())) files_.push_back(entry.path());
    }
    std::sort(files_.begin(), files_.end());
    if (files_.empty()) p.fail("path", "the folder holds no picture (png, jpg, bmp, tif, webp, ppm)");
  }

  bool live() const override { return false; }

  ReadStatus read(Picture& image, double& pts_ms, FrameMemory* memory, const std::atomic<bool>& stop) override {
    while (!stop) {
      if (next_ >= files_.size()) {
        if (!loop_) return ReadStatus::kEnd;
        next_ = 0;
      }
      pts_ms = static_cast<double>(count_);
      // Copied into a picture from `memory`, so that it lands in the caller's pool. A file that
      // is no picture is skipped; one OpenCV refuses (a forged header) is an IoError.
      const cv::Mat decoded = read_image(files_[next_++]);
      if (!decoded.empty()) {
        image = frame_picture(memory, decoded.cols, decoded.rows, decoded.channels());
        decoded.copyTo(as_mat(image));
        ++count_;
        return ReadStatus::kFrame;
      }
    }
    return ReadStatus::kEnd;
  }

 private:
  std::vector<std::filesystem::path> files_;
  bool loop_;
  std::size_t next_ = 0;
  std::int64_t count_ = 0;
};

}  // namespace

RW_REGISTER_SOURCE("images", ImageFolderSource);

}  // namespace redwood
