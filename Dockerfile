# The image the Helm chart (charts/aoctl) runs: the aoctl binary, git and tmux, as a non-root user.
# Agent CLIs are not included: build on this image and install the agents your sessions use.
#
#   docker build -t aoctl:0.1.0 .

# The locked dependencies need Rust 1.91 or newer (notify-types, cargo-platform).
FROM rust:1.95-bookworm AS build
# libgit2 links OpenSSL.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p aoctl \
 && install -m 0755 target/release/aoctl /usr/local/bin/aoctl

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git tmux openssh-client libssl3 tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 aoctl \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/aoctl --create-home --shell /bin/bash aoctl
COPY --from=build /usr/local/bin/aoctl /usr/local/bin/aoctl
USER 10001:10001
ENV HOME=/var/lib/aoctl AOCTL_DATA_DIR=/var/lib/aoctl
WORKDIR /var/lib/aoctl
EXPOSE 7420
# tini reaps the agents' exited children; aoctl serve is the one process it runs.
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["aoctl", "serve", "--listen", "0.0.0.0:7420", "--token-file", "/etc/aoctl/token/token"]
