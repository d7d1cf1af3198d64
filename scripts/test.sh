#!/usr/bin/env bash
# The single test command: build, format check, lints, then every test
# (unit tests, the .slt suite and the recovery test, which run the built eddy,
# and the Kafka tests, which run against a Tansu broker started here).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Outside the clone and reused across runs: a cold build takes minutes.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
mkdir -p "$CARGO_TARGET_DIR"
# The slt and recovery tests start this binary (built by the first step).
export EDDY_BIN="$CARGO_TARGET_DIR/debug/eddy"

# The Kafka tests' broker (Tansu, from crates.io: no Kafka/Docker here).
# Installed once per machine outside the clone; a cold install takes 15-25 min.
export EDDY_TOOLS_DIR="${EDDY_TOOLS_DIR:-$HOME/.cache/eddy-tools}"
echo "==> install the Kafka broker (tansu, in $EDDY_TOOLS_DIR)"
bash scripts/install-kafka-broker.sh
# KafkaBroker::start_own() (broker-fault tests) runs this same binary.
export EDDY_TANSU_BIN="$EDDY_TOOLS_DIR/bin/tansu"

# The real Postgres clients the client tests drive (psql, JDBC, psycopg/SQLAlchemy/pandas,
# node-postgres); here a missing one fails its test instead of skipping it.
echo "==> install the Postgres clients (in $EDDY_TOOLS_DIR/clients)"
bash scripts/install-clients.sh
export EDDY_REQUIRE_CLIENTS=1

# Prometheus and promtool (Debian's package): the metrics test scrapes Eddy with them and
# checks the alert rules.
echo "==> install Prometheus"
bash scripts/install-prometheus.sh

echo "==> cargo build (debug; CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --workspace --tests --bins

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "==> start the Kafka broker"
# A state directory of this run's own, so that concurrent runs (or a broker
# started by hand with scripts/kafka-broker.sh) are left alone.
EDDY_KAFKA_STATE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/eddy-kafka-state.XXXXXX")"
export EDDY_KAFKA_STATE_DIR
stop_kafka_broker() {
    local status=$?
    if [ "$status" -ne 0 ] && [ -f "$EDDY_KAFKA_STATE_DIR/data_dir" ]; then
        echo "==> tests failed ($status); last lines of the Kafka broker's log:"
        tail -n 30 "$(cat "$EDDY_KAFKA_STATE_DIR/data_dir")/broker.log" || true
    fi
    bash scripts/kafka-broker.sh stop || true
    rm -rf "$EDDY_KAFKA_STATE_DIR"
    exit "$status"
}
trap stop_kafka_broker EXIT
# Non-interactive bash dies on these signals without running the EXIT trap:
# turn them into an exit so the broker is stopped on Ctrl-C and kill too.
trap 'exit 130' INT
trap 'exit 143' TERM
# An assignment, not `eval "$(...)"`, so that set -e sees a failed start.
broker_env="$(bash scripts/kafka-broker.sh start)"
# Sets EDDY_KAFKA_BOOTSTRAP=127.0.0.1:PORT (and EDDY_TANSU_BIN) for the tests.
eval "$broker_env"
echo "EDDY_KAFKA_BOOTSTRAP=$EDDY_KAFKA_BOOTSTRAP"

echo "==> cargo test"
cargo test --workspace --no-fail-fast
