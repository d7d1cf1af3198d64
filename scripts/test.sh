#!/usr/bin/env bash
# The single test command: format check, build, lints, then every test
# (unit tests, the .slt suite and the recovery test, which run the built eddy,
# and the Kafka tests, which run against a Tansu broker started here). The
# broker and the Postgres clients install in the background meanwhile.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Outside the clone and reused across runs: a cold build takes minutes.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
mkdir -p "$CARGO_TARGET_DIR"
# The slt and recovery tests start this binary (built by the first step).
export EDDY_BIN="$CARGO_TARGET_DIR/debug/eddy"

# The Kafka tests' broker (Tansu, from crates.io: no Kafka/Docker here) and the real Postgres
# clients the client tests drive (psql, JDBC, psycopg/SQLAlchemy/pandas, node-postgres), both
# installed once per machine outside the clone. Cold, the broker is a cargo build of its own
# (about 12 CPU-minutes) and the clients mostly downloads: they run in the background while
# the project builds, filling the cores its build leaves idle (linking, its largest crates).
export EDDY_TOOLS_DIR="${EDDY_TOOLS_DIR:-$HOME/.cache/eddy-tools}"
# KafkaBroker::start_own() (broker-fault tests) runs this same binary.
export EDDY_TANSU_BIN="$EDDY_TOOLS_DIR/bin/tansu"
# Here a missing client fails its test instead of skipping it.
export EDDY_REQUIRE_CLIENTS=1
# The storage fault tests mount filesystems: as root (CI) they must run, elsewhere they skip.
if [ "$(id -u)" = 0 ]; then
    export EDDY_REQUIRE_FAULT_TESTS=1
fi

install_logs="$(mktemp -d "${TMPDIR:-/tmp}/eddy-installs.XXXXXX")"
# Process groups of the installs still running (each its own, so that all of a cargo
# install's processes can be stopped when this script ends early).
installs=()
kafka_started=""
cleanup() {
    local status=$?
    for group in "${installs[@]}"; do
        kill -TERM -- "-$group" 2>/dev/null || true
    done
    if [ -n "$kafka_started" ]; then
        if [ "$status" -ne 0 ] && [ -f "$EDDY_KAFKA_STATE_DIR/data_dir" ]; then
            echo "==> tests failed ($status); last lines of the Kafka broker's log:"
            tail -n 30 "$(cat "$EDDY_KAFKA_STATE_DIR/data_dir")/broker.log" || true
        fi
        bash scripts/kafka-broker.sh stop || true
        rm -rf "$EDDY_KAFKA_STATE_DIR"
    fi
    rm -rf "$install_logs"
    exit "$status"
}
trap cleanup EXIT
# Non-interactive bash dies on these signals without running the EXIT trap:
# turn them into an exit so that the installs and the broker are stopped on Ctrl-C and kill too.
trap 'exit 130' INT
trap 'exit 143' TERM

# Starts `$2...` in the background in a session of its own, its output in $install_logs/$1.log.
# (A job of a non-interactive shell is not a process group leader, so setsid does not fork:
# the job's pid is the new group's id; --wait keeps the exit status should it ever fork.)
start_install() {
    local name=$1
    shift
    setsid --wait "$@" >"$install_logs/$name.log" 2>&1 &
    installs+=("$!")
}

# Waits for the install started as $1 (its group id $2) and shows its log (all of it when it
# failed).
finish_install() {
    local name=$1 group=$2
    local remaining=()
    for other in "${installs[@]}"; do
        [ "$other" = "$group" ] || remaining+=("$other")
    done
    if wait "$group"; then
        installs=("${remaining[@]}")
        tail -n 3 "$install_logs/$name.log"
    else
        local status=$?
        installs=("${remaining[@]}")
        echo "==> $name failed ($status):"
        cat "$install_logs/$name.log"
        return "$status"
    fi
}

echo "==> install the Kafka broker (tansu, in $EDDY_TOOLS_DIR), the Postgres clients (in $EDDY_TOOLS_DIR/clients) and Prometheus, in the background"
start_install kafka-broker bash scripts/install-kafka-broker.sh
broker_install="${installs[-1]}"
# Prometheus and promtool (Debian's package; the metrics test scrapes Eddy with them and checks
# the alert rules) after the clients: both use apt-get, which takes one lock.
start_install clients bash -c 'bash scripts/install-clients.sh && bash scripts/install-prometheus.sh'
clients_install="${installs[-1]}"

# The quick check first: a formatting slip fails in seconds, not after the build.
echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo build (debug; CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --workspace --tests --bins

echo "==> cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "==> wait for the Kafka broker's install"
finish_install kafka-broker "$broker_install"
echo "==> wait for the Postgres clients' and Prometheus' install"
finish_install clients "$clients_install"

echo "==> start the Kafka broker"
# A state directory of this run's own, so that concurrent runs (or a broker
# started by hand with scripts/kafka-broker.sh) are left alone.
EDDY_KAFKA_STATE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/eddy-kafka-state.XXXXXX")"
export EDDY_KAFKA_STATE_DIR
kafka_started=1
# An assignment, not `eval "$(...)"`, so that set -e sees a failed start.
broker_env="$(bash scripts/kafka-broker.sh start)"
# Sets EDDY_KAFKA_BOOTSTRAP=127.0.0.1:PORT (and EDDY_TANSU_BIN) for the tests.
eval "$broker_env"
echo "EDDY_KAFKA_BOOTSTRAP=$EDDY_KAFKA_BOOTSTRAP"

echo "==> cargo test"
cargo test --workspace --no-fail-fast

# The .slt suite and the kill -9 recovery test again with every view on four workers (the
# default is one per core less two: one on a 2-core machine): each join, GROUP BY, top-N and
# OVER behind an exchange.
echo "==> cargo test --test slt and --test recovery (kill -9), views on four workers"
EDDY_WORKERS=4 cargo test -p eddy-sqllogictest --test slt --test recovery
