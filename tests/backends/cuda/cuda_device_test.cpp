// The device layer: CUDA errors name the call, streams and events, device tensors and copies.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_error.hpp"
#include "backends/cuda/device_tensor.hpp"
#include "backends/cuda/stream.hpp"
#include "gpu_test_support.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

namespace redwood::cuda {
namespace {

TEST(CudaCheck, ErrorNamesTheCallAndTheRuntimesReason) {
  // No device needed: cudaErrorInvalidValue is a plain code.
  try {
    RW_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "RW_CUDA_CHECK did not throw";
  } catch (const CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_device_test.cpp"), std::string::npos) << what;
    EXPECT_NE(what.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << what;
  }
  EXPECT_NO_THROW(RW_CUDA_CHECK(cudaSuccess));
}

TEST(CudaCheck, PrecisionNamesRoundTrip) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16}) {
    EXPECT_EQ(parse_precision(precision_name(p)), p);
  }
  EXPECT_THROW(parse_precision("fp8"), InvalidArgument);
}

TEST(CudaDevice, TensorRoundTripsThroughTheDevice) {
  RW_SKIP_WITHOUT_GPU();
  const Tensor host = redwood::testing::random_tensor(DType::kF32, {3, 5, 7}, -2, 2, 7);
  Stream stream;
  const Tensor dev = to_device(host, stream.get());
  EXPECT_EQ(dev.device(), Device::kCuda);
  EXPECT_EQ(dev.shape(), host.shape());
  EXPECT_TRUE(dev.owns_data());
  const Tensor back = to_host(dev, stream.get());
  EXPECT_EQ(back.device(), Device::kCpu);
  redwood::testing::expect_close(back, host, 0, 0);
  EXPECT_THROW(to_host(host), InvalidArgument);
}

TEST(CudaDevice, EventsTimeWorkOnAStream) {
  RW_SKIP_WITHOUT_GPU();
  Stream stream;
  Event start(true), stop(true);
  DeviceBuffer a(64 << 20), b(64 << 20);
  start.record(stream.get());
  RW_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, a.bytes(), stream.get()));
  RW_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice, stream.get()));
  stop.record(stream.get());
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_GT(stop.elapsed_ms_since(start), 0.0f);
  // Another stream waits for the event on the device, then sees the copy.
  Stream other;
  stop.wait_on(other.get());
  unsigned char byte = 0;
  RW_CUDA_CHECK(cudaMemcpyAsync(&byte, static_cast<char*>(b.data()) + 12345, 1, cudaMemcpyDeviceToHost, other.get()));
  other.synchronize();
  EXPECT_EQ(byte, 1);
}

TEST(CudaDevice, BuffersComeFromTheDeviceResource) {
  RW_SKIP_WITHOUT_GPU();
  const auto before = default_device_resource().stats();
  {
    DeviceBuffer buffer(1 << 20);
    EXPECT_NE(buffer.data(), nullptr);
    EXPECT_EQ(default_device_resource().stats().bytes_in_use, before.bytes_in_use + (1u << 20));
    DeviceBuffer moved = std::move(buffer);
    EXPECT_EQ(buffer.data(), nullptr);
  }
  EXPECT_EQ(default_device_resource().stats().bytes_in_use, before.bytes_in_use);
}

TEST(CudaDevice, AFailedAllocationIsReportedWithTheCall) {
  RW_SKIP_WITHOUT_GPU();
  void* p = nullptr;
  try {
    RW_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 52));  // 4 PiB: no GPU has that
    FAIL() << "a 4 PiB cudaMalloc succeeded";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc(&p, std::size_t{1} << 52)"), std::string::npos) << e.what();
  }
  cudaGetLastError();  // clear the (non-sticky) error
}

}  // namespace
}  // namespace redwood::cuda
