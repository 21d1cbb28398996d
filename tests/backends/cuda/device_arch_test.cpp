// Whether this build's GPU code runs on a device (backends/cuda/device_arch.hpp): the rules on
// CMAKE_CUDA_ARCHITECTURES and the error message run everywhere (host only, as in CI); on a GPU,
// the runtime's answer for the device this build was made for.

#include "backends/cuda/device_arch.hpp"
#include "gpu_test_support.hpp"

#include <gtest/gtest.h>

namespace redwood::cuda {
namespace {

TEST(CudaArchitectures, SassRunsOnLaterMinorsPtxOnLaterGpus) {
  EXPECT_EQ(architecture_fit("90", 9, 0), ArchFit::kRuns);
  EXPECT_EQ(architecture_fit("90", 10, 0), ArchFit::kRuns);      // PTX, compiled by the driver
  EXPECT_EQ(architecture_fit("90", 8, 6), ArchFit::kNoCode);     // older than anything built
  EXPECT_EQ(architecture_fit("90-real", 10, 0), ArchFit::kNoCode);  // machine code only
  EXPECT_EQ(architecture_fit("86-real", 8, 9), ArchFit::kRuns);  // sm_86 code runs on sm_89
  EXPECT_EQ(architecture_fit("86-real", 8, 0), ArchFit::kNoCode);
  EXPECT_EQ(architecture_fit("75-virtual", 8, 6), ArchFit::kRuns);
  EXPECT_EQ(architecture_fit("75-virtual", 7, 0), ArchFit::kNoCode);
  EXPECT_EQ(architecture_fit("90a", 9, 0), ArchFit::kRuns);
  EXPECT_EQ(architecture_fit("90a", 10, 0), ArchFit::kNoCode);   // arch-specific: this GPU only
  EXPECT_EQ(architecture_fit("80-real;90", 8, 6), ArchFit::kRuns);
  EXPECT_EQ(architecture_fit("80-real,90-real", 7, 5), ArchFit::kNoCode);
  EXPECT_EQ(architecture_fit(" 61 ; 70-real ", 6, 1), ArchFit::kRuns);
}

TEST(CudaArchitectures, WhatTheRuleCannotReadIsLeftToTheRuntime) {
  for (const char* list : {"all", "all-major", "native", "", "sm_90", "90-reall"}) {
    EXPECT_EQ(architecture_fit(list, 9, 0), ArchFit::kUnknown) << list;
  }
  DeviceInfo gpu;
  gpu.name = "Some GPU";
  gpu.compute_major = 7;
  gpu.compute_minor = 5;
  EXPECT_EQ(architecture_problem(gpu, "native", KernelImage::kNotAsked), "");
  EXPECT_NE(architecture_problem(gpu, "native", KernelImage::kMissing), "");
}

TEST(CudaArchitectures, TheErrorNamesTheGpuItsArchitectureAndWhatWasBuilt) {
  DeviceInfo gpu;
  gpu.index = 0;
  gpu.name = "NVIDIA GeForce GTX 1080";
  gpu.compute_major = 6;
  gpu.compute_minor = 1;
  const std::string why = architecture_problem(gpu, "80-real;90", KernelImage::kNotAsked);
  EXPECT_EQ(why,
            "GPU 0 (NVIDIA GeForce GTX 1080) is sm_61, and this Redwood carries CUDA code only for sm_80, sm_90, "
            "compute_90 (PTX) (CMAKE_CUDA_ARCHITECTURES=80-real;90): rebuild with -DCMAKE_CUDA_ARCHITECTURES=61 "
            "(or native)");
  // The runtime's answer wins over the rule, both ways.
  gpu.compute_major = 9;
  gpu.compute_minor = 0;
  EXPECT_EQ(architecture_problem(gpu, "90", KernelImage::kNotAsked), "");
  EXPECT_NE(architecture_problem(gpu, "90", KernelImage::kMissing).find("is sm_90"), std::string::npos);
  gpu.compute_major = 8;
  EXPECT_NE(architecture_problem(gpu, "90", KernelImage::kNotAsked), "");
  EXPECT_EQ(architecture_problem(gpu, "90", KernelImage::kPresent), "");
}

TEST(CudaArchitectures, ThisBuildSaysWhatItWasBuiltFor) {
  EXPECT_FALSE(built_cuda_architectures().empty());
}

TEST(CudaArchitectures, TheRuntimeHasAnImageForThisGpu) {
  RW_SKIP_WITHOUT_GPU();
  const ProbeResult probe = probe_devices();
  const DeviceInfo& gpu = probe.devices.at(0);
  EXPECT_EQ(probe_kernel_image(gpu.index), KernelImage::kPresent)
      << gpu.name << " sm_" << gpu.compute_major << gpu.compute_minor << ", built for " << built_cuda_architectures();
  EXPECT_EQ(architecture_problem(gpu), "");
  // The rule agrees with the runtime on this GPU.
  EXPECT_NE(architecture_fit(built_cuda_architectures(), gpu.compute_major, gpu.compute_minor), ArchFit::kNoCode);
}

}  // namespace
}  // namespace redwood::cuda
