# The Packrat node agent on Debian 12: a production image in two stages.
#
#   scripts/check_image.sh                      # builds it with buildah and checks it (no Docker)
#   docker build -t packrat:0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run --rm -p 8080:8080 -p 8082:8082 --shm-size=2g packrat:0.1.0
#
# Stage `build` has the toolchain: it installs the build packages, builds the four binaries in
# Release (no tests) and generates the demo models with Debian's python3-torch. The final stage
# starts again from the base and holds only what serving needs: packrat-agent, packrat-runtime,
# packrat and packrat-forward (the application pods' sidecar) in /opt/packrat/bin, libtorch's
# runtime libraries, OpenBLAS (OpenMP), yaml-cpp, simdjson, prometheus-cpp core, libcgroup,
# grpc++ and protobuf (the gRPC front end) and curl (HEALTHCHECK, exec probes); the demo models
# in /opt/packrat/models and a default config in /etc/packrat/packrat.yaml (deploy/config/).
# No compiler, no Python, no sources.
# Every build package is also in scripts/packages.txt (check_image.sh checks that).
#
# Runs as the unprivileged user packrat (uid 10001) by default. What it needs from the host:
#   - Shared memory: agent and runtimes exchange tensors through /dev/shm segments; Docker's
#     default 64 MiB is too small for image batches (--shm-size, or a memory emptyDir in k8s).
#   - CPU pinning: sched_setaffinity on its own children needs no privilege, so the non-root
#     default works wherever the container's cpuset is the set of cores it may use.
#   - cpuset cgroups per runtime (issue 4): the agent creates child cgroups of its own cgroup.
#     That needs the host's cgroup hierarchy mounted read-write at /sys/fs/cgroup (a container
#     normally sees it read-only) and a user allowed to write there: uid 0 without any added
#     capability is enough, since root owns those files. The DaemonSet in deploy/ does exactly
#     that (runAsUser: 0, capabilities dropped). Without a writable hierarchy the agent falls
#     back to sched_setaffinity and says so once in its log.
#   - The default config also listens on the Unix socket /run/packrat/agent.sock (the folder
#     exists in the image, writable by uid 10001; in k8s a hostPath shared with the sidecars).
#   - HEALTHCHECK asks /v2/health/live on 127.0.0.1:8080: change it along with server.http.
#     It is kept only in the Docker image format (buildah/podman: --format docker).
#
# Build arguments: BASE_IMAGE (scripts/check_image.sh builds a local Debian 12 base so that
# nothing is pulled), VERSION, REVISION, SOURCE, LICENSES (the OCI labels).
# Host caches: when /mnt (ccache) and /var/cache/apt/archives are bind mounts (buildah bud -v,
# as check_image.sh does), the build uses the host's ccache and .deb files and leaves them there.

ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# With the host's archive folder bind-mounted, debian:bookworm-slim's docker-clean hook would
# delete the host's .deb files: drop it (this stage is thrown away); download as root there.
RUN set -eu; \
    if mountpoint -q /var/cache/apt/archives; then rm -f /etc/apt/apt.conf.d/docker-clean; fi; \
    apt-get update -qq; \
    apt-get install -y -qq --no-install-recommends -o APT::Sandbox::User=root \
      g++ cmake ninja-build ccache pkg-config \
      libtorch-dev libopenblas0-openmp libboost-dev libsimdjson-dev libyaml-cpp-dev \
      prometheus-cpp-dev libcgroup-dev libcli11-dev \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
      python3-torch python3-torchvision >/dev/null

# ccache as scripts/ccache_env.sh sets it (CCACHE_BASEDIR: keys relative to the source folder;
# CCACHE_IGNOREHEADERS: linux-libc-dev's headers, often newer here than on the host, out of the
# manifests), so that a host build of the same sources and this one share cached objects. The
# cache is /mnt, an empty folder of the base: check_image.sh bind-mounts the host's ccache there,
# and as every RUN of the build gets that mount, a folder made for it would stay in the image.
ENV CCACHE_DIR=/mnt \
    CCACHE_BASEDIR=/src \
    CCACHE_IGNOREHEADERS=/usr/include/linux:/usr/include/asm-generic:/usr/include/x86_64-linux-gnu/asm:/usr/include/misc:/usr/include/mtd:/usr/include/rdma:/usr/include/sound:/usr/include/video:/usr/include/xen
WORKDIR /src
COPY . /src
RUN set -eu; \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPACKRAT_BUILD_TESTS=OFF >/dev/null; \
    cmake --build build -j "$(nproc)" \
      --target packrat-agent packrat-runtime packrat packrat-forward; \
    /usr/bin/python3 scripts/make_models.py --out models; \
    rm -f models/not_a_model.pt

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=unknown
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="packrat" \
      org.opencontainers.image.description="Packrat node agent: CPU inference serving with thin, pinned libtorch runtimes (KServe v2 REST), its runtime, CLI and packrat-forward sidecar" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="${LICENSES}"

# libtorch1.13 is libtorch-dev's runtime library (its Depends bring OpenCV, FFmpeg, oneDNN, ...,
# which libtorch_cpu.so links); libopenblas0-openmp provides libblas.so.3/liblapack.so.3 in
# place of the reference BLAS (~10x slower). The rest are what `ldd` shows for the binaries.
# With the host's archive folder bind-mounted, its .deb files stay where they are (no docker-clean
# hook, no apt-get clean) and are not in the image anyway; else they are removed.
RUN set -eu; \
    hook=/etc/apt/apt.conf.d/docker-clean; host_debs=no; \
    if mountpoint -q /var/cache/apt/archives; then host_debs=yes; fi; \
    if [ "$host_debs" = yes ] && [ -e "$hook" ]; then mv "$hook" /tmp/docker-clean; fi; \
    apt-get update -qq; \
    apt-get install -y -qq --no-install-recommends -o APT::Sandbox::User=root \
      libopenblas0-openmp libtorch1.13 libyaml-cpp0.7 libsimdjson14 \
      libprometheus-cpp-core1.0 libcgroup2 libgrpc++1.51 libprotobuf32 curl >/dev/null; \
    if [ -e /tmp/docker-clean ]; then mv /tmp/docker-clean "$hook"; fi; \
    if [ "$host_debs" = no ]; then apt-get clean; fi; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log; \
    useradd --system --uid 10001 --user-group --home-dir /var/lib/packrat --no-create-home \
      --shell /usr/sbin/nologin packrat; \
    install -d -o packrat -g packrat /var/lib/packrat /var/lib/packrat/profiles /run/packrat; \
    install -d /opt/packrat/bin /opt/packrat/models /etc/packrat; \
    rm -f /run/adduser

COPY --from=build /src/build/bin/packrat-agent /src/build/bin/packrat-runtime \
     /src/build/bin/packrat /src/build/bin/packrat-forward /opt/packrat/bin/
COPY --from=build /src/models/ /opt/packrat/models/
COPY deploy/config/packrat.yaml /etc/packrat/packrat.yaml

ENV PATH=/opt/packrat/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
WORKDIR /var/lib/packrat
USER 10001:10001
# http (KServe v2), management (loopback only in the default config), metrics (/metrics),
# grpc (KServe v2 gRPC; loopback unless server.grpc says otherwise)
EXPOSE 8080 8081 8082 8001
# Live as soon as the listeners are up, also while the first start profiles (which can take
# minutes; readiness stays false meanwhile and is the orchestrator's business).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["curl", "-fsS", "-o", "/dev/null", "--max-time", "4", "http://127.0.0.1:8080/v2/health/live"]
# SIGTERM: readiness false, stop accepting, drain in-flight requests, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/packrat/bin/packrat-agent"]
CMD ["--config", "/etc/packrat/packrat.yaml"]
