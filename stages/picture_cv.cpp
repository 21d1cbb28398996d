#include "stages/picture_cv.hpp"

#include "core/error.hpp"

#include <memory>

namespace redwood {

Picture from_mat(cv::Mat mat) {
  if (mat.empty()) return {};
  RW_EXPECTS(mat.dims == 2 && mat.depth() == CV_8U, InvalidArgument,
             "a picture is two-dimensional 8-bit pixels, not a {}-dimensional Mat of type {}", mat.dims,
             cv::typeToString(mat.type()));
  Picture p;
  p.width = mat.cols;
  p.height = mat.rows;
  p.channels = mat.channels();
  p.stride = mat.step[0];
  p.data = mat.data;
  if (mat.u != nullptr) {
    auto keep = std::make_shared<cv::Mat>(std::move(mat));
    p.owner = std::shared_ptr<void>(keep, p.data);
  }
  return p;
}

}  // namespace redwood
