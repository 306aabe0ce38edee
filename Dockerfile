# The Packrat node agent on Debian 12: a production image, and the sidecar's own small image.
#
#   scripts/check_image.sh                      # builds both with buildah and checks them (no Docker)
#   docker build -t packrat:0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#   docker build -t packrat-forward:0.1.0 --target forwarder .
#   docker run --rm -p 8080:8080 -p 8082:8082 --shm-size=2g packrat:0.1.0
#
# Stage `build` has the toolchain: it installs the build packages, builds the four binaries in
# Release (no tests) and generates the demo models with Debian's python3-torch. It then copies,
# with scripts/copy_closure.sh, what each final stage needs into a root folder of its own: the
# binaries and the shared libraries the loader resolves for them, nothing a package would drag in
# beside them. Debian's libtorch1.13 package depends on OpenCV, FFmpeg, GDAL and Qt (~850 MiB
# installed) because libtorch_cpu.so is linked to OpenCV and FFmpeg, but no symbol of it binds to
# them (`ldd -u`): its copy drops those links (--prune), and the image holds about 260 MB of
# libraries instead. Each copied library's Debian copyright file comes along, and
# /usr/share/doc/packrat/closure.txt names the package and version of every copied file.
#
#   - the default (last) stage, the agent's image: packrat-agent, packrat-runtime, packrat and
#     packrat-forward in /opt/packrat/bin, their libraries (libtorch, OpenBLAS with OpenMP, gRPC,
#     ...), curl (HEALTHCHECK, exec probes), the demo models in /opt/packrat/models, a default
#     config in /etc/packrat/packrat.yaml and the KServe runtime's in /etc/packrat/kserve.yaml
#     (deploy/config/). No compiler, no Python, no sources,
#     and no package manager run in it: the base's packages and the copied files.
#   - `forwarder`, the application pods' sidecar: FROM scratch with packrat-forward, curl (its
#     probes) and their libraries, glibc included.
# Every build package is also in scripts/packages.txt (check_image.sh checks that).
#
# Both run as the unprivileged uid 10001 by default. What the agent needs from the host:
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
# nothing is pulled), VERSION, REVISION, CREATED, SOURCE (the OCI labels).
# Host caches: when /mnt (ccache) and /var/cache/apt/archives are bind mounts (buildah bud -v,
# as check_image.sh does), the build uses the host's ccache and .deb files and leaves them there.

ARG BASE_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# With the host's archive folder bind-mounted, debian:bookworm-slim's docker-clean hook would
# delete the host's .deb files: drop it (this stage is thrown away); download as root there.
# The base's own packages are listed first: the agent's stage has them already.
RUN set -eu; \
    dpkg-query -W -f '${Package}\n' >/base-packages.txt; \
    if mountpoint -q /var/cache/apt/archives; then rm -f /etc/apt/apt.conf.d/docker-clean; fi; \
    apt-get update -qq; \
    apt-get install -y -qq --no-install-recommends -o APT::Sandbox::User=root \
      g++ cmake ninja-build ccache pkg-config patchelf curl \
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

# The final stages' root folders: /rootfs for the agent (onto the base), /rootfs-forward for the
# sidecar (onto nothing: glibc too, and the merged-/usr links the loader's path needs).
RUN set -eu; \
    install -D -m 0755 -t /opt/packrat/bin build/bin/packrat-agent build/bin/packrat-runtime \
      build/bin/packrat build/bin/packrat-forward; \
    install -d /rootfs/usr/share/doc/packrat /rootfs-forward/usr/share/doc/packrat; \
    scripts/copy_closure.sh --prune libtorch_cpu.so --base /base-packages.txt \
      --record /rootfs/usr/share/doc/packrat/closure.txt \
      /rootfs /opt/packrat/bin/* /usr/bin/curl; \
    scripts/copy_closure.sh --record /rootfs-forward/usr/share/doc/packrat/closure.txt \
      /rootfs-forward /opt/packrat/bin/packrat-forward /usr/bin/curl; \
    for d in bin lib lib64 sbin; do ln -s usr/$d /rootfs-forward/$d; done; \
    cp LICENSE /rootfs/usr/share/doc/packrat/; cp LICENSE /rootfs-forward/usr/share/doc/packrat/; \
    install -d -m 1777 /rootfs-forward/tmp; \
    install -d /rootfs-forward/etc; \
    printf 'root:x:0:0:root:/:/sbin/nologin\npackrat:x:10001:10001:packrat:/:/sbin/nologin\n' \
      >/rootfs-forward/etc/passwd; \
    printf 'root:x:0:\npackrat:x:10001:\n' >/rootfs-forward/etc/group

# ---------------------------------------------------------------------------------------------
# The sidecar: packrat-forward and curl for its exec probes; `--target forwarder`.
FROM scratch AS forwarder
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="packrat-forward" \
      org.opencontainers.image.description="Packrat's sidecar forwarder: splices an application pod's connections to the node's Packrat agent (Unix socket or TCP)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.url="${SOURCE}" \
      org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/operations.md" \
      org.opencontainers.image.vendor="Packrat" \
      org.opencontainers.image.authors="Packrat developers" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /rootfs-forward/ /
ENV PATH=/opt/packrat/bin:/usr/bin
USER 10001:10001
# SIGTERM: stop accepting, let open connections finish (--shutdown-timeout-s), exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/packrat/bin/packrat-forward"]
CMD ["--help"]

# ---------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="packrat" \
      org.opencontainers.image.description="Packrat node agent: CPU inference serving with thin, pinned libtorch runtimes (KServe v2 REST and gRPC), its runtime, CLI and packrat-forward sidecar" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.url="${SOURCE}" \
      org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/operations.md" \
      org.opencontainers.image.vendor="Packrat" \
      org.opencontainers.image.authors="Packrat developers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="debian:bookworm-slim"

# The binaries and their libraries onto the base; ldconfig makes the loader's cache know them
# (OpenBLAS's folder among them).
COPY --from=build /rootfs/ /
RUN set -eu; \
    ldconfig; \
    useradd --system --uid 10001 --user-group --home-dir /var/lib/packrat --no-create-home \
      --shell /usr/sbin/nologin packrat; \
    install -d -o packrat -g packrat /var/lib/packrat /var/lib/packrat/profiles /run/packrat; \
    install -d /opt/packrat/models /etc/packrat; \
    rm -f /run/adduser

COPY --from=build /src/models/ /opt/packrat/models/
COPY deploy/config/packrat.yaml /etc/packrat/packrat.yaml
COPY deploy/config/kserve.yaml /etc/packrat/kserve.yaml

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
