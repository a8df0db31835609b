# syntax=docker/dockerfile:1
# InstantStart management container: the server (with the embedded web UI), the CLI and the
# MCP server. Multi-stage: a Rust builder, then a small non-root runtime image.
#
#   docker build -t instantstart .
#   docker run --rm -p 127.0.0.1:3099:3099 -v instantstart-data:/var/lib/instantstart instantstart
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

# The pinned helm binary: used only for the charts that have no EKS add-on (KubeRay operator),
# run with an argument vector (never a shell). Version and checksum are pinned; the checksum is
# of the linux-amd64 `helm` binary inside the release tarball.
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
USER 10001:10001
VOLUME ["/var/lib/instantstart"]
EXPOSE 3099
ENV INSTANTSTART_DATA_DIR=/var/lib/instantstart \
    INSTANTSTART_LISTEN=0.0.0.0:3099 \
    INSTANTSTART_PROVIDER=aws
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/instantstart-server"]
