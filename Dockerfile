# The flashsale server as a container image: a static binary (CGO_ENABLED=0;
# the SQLite driver is pure Go) on distroless/static, which holds CA
# certificates, time zones and a non-root user, and nothing else: no shell,
# no package manager.
#
#   docker build -t flashsale .
#   docker run --rm -p 8080:8080 flashsale serve --addr 0.0.0.0:8080 ...
#
# deploy/compose.yaml runs a whole fleet from it (docs/deploy.md).

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a change to the code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/flashsale ./cmd/flashsale \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flashsale /usr/local/bin/flashsale
# The embedded default keeps its SQLite file and its generated token key
# here; a fleet keeps nothing in it (PostgreSQL, Redis, --token-keys).
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/flashsale"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--data-dir", "/data"]
