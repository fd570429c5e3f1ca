# syntax=docker/dockerfile:1
#
# The Portcullis image for users with Docker: the static binary `make build`
# makes, on distroless static (no shell, no package manager), run as the
# "nonroot" user (65532). The Helm chart runs it with a read-only root
# filesystem.
#
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) -t portcullis .
#
# or `make image-docker`, which passes both from git. `make image` builds
# the same image with no Docker engine and no base image (scripts/image,
# docs/image.md); scripts/image/dockerfile_test.go checks that this file's
# final stage and that build agree (base files, user, entrypoint, command,
# ports, labels).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ARG TARGETOS
ARG TARGETARCH
# The Makefile's build target: CGO_ENABLED=0, -trimpath, version and
# revision stamped with -ldflags, and the patches of patches/go-sdk and
# patches/fosite applied by scripts/sdk-patch.sh (which needs patch(1)). GOOS/GOARCH
# cross-compile for the target.
RUN command -v patch >/dev/null || { apt-get update && apt-get install -y --no-install-recommends patch && rm -rf /var/lib/apt/lists/*; }
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH make build BIN=/out/portcullis VERSION="$VERSION" REVISION="$REVISION"

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/portcullis-mcp/portcullis" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.title="portcullis"
COPY --from=build /out/portcullis /portcullis
USER 65532:65532
# 8080: MCP (/mcp, /healthz, /readyz); 9090: /metrics. Set server.listen and
# server.metrics_listen (the chart does) to listen beyond loopback.
EXPOSE 8080 9090
ENTRYPOINT ["/portcullis"]
CMD ["serve"]
