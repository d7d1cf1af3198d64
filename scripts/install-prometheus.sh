#!/usr/bin/env bash
# Installs Prometheus and promtool (Debian's `prometheus` package): the metrics test
# (server/tests/prometheus.rs) starts a real Prometheus that scrapes Eddy, and the alert rules
# in docker/prometheus/ are checked with `promtool check rules` and `promtool test rules`.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    echo "prometheus already installed: $(command -v prometheus)"
    exit 0
fi
echo "==> apt-get install prometheus"
apt-get update -qq
# Where an init system runs, the package also starts a system-wide Prometheus; the tests do
# not use it (each starts its own on a free port).
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
command -v prometheus >/dev/null && command -v promtool >/dev/null
