# syntax=docker/dockerfile:1
# InstantStart management container: the server (with the embedded web UI), the CLI and the
# MCP server. Multi-stage: a Rust builder, then a small non-root runtime image.
#
#   docker build -t instantstart .
#   docker run --rm --cap-drop ALL --security-opt no-new-privileges \
#     --read-only --tmpfs /tmp:rw,nosuid,nodev,size=512m \
#     -p 127.0.0.1:3099:3099 -v instantstart-data:/var/lib/instantstart instantstart
#
# The root file system can be read-only: the server writes only to the data volume and, for
# helm's private home of one call, to /tmp.
#
# In AWS the server runs with `--provider aws` and the instance role's credentials; the UI is
# reached only through an SSM port-forwarding session (see README "Deploy to AWS").

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --features instantstart-server/aws -p instantstart-server -p instantstart-cli -p instantstart-mcp \
 && mkdir -p /out \
 && cp target/release/instantstart-server target/release/instantstart target/release/instantstart-mcp /out/

# The pinned helm binary: used only for the charts that have no EKS add-on (KubeRay operator,
# HyperPod dependencies), run with an argument vector (never a shell). Version and checksum are
# pinned; the checksum is of the linux-amd64 `helm` binary inside the release tarball.
FROM debian:bookworm-slim AS helm
ARG HELM_VERSION=v4.1.4
ARG HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && curl -fsSL --proto '=https' -o /tmp/helm.tar.gz "https://get.helm.sh/helm-${HELM_VERSION}-linux-amd64.tar.gz" \
 && tar -xzf /tmp/helm.tar.gz -C /tmp linux-amd64/helm \
 && echo "${HELM_SHA256}  /tmp/linux-amd64/helm" | sha256sum -c - \
 && install -m 0755 /tmp/linux-amd64/helm /usr/local/bin/helm

# The HyperPod dependencies chart (release hyperpod-dependencies in kube-system), which AWS
# requires before a HyperPod cluster is created. It is published only as a chart directory in
# the aws/sagemaker-hyperpod-cli git repository, so it is vendored here at a pinned commit
# (provider::HYPERPOD_CLI_COMMIT in crates/core; a test keeps the two equal): git fetches exactly
# that commit (its id is the content hash; the checkout is verified against it), then the pinned
# helm resolves the chart's dependencies (exact versions in its Chart.yaml; no Chart.lock is
# committed upstream, so `helm dependency update` writes one) into its charts/ directory. At run
# time the server installs the local directory: no network is needed for chart resolution. The
# .commit file beside it lets the server refuse a chart vendored from another commit. The build
# needs github.com and the sub-charts' sources (quay.io OCI, nvidia.github.io, aws.github.io).
FROM debian:bookworm-slim AS charts
ARG HYPERPOD_CLI_COMMIT=067d658b2d5c3d347afbadd75e1425214e965dcb
COPY --from=helm /usr/local/bin/helm /usr/local/bin/helm
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/* \
 && git init -q /tmp/hyperpod-cli \
 && git -C /tmp/hyperpod-cli fetch -q --depth 1 https://github.com/aws/sagemaker-hyperpod-cli.git "${HYPERPOD_CLI_COMMIT}" \
 && git -C /tmp/hyperpod-cli -c advice.detachedHead=false checkout -q FETCH_HEAD \
 && test "$(git -C /tmp/hyperpod-cli rev-parse HEAD)" = "${HYPERPOD_CLI_COMMIT}" \
 && mkdir -p /opt/instantstart/charts \
 && cp -R /tmp/hyperpod-cli/helm_chart/HyperPodHelmChart /opt/instantstart/charts/HyperPodHelmChart \
 && HOME=/tmp/helm-home helm dependency update /opt/instantstart/charts/HyperPodHelmChart \
 && helm show chart /opt/instantstart/charts/HyperPodHelmChart | grep -qx 'name: hyperpod-helm-chart' \
 && helm show chart /opt/instantstart/charts/HyperPodHelmChart | grep -qx 'version: 0.1.0' \
 && echo "${HYPERPOD_CLI_COMMIT}" > /opt/instantstart/charts/HyperPodHelmChart.commit \
 && rm -rf /tmp/hyperpod-cli /tmp/helm-home

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 instantstart \
 && useradd --system --uid 10001 --gid instantstart --home-dir /var/lib/instantstart --shell /usr/sbin/nologin instantstart \
 && mkdir -p /var/lib/instantstart \
 && chown instantstart:instantstart /var/lib/instantstart
COPY --from=build /out/ /usr/local/bin/
COPY --from=helm /usr/local/bin/helm /usr/local/bin/helm
COPY --from=charts /opt/instantstart/charts /opt/instantstart/charts
USER 10001:10001
VOLUME ["/var/lib/instantstart"]
EXPOSE 3099
# The store is SQLite in the data volume unless INSTANTSTART_STORE_URL names a PostgreSQL
# database (RDS or Aurora; several replicas then share it): pass it with --env-file, never on a
# command line. The deployment template builds it from a Secrets Manager secret (docs/store.md).
ENV INSTANTSTART_DATA_DIR=/var/lib/instantstart \
    INSTANTSTART_LISTEN=0.0.0.0:3099 \
    INSTANTSTART_PROVIDER=aws
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/instantstart-server"]
