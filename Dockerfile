# The Packrat node agent on Debian 12.
#
#   docker build -t packrat:0.1.0 .
#   docker run --rm -p 8080:8080 -p 8082:8082 --shm-size=2g packrat:0.1.0
#
# The image is built by scripts/setup.sh from scripts/packages.txt, exactly as on a developer
# machine (README "The two commands"), so there is one list of packages. It holds
# packrat-agent, packrat-runtime, packrat and packrat-forward (the application pods' sidecar) in
# /opt/packrat/bin, the generated demo models in /opt/packrat/models, and a default config in
# /etc/packrat/packrat.yaml (deploy/config/).
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
# No Docker engine exists on the development machines; this file is reviewed, not built, there.
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8

WORKDIR /src
COPY . /src

# setup.sh installs the packages (as root here, so without sudo), builds in Release and
# generates the models. The build tree and caches are dropped afterwards; sources stay in /src.
RUN scripts/setup.sh \
 && install -d /opt/packrat/bin /opt/packrat/models /etc/packrat /var/lib/packrat/profiles \
 && install -m 0755 build/bin/packrat-agent build/bin/packrat-runtime build/bin/packrat \
      build/bin/packrat-forward /opt/packrat/bin/ \
 && cp models/*.pt /opt/packrat/models/ \
 && install -m 0644 deploy/config/packrat.yaml /etc/packrat/packrat.yaml \
 && rm -rf build models /root/.cache /root/.ccache /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/packrat --no-create-home \
      --shell /usr/sbin/nologin packrat \
 && chown -R packrat:packrat /var/lib/packrat

ENV PATH=/opt/packrat/bin:$PATH
WORKDIR /var/lib/packrat
USER 10001:10001
# http (KServe v2), management, metrics (Prometheus text format at /metrics)
EXPOSE 8080 8081 8082
# SIGTERM: readiness false, stop accepting, drain in-flight requests, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/packrat/bin/packrat-agent"]
CMD ["--config", "/etc/packrat/packrat.yaml"]
