#!/usr/bin/env bash
# Installs the Tansu Kafka-compatible broker that Eddy's Kafka tests run against
# (no Apache Kafka, Redpanda or Docker can be installed where the tests run,
# only crates.io packages). A cold install takes
# about 12 minutes on 2 cores, so the binary lives outside the clone, in
# $EDDY_TOOLS_DIR (default ~/.cache/eddy-tools), and is reused when present.
#
# System packages: none beyond the machine's C compiler. Its C parts (bundled
# sqlite in libsql-ffi, aws-lc-sys, libgit2, bzip2, lzma) build from source
# with cc; no cmake, libclang or -dev package is needed (checked on a machine
# of the project's kind).
set -euo pipefail

TANSU_VERSION="0.6.0"
EDDY_TOOLS_DIR="${EDDY_TOOLS_DIR:-$HOME/.cache/eddy-tools}"
TANSU_BIN="$EDDY_TOOLS_DIR/bin/tansu"

# Reuse an existing binary only if it actually runs (a half-written or
# wrong-architecture file should trigger a reinstall, not a confusing test failure).
if [ -x "$TANSU_BIN" ] && "$TANSU_BIN" --version >/dev/null 2>&1; then
    echo "tansu already installed: $TANSU_BIN ($("$TANSU_BIN" --version 2>&1 | head -n1))"
    exit 0
fi

force=()
if [ -e "$TANSU_BIN" ]; then
    # cargo would call the broken binary "already installed" and skip it.
    echo "$TANSU_BIN exists but does not run: reinstalling"
    force=(--force)
fi

mkdir -p "$EDDY_TOOLS_DIR"
echo "==> installing tansu $TANSU_VERSION into $EDDY_TOOLS_DIR (slow when cold)"
# Its own build directory: not the project's CARGO_TARGET_DIR (which test.sh
# exports), where tansu's ~800 crates would only take space; and kept when
# the install fails, so that a retry resumes instead of starting over.
build_dir="$EDDY_TOOLS_DIR/tansu-build"
# --features libsql: the sqlite storage engine the tests use (without an engine tansu refuses
# to start; dynostore's object-store engines are not needed and cost hundreds of crates).
# --locked: the exact dependency versions tansu was released with.
# opt-level 1 and more codegen units: a test broker need not be fully optimized, and this
# halves the cold build (about 12 CPU-minutes on 2 cores instead of about 25 wall minutes).
CARGO_TARGET_DIR="$build_dir" \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=64 \
    CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_LTO=false \
    cargo install tansu --version "$TANSU_VERSION" --locked \
    --features libsql --root "$EDDY_TOOLS_DIR" "${force[@]}"
rm -rf "$build_dir"

"$TANSU_BIN" --version >/dev/null
echo "tansu installed: $TANSU_BIN"
