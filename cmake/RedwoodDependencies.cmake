# Every dependency comes from the system's (Debian's) packages; nothing is vendored.
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs videoio)
find_package(dnnl REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
# The metrics endpoint's HTTP server (pipelines/metrics_server.cpp).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# The video source's decoder (stages/source/video_decoder.cpp): FFmpeg's libraries, which OpenCV's
# videoio also links, used directly to choose each decoder's thread count.
pkg_check_modules(FFMPEG REQUIRED IMPORTED_TARGET libavformat libavcodec libswscale libavutil)
find_path(CPPZMQ_INCLUDE_DIR zmq.hpp REQUIRED)
# The NATS JetStream sink (stages/sink/nats_sink.cpp), optional: without libnats-dev the sink is
# not built and `type: nats` fails at load saying so (stages/sink/nats_sink_absent.cpp).
pkg_check_modules(NATS IMPORTED_TARGET libnats)
set(REDWOOD_HAVE_NATS ${NATS_FOUND})

set(REDWOOD_HAVE_CUDA OFF)
if(REDWOOD_WITH_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # sm_90 machine code plus PTX, so newer GPUs can JIT it.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know nvcc's C++20 flag
    set(REDWOOD_HAVE_CUDA ON)
    message(STATUS "Redwood: CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(STATUS "Redwood: no CUDA toolkit found; backends/cuda is not built")
  endif()
endif()
