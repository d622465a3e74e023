# The image of the chart's pre-delete hook (restoreHook.image): the prewarm binary, which the hook
# runs as `prewarm restore`, on a distroless base (glibc, CA certificates, no shell), non-root.
# Builds natively for the platform asked for, so one command gives arm64 and x86_64 images:
#   docker buildx build --platform linux/arm64,linux/amd64 -t <registry>/prewarm:<version> --push .
# Not built or tested in CI: the machines that run `make test` have no Docker (README).
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin prewarm \
 && cp target/release/prewarm /prewarm

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /prewarm /prewarm
USER 65532:65532
ENTRYPOINT ["/prewarm"]
