#!/usr/bin/env bash
# Installs the Tansu Kafka-compatible broker that Eddy's Kafka tests run against
# (see /work/shared/KAFKA-TESTING.md: no Apache Kafka/Redpanda/Docker is available,
# only crates.io). A cold install takes ~15 minutes on 2 cores, so the binary
# lives outside the clone in $EDDY_TOOLS_DIR and is reused when present.
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

mkdir -p "$EDDY_TOOLS_DIR"
echo "==> installing tansu $TANSU_VERSION into $EDDY_TOOLS_DIR (slow when cold)"
# --features dynostore,libsql: without a storage engine tansu refuses to start.
# --locked: the exact dependency versions tansu was released with.
cargo install tansu --version "$TANSU_VERSION" --locked \
    --features dynostore,libsql --root "$EDDY_TOOLS_DIR"

"$TANSU_BIN" --version >/dev/null
echo "tansu installed: $TANSU_BIN"
