#!/usr/bin/env bash
# Installs the real Postgres clients the client tests drive (sqllogictest/tests/clients.rs,
# psql.rs, pg_tools.rs, dbt.rs and postgres_reference.rs): psql, pg_dump and the PostgreSQL 15
# server (the reference the differential test compares Eddy with) and the PostgreSQL JDBC
# driver (Debian packages), a JDK to compile the Java check, Python's psycopg 3, psycopg 2,
# asyncpg, SQLAlchemy, pandas, pgcli, pyarrow (the file sinks' reader), fastavro, protobuf and
# grpcio-tools (the source-format tests' encoders and protoc) (a virtualenv), dbt-postgres (a virtualenv of its own:
# it pins its own dependencies), node-postgres and Postgres.js (npm), and openssl for the TLS
# test's certificate.
# Everything but the Debian packages goes to $EDDY_TOOLS_DIR/clients, outside the clone, and
# is reused when present (a cold install takes about two minutes).
set -euo pipefail

EDDY_TOOLS_DIR="${EDDY_TOOLS_DIR:-$HOME/.cache/eddy-tools}"
CLIENTS_DIR="$EDDY_TOOLS_DIR/clients"
PYTHON_PACKAGES=("psycopg[binary]==3.3.9" "psycopg2-binary==2.9.13" "asyncpg==0.32.0"
    "SQLAlchemy==2.1.9" "pandas==3.1.1" "pgcli==4.7.1" "pyarrow==26.0.1"
    "fastavro==1.13.1" "grpcio-tools==1.85.4" "protobuf==7.36.2")
DBT_PACKAGES=("dbt-core==1.9.8" "dbt-postgres==1.9.1")
NODE_PACKAGES=("pg@8.23.1" "postgres@3.4.9")
JDBC_JAR=/usr/share/java/postgresql.jar
mkdir -p "$CLIENTS_DIR"

# Debian packages, only those missing (apt-get needs root, as on CI).
missing=()
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
[ -x /usr/lib/postgresql/15/bin/initdb ] || missing+=(postgresql-15)
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
if [ "$(cat "$venv/.eddy-packages" 2>/dev/null)" != "$stamp" ] || ! "$venv/bin/python" -c "import psycopg, psycopg2, asyncpg, sqlalchemy, pandas, pyarrow, fastavro, grpc_tools" >/dev/null 2>&1; then
    echo "==> python virtualenv in $venv: ${PYTHON_PACKAGES[*]}"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${PYTHON_PACKAGES[@]}"
    echo "$stamp" > "$venv/.eddy-packages"
else
    echo "python clients already installed: $venv"
fi

# dbt: its own virtualenv (dbt-core pins versions the others need not share).
dbt_venv="$CLIENTS_DIR/dbt"
stamp="${DBT_PACKAGES[*]}"
if [ "$(cat "$dbt_venv/.eddy-packages" 2>/dev/null)" != "$stamp" ] || [ ! -x "$dbt_venv/bin/dbt" ]; then
    echo "==> dbt virtualenv in $dbt_venv: ${DBT_PACKAGES[*]}"
    rm -rf "$dbt_venv"
    python3 -m venv "$dbt_venv"
    "$dbt_venv/bin/pip" install --quiet --disable-pip-version-check "${DBT_PACKAGES[@]}"
    echo "$stamp" > "$dbt_venv/.eddy-packages"
else
    echo "dbt already installed: $dbt_venv"
fi

# Node: a package folder of its own.
node_dir="$CLIENTS_DIR/node"
stamp="${NODE_PACKAGES[*]}"
if [ "$(cat "$node_dir/.eddy-packages" 2>/dev/null)" != "$stamp" ] || [ ! -d "$node_dir/node_modules/pg" ] || [ ! -d "$node_dir/node_modules/postgres" ]; then
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
