# Multi-stage build: a static (musl) r8s in a distroless, non-root runtime image.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
# The commit for r8s_build_info and --version (.git is not in the context):
#   docker build --build-arg BUILD_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .
ARG BUILD_GIT_COMMIT=unknown
ENV BUILD_GIT_COMMIT=${BUILD_GIT_COMMIT}
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --target x86_64-unknown-linux-musl \
 && cp target/x86_64-unknown-linux-musl/release/r8s /r8s

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /r8s /usr/local/bin/r8s
COPY config/r8s.toml /etc/r8s/r8s.toml
# Numeric, so Kubernetes can verify runAsNonRoot (distroless nonroot is 65532).
USER 65532:65532
EXPOSE 8001 8081
ENTRYPOINT ["/usr/local/bin/r8s"]
CMD ["serve", "--config", "/etc/r8s/r8s.toml", "--listen", "0.0.0.0:8001", "--admin-listen", "0.0.0.0:8081"]
