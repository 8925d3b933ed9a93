# syntax=docker/dockerfile:1
# Multi-stage build of the imledger binary: compile in the Go image, run on debian-slim (curl is
# there for the compose health check of /readyz).

FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/imledger ./cmd/imledger

FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home imledger
COPY --from=build /out/imledger /usr/local/bin/imledger
USER imledger
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/imledger"]
CMD ["serve"]
