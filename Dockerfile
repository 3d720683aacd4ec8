# One image for every role: lance-context worker | master | dev.
# The web UI is prebuilt and committed under web/dist, so no Node stage is
# needed; rebuild it with `cd web && npm ci && npm run build` before building
# the image if you changed it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# cgo: the SQL engine is DuckDB (C++), linked statically but for libstdc++,
# which the cc base image provides.
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -o /out/lance-context ./cmd/lance-context

# Test tools (etcd, versitygw) from the pinned tools module, for the compose stack.
FROM golang:1.26-bookworm AS tools
WORKDIR /src/tools
COPY tools/go.mod tools/go.sum ./
RUN go mod download
RUN CGO_ENABLED=0 go build -trimpath -o /out/etcd go.etcd.io/etcd/server/v3 && \
    CGO_ENABLED=0 go build -trimpath -o /out/versitygw github.com/versity/versitygw/cmd/versitygw

FROM gcr.io/distroless/static-debian12:nonroot AS tools-image
COPY --from=tools /out/ /usr/local/bin/

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/lance-context /usr/local/bin/lance-context
USER nonroot
EXPOSE 3000 8090 8080
ENTRYPOINT ["/usr/local/bin/lance-context"]
CMD ["dev", "--data-dir", "/data", "--listen", "0.0.0.0:8080"]
