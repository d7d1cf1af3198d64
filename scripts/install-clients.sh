#!/usr/bin/env bash
# Installs the real Postgres clients the client tests drive (sqllogictest/tests/clients.rs and
# psql.rs): psql and the PostgreSQL JDBC driver (Debian packages), a JDK to compile the Java
# check, Python's psycopg 3 + SQLAlchemy + pandas (a virtualenv), node-postgres (npm), and
# openssl for the TLS test's certificate.
# Everything but the Debian packages goes to $EDDY_TOOLS_DIR/clients, outside the clone, and
# is reused when present (a cold install takes a couple of minutes).
set -euo pipefail

EDDY_TOOLS_DIR="${EDDY_TOOLS_DIR:-$HOME/.cache/eddy-tools}"
CLIENTS_DIR="$EDDY_TOOLS_DIR/clients"
PYTHON_PACKAGES=("psycopg[binary]==3.3.9" "SQLAlchemy==2.1.9" "pandas==3.1.1")
NODE_PACKAGES=("pg@8.23.1")
JDBC_JAR=/usr/share/java/postgresql.jar
mkdir -p "$CLIENTS_DIR"

# Debian packages, only those missing (apt-get needs root, as on CI).
missing=()
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
[ -f "$JDBC_JAR" ] || missing+=(libpostgresql-jdbc-java)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || missing+=(python3-venv)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "==> apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python: one virtualenv; the stamp names what it holds, so a version change reinstalls.
venv="$CLIENTS_DIR/python"
stamp="${PYTHON_PACKAGES[*]}"
if [ "$(cat "$venv/.eddy-packages" 2>/dev/null)" != "$stamp" ] || ! "$venv/bin/python" -c "import psycopg, sqlalchemy, pandas" >/dev/null 2>&1; then
    echo "==> python virtualenv in $venv: ${PYTHON_PACKAGES[*]}"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${PYTHON_PACKAGES[@]}"
    echo "$stamp" > "$venv/.eddy-packages"
else
    echo "python clients already installed: $venv"
fi

# Node: a package folder of its own.
node_dir="$CLIENTS_DIR/node"
stamp="${NODE_PACKAGES[*]}"
if [ "$(cat "$node_dir/.eddy-packages" 2>/dev/null)" != "$stamp" ] || [ ! -d "$node_dir/node_modules/pg" ]; then
    echo "==> node-postgres in $node_dir: ${NODE_PACKAGES[*]}"
    rm -rf "$node_dir"
    mkdir -p "$node_dir"
    (cd "$node_dir" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "${NODE_PACKAGES[@]}")
    echo "$stamp" > "$node_dir/.eddy-packages"
else
    echo "node clients already installed: $node_dir"
fi

# The tests find the JDBC driver here.
ln -sf "$JDBC_JAR" "$CLIENTS_DIR/postgresql.jar"
echo "clients ready in $CLIENTS_DIR"
