#!/usr/bin/env bash
# The single test command: build, format check, lints, then every test
# (unit tests, the .slt suite and the recovery test, which run the built eddy).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Outside the clone and reused across runs: a cold build takes minutes.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
mkdir -p "$CARGO_TARGET_DIR"
# The slt and recovery tests start this binary (built by the first step).
export EDDY_BIN="$CARGO_TARGET_DIR/debug/eddy"

echo "==> cargo build (debug; CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo build --workspace --tests --bins

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

echo "==> cargo test"
cargo test --workspace
