#!/usr/bin/env bash
# Runs .slt files with the standard sqllogictest CLI (sqllogictest-bin 0.29.1,
# engine postgres-extended), each against a fresh eddy with an empty data
# directory, as the cargo runner (sqllogictest/tests/slt.rs) does. Checks that
# the suites pass outside Eddy's own runner too (RECOVER goes to the server).
#
#   scripts/slt-cli.sh [FILE...]          default: sqllogictest/slt/**/*.slt
#
# SQLLOGICTEST  the CLI (default: `sqllogictest` on PATH;
#               install: cargo install sqllogictest-bin@0.29.1 --locked)
# EDDY_BIN      the server (default: $CARGO_TARGET_DIR/debug/eddy, else target/debug/eddy)
# EDDY_SLT_PORT port to use (default 4566; must be free)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
shopt -s globstar nullglob

cli="${SQLLOGICTEST:-sqllogictest}"
eddy="${EDDY_BIN:-${CARGO_TARGET_DIR:-target}/debug/eddy}"
port="${EDDY_SLT_PORT:-4566}"
command -v "$cli" >/dev/null || { echo "no sqllogictest CLI ($cli); see the header of $0" >&2; exit 1; }
[[ -x "$eddy" ]] || { echo "no eddy at $eddy: cargo build -p eddy-server, or set EDDY_BIN" >&2; exit 1; }

accepting() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }
if accepting; then
  echo "port $port is already in use; set EDDY_SLT_PORT" >&2
  exit 1
fi

files=("$@")
[[ ${#files[@]} -gt 0 ]] || files=(sqllogictest/slt/**/*.slt)

pid=""
work=""
stop_eddy() {
  if [[ -n "$pid" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
  fi
  if [[ -n "$work" ]]; then
    rm -rf "$work"
    work=""
  fi
}
trap stop_eddy EXIT

passed=0
failed=0
for file in "${files[@]}"; do
  work="$(mktemp -d)"
  NO_COLOR=1 "$eddy" --listen "127.0.0.1:$port" --data-dir "$work/data" >"$work/eddy.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    accepting && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if "$cli" --engine postgres-extended --host 127.0.0.1 --port "$port" --db dev --user eddy \
    --color never "$file"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "--- last lines of eddy's log for $file ---"
    tail -n 20 "$work/eddy.log"
  fi
  stop_eddy
done
echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
