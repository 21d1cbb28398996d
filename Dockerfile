# Redwood's launcher in a container, for `redwood deploy k8s` (docs/deploy.md). Two stages on
# Debian 12: `build` installs the packages scripts/setup.sh installs for a build (not those only
# the tests and the asset scripts need) and builds the launcher in Release; the runtime stage
# gets only the shared libraries the launcher links (found with ldd and dpkg -S in the build
# stage, so the list cannot drift from the build), the launcher and configs/.
#
# Models and videos are NOT in the image (assets/ is in .dockerignore): the manifests mount them
# read-only at /assets from a volume, where the shipped configs' "../assets/..." paths lead from
# /config. The user is `redwood`, uid/gid 10001, the uid the manifests run as.
#
#   docker build -t registry.example.com/redwood:0.1 .                       # CPU
#   docker build --build-arg WITH_CUDA=1 -t registry.example.com/redwood:0.1-cuda .
#
# WITH_CUDA=1 adds Debian's non-free nvidia-cuda-toolkit to the build (backends/cuda is built when
# CMake finds nvcc; its runtime libraries follow through ldd); the driver (libcuda) comes from the
# node through the NVIDIA container toolkit.

ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS build
ARG WITH_CUDA=0
ARG DEBIAN_FRONTEND=noninteractive
RUN if [ "$WITH_CUDA" = 1 ]; then \
      sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' /etc/apt/sources.list.d/debian.sources; \
    fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      libtbb-dev libopencv-dev libdnnl-dev ocl-icd-opencl-dev libzmq3-dev cppzmq-dev libspdlog-dev libfmt-dev \
      libavformat-dev libavcodec-dev libswscale-dev libavutil-dev \
      libyaml-cpp-dev libonnx-dev libprotobuf-dev protobuf-compiler nlohmann-json3-dev libcli11-dev \
      libcpp-httplib-dev libglpk-dev libnats-dev \
 && if [ "$WITH_CUDA" = 1 ]; then apt-get install -y --no-install-recommends nvidia-cuda-toolkit; fi \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREDWOOD_BUILD_TESTS=OFF \
 && cmake --build /build --target redwood \
 && install -D -m 0755 /build/bin/redwood /out/usr/local/bin/redwood
# The Debian packages that own the libraries the launcher loads: the runtime stage installs these.
RUN ldd /out/usr/local/bin/redwood | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u \
  | while read -r lib; do \
      real=$(readlink -f "$lib"); \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || true; \
    done | cut -d: -f1 | sort -u > /out/runtime-packages.txt \
 && test -s /out/runtime-packages.txt && cat /out/runtime-packages.txt

FROM ${DEBIAN_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
COPY --from=build /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list.d/debian.sources
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --gid 10001 redwood \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin redwood \
 && mkdir -p /config /assets /opt/redwood
COPY --from=build /out/usr/local/bin/redwood /usr/local/bin/redwood
COPY configs /opt/redwood/configs
WORKDIR /opt/redwood
USER 10001:10001
# The plan cache (core/cache_dir.cpp) in /tmp: the pods' root filesystem is read-only.
ENV REDWOOD_CACHE_DIR=/tmp/redwood-cache HOME=/tmp
EXPOSE 9464
CMD ["redwood", "--help"]
