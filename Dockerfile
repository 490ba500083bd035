# Multi-stage build: r8s built for glibc, in a distroless, non-root runtime
# that has glibc (distroless/cc): the binary, C library and allocator every
# figure in BENCHMARKS.md was measured with (musl's allocator is several
# times slower under many threads). Both stages are Debian 12, so the glibc
# the binary was linked against is the one it runs on.
FROM rust:1-bookworm AS build
WORKDIR /src
# The commit for r8s_build_info and --version (.git is not in the context):
#   docker build --build-arg BUILD_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .
ARG BUILD_GIT_COMMIT=unknown
ENV BUILD_GIT_COMMIT=${BUILD_GIT_COMMIT}
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# The binary's package (cmd/, the workspace's default member), and the
# targets its manifest declares beside it, which Cargo finds before it
# builds anything: the tests and the benchmarks.
COPY cmd ./cmd
COPY tests ./tests
COPY benches ./benches
# The workspace's other member (the sim): Cargo reads its manifest even to
# build r8s without it.
COPY sim ./sim
# The binary's package without its default `sim` feature: the product, not
# the built-in upstream (`r8s sim` and `r8s demo` are for developers' builds).
RUN cargo build --release --locked --no-default-features \
 && cp target/release/r8s /r8s

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /r8s /usr/local/bin/r8s
COPY config/r8s.toml /etc/r8s/r8s.toml
# Numeric, so Kubernetes can verify runAsNonRoot (distroless nonroot is 65532).
USER 65532:65532
EXPOSE 8001 8081
ENTRYPOINT ["/usr/local/bin/r8s"]
CMD ["serve", "--config", "/etc/r8s/r8s.toml", "--listen", "0.0.0.0:8001", "--admin-listen", "0.0.0.0:8081"]
