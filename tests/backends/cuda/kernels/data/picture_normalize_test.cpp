// The picture kernel (kernels/data/picture_normalize.cu) against core's normalize_picture, the CPU
// runner's: the same bits, NCHW and NHWC, three channels and grey, one row and several, extents
// that fill no whole block. The model runner's picture batches: cuda_model_runner_test.cpp.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/stream.hpp"
#include "core/picture_input.hpp"
#include "gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace redwood::cuda {
namespace {

TEST(PictureNormalizeKernel, GivesTheHostsBitsInEveryLayout) {
  RW_SKIP_WITHOUT_GPU();
  Stream stream;
  for (int channels : {3, 1}) {
    for (bool nchw : {true, false}) {
      for (const Shape& shape : {Shape{1, 7, 13, channels}, Shape{5, 33, 65, channels}, Shape{3, 320, 416, channels}}) {
        const PictureInput picture =
            PictureInput::from_mean_std(1.f / 255, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, channels, nchw);
        const Tensor px = redwood::testing::random_tensor(DType::kU8, shape, 0, 255, static_cast<std::uint32_t>(shape[1]));
        Tensor want = Tensor::empty(DType::kF32, picture_model_shape(shape, picture));
        normalize_picture(px.data<std::uint8_t>(), shape[0], shape[1], shape[2], picture, want.data<float>());

        const Tensor x = to_device(px, stream.get());
        Tensor y = device_empty(DType::kF32, want.shape());
        kernels::PictureNormalize p;
        p.rows = shape[0];
        p.height = static_cast<int>(shape[1]);
        p.width = static_cast<int>(shape[2]);
        p.channels = channels;
        p.nchw = nchw;
        std::memcpy(p.alpha, picture.alpha.data(), sizeof p.alpha);
        std::memcpy(p.beta, picture.beta.data(), sizeof p.beta);
        kernels::launch_picture_normalize(p, static_cast<const std::uint8_t*>(x.raw_data()), static_cast<float*>(y.raw_data()),
                                          stream.get());
        const Tensor got = to_host(y, stream.get());
        ASSERT_EQ(got.shape(), want.shape());
        EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0)
            << shape_str(shape) << (nchw ? " NCHW" : " NHWC") << ": not the host's bits";
      }
    }
  }
}

}  // namespace
}  // namespace redwood::cuda
