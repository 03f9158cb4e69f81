# attnscope-server image: Debian 12, built from source in a build stage; the
# run stage holds only the runtime libraries, the two binaries and the bundled
# model, and runs as a non-root user.
#
#   scripts/build-image.sh                 # podman; makes a Debian base with debootstrap
#   podman run --rm -p 127.0.0.1:50051:50051 -p 127.0.0.1:9464:9464 localhost/attnscope:latest
#
# More models: mount Hugging Face checkpoint directories under /models and
# name them, e.g. `-v ~/models/gpt2:/models/gpt2:ro ... --model gpt2=/models/gpt2`
# (arguments after the image name replace the default arguments below).
ARG BASE_IMAGE=debian:12

FROM ${BASE_IMAGE} AS build
ARG JOBS=2
# The build dependencies of scripts/setup.sh without the test-only tools
# (prometheus, chromium, xvfb, googletest, benchmark). Qt is needed only
# because the project's CMake configures the dashboard too; it is not built.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libtorch-dev libopenblas0-openmp libdnnl-dev \
      libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev grpc-proto \
      prometheus-cpp-dev nlohmann-json3-dev libpcre2-dev \
      qt6-base-dev qt6-charts-dev libqt6opengl6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY proto proto
COPY service service
COPY client client
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DATTNSCOPE_BUILD_TESTS=OFF -DATTNSCOPE_BUILD_BENCH=OFF \
 && cmake --build build --target attnscope-server attnscope -- -j "${JOBS}" \
 && strip build/bin/attnscope-server build/bin/attnscope build/bin/attnscope-engine
COPY deploy/image/runtime-packages.sh /usr/local/bin/
RUN runtime-packages.sh build/bin/attnscope-server build/bin/attnscope build/bin/attnscope-engine \
      > /runtime-packages.txt \
 && cat /runtime-packages.txt

FROM ${BASE_IMAGE}
COPY --from=build /runtime-packages.txt /tmp/
# Exactly the packages holding the libraries the binaries load (and what
# those depend on); OpenBLAS-OpenMP is the BLAS libtorch runs on.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $(cat /tmp/runtime-packages.txt) libopenblas0-openmp \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin attnscope \
 && mkdir -p /models
# attnscope runs attnscope-engine from its own directory.
COPY --from=build /src/build/bin/attnscope-server /src/build/bin/attnscope \
     /src/build/bin/attnscope-engine /usr/local/bin/
COPY models/tiny-gpt2 /opt/attnscope/models/tiny-gpt2
COPY deploy/image/entrypoint.sh /usr/local/bin/attnscope-entrypoint
# The bundled model is the default model; more are mounted under /models.
ENV ATTNSCOPE_MODEL_DIR=/opt/attnscope/models/tiny-gpt2
USER 10001:10001
EXPOSE 50051 9464
# grpc.health.v1 through the CLI (Debian has no grpc_health_probe).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["attnscope", "--server", "127.0.0.1:50051", "health", "--timeout", "3"]
ENTRYPOINT ["attnscope-entrypoint"]
CMD ["--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9464"]
