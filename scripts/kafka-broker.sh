#!/usr/bin/env bash
# Starts and stops a throwaway Kafka-protocol broker (Tansu) for Eddy's tests.
#
#   scripts/kafka-broker.sh start    # prints `export EDDY_KAFKA_BOOTSTRAP=...` lines
#   scripts/kafka-broker.sh stop     # SIGTERM, then removes the data directory
#   scripts/kafka-broker.sh status   # exit 0 when running
#   scripts/kafka-broker.sh env      # the export lines again
#
# Use:  eval "$(scripts/kafka-broker.sh start)"   (a script cannot export into
# its caller, so `start` prints the variables on stdout; messages go to stderr).
#
# Each start uses a fresh data directory (tansu deletes every topic when one is
# deleted, so tests use unique topic names on a new broker instead) with the
# sqlite storage engine (memory:// reports wrong high watermarks), on a free
# loopback port or $EDDY_KAFKA_PORT. The pid, address and paths are kept in a
# state directory so that `stop` finds the broker again:
#   $EDDY_KAFKA_STATE_DIR, default: one directory per clone under $TMPDIR.
#
# The binary: $EDDY_TANSU_BIN, else $EDDY_TOOLS_DIR/bin/tansu (see
# scripts/install-kafka-broker.sh), else `tansu` on PATH.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp_root="${TMPDIR:-/tmp}"
# Per clone by default, so that two clones on one machine do not stop each
# other's broker; test.sh passes its own directory per run.
state_dir="${EDDY_KAFKA_STATE_DIR:-$tmp_root/eddy-kafka-state-$(printf '%s' "$repo" | cksum | cut -d' ' -f1)}"
tools_dir="${EDDY_TOOLS_DIR:-$HOME/.cache/eddy-tools}"

log() { echo "kafka-broker: $*" >&2; }
die() { log "error: $*"; exit 1; }

find_tansu() {
    if [ -n "${EDDY_TANSU_BIN:-}" ]; then
        [ -x "$EDDY_TANSU_BIN" ] || die "EDDY_TANSU_BIN=$EDDY_TANSU_BIN is not an executable"
        echo "$EDDY_TANSU_BIN"
    elif [ -x "$tools_dir/bin/tansu" ]; then
        echo "$tools_dir/bin/tansu"
    elif command -v tansu >/dev/null 2>&1; then
        command -v tansu
    else
        die "tansu not found in $tools_dir/bin or on PATH; run scripts/install-kafka-broker.sh"
    fi
}

# Whether something accepts TCP connections on 127.0.0.1:$1 (bash's /dev/tcp,
# so no netcat or python is needed).
port_accepts() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A port nothing listens on, from 20000-32767: below Linux's ephemeral range
# (32768+), so outgoing connections do not take it from under the broker.
# Not atomic: start() retries on another port if tansu fails to bind.
pick_port() {
    local port tries=0
    while [ "$tries" -lt 50 ]; do
        port=$((20000 + RANDOM % 12768))
        if ! port_accepts "$port"; then
            echo "$port"
            return 0
        fi
        tries=$((tries + 1))
    done
    die "no free loopback port found"
}

# The pid from the state directory if that process is still our tansu
# (guards against the pid having been reused by another program).
running_pid() {
    local pid
    [ -f "$state_dir/pid" ] || return 1
    pid="$(cat "$state_dir/pid")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    if [ -r "/proc/$pid/cmdline" ] && ! tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q tansu; then
        return 1
    fi
    echo "$pid"
}

# Shell-quoted (%q) so that `eval` is safe with any path.
print_env() {
    printf 'export EDDY_KAFKA_BOOTSTRAP=%q\n' "$(cat "$state_dir/bootstrap")"
    # So that KafkaBroker::start_own() (broker-fault tests) runs the same binary.
    printf 'export EDDY_TANSU_BIN=%q\n' "$(cat "$state_dir/binary")"
    printf 'export EDDY_KAFKA_STATE_DIR=%q\n' "$state_dir"
}

# Starts tansu in $1 (data directory) on port $2; echoes its pid once it is
# ready. Fails (after cleaning up) if tansu exits or is not ready within 30 s.
launch() {
    local data_dir="$1" port="$2" binary="$3" pid waited=0
    if port_accepts "$port"; then
        log "port $port is already in use"
        return 1
    fi
    # sqlite://PATH is taken relative to the working directory (an absolute
    # path gets mangled), hence the cd. stdin/stdout/stderr are redirected so
    # that `$(kafka-broker.sh start)` does not wait for the broker to exit.
    (
        cd "$data_dir"
        # NO_COLOR: a plain-text log, for people and for grep.
        NO_COLOR=1 exec "$binary" broker \
            --listener-url "tcp://127.0.0.1:$port" \
            --advertised-listener-url "tcp://127.0.0.1:$port" \
            --storage-engine "sqlite://tansu.db" \
            </dev/null >broker.log 2>&1
    ) &
    pid=$!
    # Ready in well under a second when healthy; poll every 0.1 s. The port
    # accepting is not enough: when another process holds it, tansu logs
    # AddrInUse and exits (with status 0) while the other process answers
    # connections. tansu prints
    # "ready in Nms" only once it has bound the port itself.
    while ! { port_accepts "$port" && grep -q '^ready in' "$data_dir/broker.log"; }; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null || true
            return 1
        fi
        waited=$((waited + 1))
        if [ "$waited" -ge 300 ]; then
            log "tansu did not accept connections on port $port within 30 s"
            kill -KILL "$pid" 2>/dev/null || true
            return 1
        fi
        sleep 0.1
    done
    echo "$pid"
}

start() {
    local binary data_dir port pid attempt
    if pid="$(running_pid)"; then
        log "already running (pid $pid) at $(cat "$state_dir/bootstrap")"
        print_env
        return 0
    fi
    binary="$(find_tansu)"
    mkdir -p "$state_dir"
    data_dir="$(mktemp -d "$tmp_root/eddy-kafka-data.XXXXXX")"
    for attempt in 1 2 3; do
        port="${EDDY_KAFKA_PORT:-$(pick_port)}"
        if pid="$(launch "$data_dir" "$port" "$binary")"; then
            printf '%s\n' "$pid" >"$state_dir/pid"
            printf '%s\n' "127.0.0.1:$port" >"$state_dir/bootstrap"
            printf '%s\n' "$port" >"$state_dir/port"
            printf '%s\n' "$data_dir" >"$state_dir/data_dir"
            printf '%s\n' "$binary" >"$state_dir/binary"
            log "tansu (pid $pid) at 127.0.0.1:$port, data and broker.log in $data_dir"
            print_env
            return 0
        fi
        log "tansu failed to start on port $port (attempt $attempt)"
        if [ -s "$data_dir/broker.log" ]; then
            tail -n 20 "$data_dir/broker.log" >&2
        fi
        # A fixed port that fails will fail again.
        [ -z "${EDDY_KAFKA_PORT:-}" ] || break
    done
    rm -rf "$data_dir"
    die "could not start tansu (its log is shown above)"
}

stop() {
    local pid waited=0 data_dir=""
    [ -f "$state_dir/data_dir" ] && data_dir="$(cat "$state_dir/data_dir")"
    if pid="$(running_pid)"; then
        kill -TERM "$pid" 2>/dev/null || true
        # A clean shutdown takes ~2 s; do not let a hung broker hang CI.
        while kill -0 "$pid" 2>/dev/null; do
            waited=$((waited + 1))
            if [ "$waited" -ge 150 ]; then
                log "tansu (pid $pid) ignored SIGTERM for 15 s; killing it"
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.1
        done
        log "stopped tansu (pid $pid)"
    else
        log "not running"
    fi
    if [ -n "$data_dir" ] && [ -d "$data_dir" ]; then
        if [ -n "${EDDY_KAFKA_KEEP_DATA:-}" ]; then
            log "kept $data_dir (EDDY_KAFKA_KEEP_DATA is set)"
        else
            rm -rf "$data_dir"
        fi
    fi
    rm -f "$state_dir/pid" "$state_dir/bootstrap" "$state_dir/port" \
        "$state_dir/data_dir" "$state_dir/binary"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status)
    if pid="$(running_pid)"; then
        log "running (pid $pid) at $(cat "$state_dir/bootstrap"), data in $(cat "$state_dir/data_dir")"
    else
        log "not running"
        exit 1
    fi
    ;;
env)
    running_pid >/dev/null || die "not running; use: $0 start"
    print_env
    ;;
*)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
