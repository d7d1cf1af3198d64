#!/usr/bin/env bash
# Runs every Nexmark query of `eddy-bench nexmark` over one input, one after another.
#
#   bench/nexmark-all.sh file bids.jsonl [q0 q1 q2 q5 q7 q11]
#   bench/nexmark-all.sh kafka bids.jsonl q7          # a private Tansu unless EDDY_KAFKA_BOOTSTRAP is set
#   bench/nexmark-all.sh nexmark 10869568 q7          # the built-in generator, this many events
#
# Each query gets a fresh eddy; a query eddy refuses (q11 before SESSION windows exist) or
# whose check fails is reported and the next one runs.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
input="${1:?usage: $0 file|kafka|nexmark PATH|EVENTS [QUERY...]}"
what="${2:?usage: $0 file|kafka|nexmark PATH|EVENTS [QUERY...]}"
shift 2
queries=("$@")
[ "${#queries[@]}" -gt 0 ] || queries=(q0 q1 q2 q5 q7 q11)

cd "$repo"
cargo build --release -p eddy-server -p eddy-bench >&2 || exit 1
bench="${CARGO_TARGET_DIR:-$repo/target}/release/eddy-bench"
case "$input" in
nexmark) source_args=(--input nexmark --events "$what") ;;
file | kafka) source_args=(--input "$input" --path "$what") ;;
*) echo "unknown input $input (file, kafka or nexmark)" >&2; exit 2 ;;
esac

failed=0
for query in "${queries[@]}"; do
    echo "=== $query ($input $what)"
    "$bench" nexmark --query "$query" "${source_args[@]}" || failed=$((failed + 1))
done
[ "$failed" -eq 0 ] || echo "$failed of ${#queries[@]} queries failed or were refused" >&2
exit "$failed"
