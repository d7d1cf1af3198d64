"""Python's Postgres stack against a running eddy: psycopg 3 with parameters and prepared
statements, psycopg 2's and psycopg 3's named (server-side) cursors, asyncpg's arrays (read after its type
introspection), uuids with both, SQLAlchemy's inspector and stream_results, pandas.read_sql of a materialized view, pgcli's completion queries. Run by sqllogictest/tests/clients.rs with
EDDY_PORT set; exits non-zero (with the failing check) on any mismatch."""

import asyncio
import datetime
import decimal
import os
import sys
import uuid

import asyncpg
import pandas
import psycopg
import psycopg.rows
from pgcli.pgexecute import PGExecute
import psycopg2
import sqlalchemy

PORT = int(os.environ["EDDY_PORT"])
USER = os.environ.get("EDDY_USER", "eddy")
PASSWORD = os.environ.get("EDDY_PASSWORD", "")


def check(label, got, expected):
    if got != expected:
        sys.exit(f"{label}: expected {expected!r}, got {got!r}")
    print(f"ok: {label}")


def psycopg_with_parameters():
    with psycopg.connect(host="127.0.0.1", port=PORT, user=USER, password=PASSWORD,
                         dbname="dev", autocommit=True) as conn:
        conn.execute("CREATE TABLE readings (sensor INT PRIMARY KEY, site VARCHAR, value DOUBLE)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO readings VALUES (%s, %s, %s)",
                            [(1, "north", 20.5), (2, "south", 18.0), (3, "north", 22.5)])
        conn.execute("""CREATE MATERIALIZED VIEW per_site AS
                        SELECT site, count(*) AS readings, max(value) AS peak
                        FROM readings GROUP BY site""")
        conn.execute("CREATE INDEX readings_by_site ON readings (site) INCLUDE (value)")
        conn.execute("""CREATE SOURCE bids (auction BIGINT, price BIGINT) WITH (
                        connector = 'nexmark', nexmark.table.type = 'bid',
                        nexmark.event.rate = '10', nexmark.max.events = '10')""")
        conn.execute("FLUSH")
        rows = conn.execute("SELECT sensor, site FROM readings WHERE value > %s ORDER BY sensor",
                            (19.0,)).fetchall()
        check("psycopg: rows with a parameter", rows, [(1, "north"), (3, "north")])
        row = conn.execute("SELECT site, readings, peak FROM per_site WHERE site = %(site)s",
                           {"site": "north"}).fetchone()
        check("psycopg: a view with a named parameter", row, ("north", 2, 22.5))
        # Binary results: psycopg asks for them per query.
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT sensor, value FROM readings WHERE sensor = %s", (2,))
            check("psycopg: binary results", cur.fetchone(), (2, 18.0))
        # Every scalar type, decoded by psycopg from binary and from text results.
        all_types = """SELECT 1::int2, 2::int4, 3::int8, 1.5::float4, 2.25::float8,
            12.345::numeric(10,3), true, 'x'::text, TIMESTAMP '2026-01-02 03:04:05.5',
            TIMESTAMPTZ '2026-01-02 05:04:05+02',
            DATE '2026-01-02', TIME '03:04:05', INTERVAL '1 day 2 hours',
            decode('deadbeef', 'hex'), ARRAY[1, 2, 3], ARRAY['a', 'b c']"""
        expected = (1, 2, 3, 1.5, 2.25, decimal.Decimal("12.345"), True, "x",
                    datetime.datetime(2026, 1, 2, 3, 4, 5, 500000),
                    datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
                    datetime.date(2026, 1, 2),
                    datetime.time(3, 4, 5), datetime.timedelta(days=1, hours=2),
                    b"\xde\xad\xbe\xef", [1, 2, 3], ["a", "b c"])
        for binary in (True, False):
            with conn.cursor(binary=binary) as cur:
                cur.execute(all_types)
                check(f"psycopg: every type ({'binary' if binary else 'text'})",
                      cur.fetchone(), expected)
        # Columns by name, as Postgres names unnamed ones; integer literals are int4.
        with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
            cur.execute("SELECT sensor + 1, count(*), upper(site), EXISTS (SELECT 1), 7"
                        " FROM readings WHERE sensor = 1 GROUP BY sensor, site")
            check("psycopg: unnamed columns as Postgres names them", cur.fetchone(),
                  {"?column?": 7, "count": 1, "upper": "NORTH", "exists": True})
            check("psycopg: types of an int column + 1 and of a literal",
                  [d.type_code for d in cur.description], [23, 20, 25, 16, 23])
        try:
            conn.execute("SELECT 2147483647 + 1")
            sys.exit("psycopg: integer overflow raised nothing")
        except psycopg.errors.NumericValueOutOfRange:
            print("ok: psycopg: integer overflow raises NumericValueOutOfRange")
        try:
            conn.execute("SELECT * FROM no_such_table")
            sys.exit("psycopg: a missing table raised nothing")
        except psycopg.errors.UndefinedTable:
            print("ok: psycopg: a missing table raises UndefinedTable")


def sqlalchemy_inspector_and_pandas():
    url = f"postgresql+psycopg://{USER}:{PASSWORD}@127.0.0.1:{PORT}/dev"
    engine = sqlalchemy.create_engine(url)
    inspector = sqlalchemy.inspect(engine)
    check("sqlalchemy: get_table_names", inspector.get_table_names(), ["readings"])
    check("sqlalchemy: get_view_names", inspector.get_view_names(), [])
    check("sqlalchemy: get_materialized_view_names",
          inspector.get_materialized_view_names(), ["per_site"])
    # A VARCHAR column is a varchar, as in Postgres.
    columns = [(c["name"], str(c["type"]), c["nullable"])
               for c in inspector.get_columns("readings")]
    check("sqlalchemy: get_columns", columns,
          [("sensor", "INTEGER", False), ("site", "VARCHAR", True),
           ("value", "DOUBLE PRECISION", True)])
    view_columns = [c["name"] for c in inspector.get_columns("per_site")]
    check("sqlalchemy: get_columns of a view", view_columns, ["site", "readings", "peak"])
    pk = inspector.get_pk_constraint("readings")
    check("sqlalchemy: get_pk_constraint", pk["constrained_columns"], ["sensor"])
    # What Superset's schema browser asks the inspector for, beyond the above.
    check("sqlalchemy: get_schema_names", inspector.get_schema_names(),
          ["eddy_catalog", "information_schema", "public"])
    check("sqlalchemy: get_foreign_table_names (sources)",
          inspector.get_foreign_table_names(), ["bids"])
    check("sqlalchemy: get_foreign_keys", inspector.get_foreign_keys("readings"), [])
    # As SQLAlchemy reflects the same index from PostgreSQL 15 (the primary key's is not listed).
    check("sqlalchemy: get_indexes", inspector.get_indexes("readings"),
          [{"name": "readings_by_site", "unique": False, "column_names": ["site"],
            "dialect_options": {"postgresql_include": ["value"]}}])
    check("sqlalchemy: get_table_comment", inspector.get_table_comment("readings"), {"text": None})
    frame = pandas.read_sql("SELECT site, readings, peak FROM per_site ORDER BY site", engine)
    check("pandas: read_sql of a view",
          frame.to_dict("records"),
          [{"site": "north", "readings": 2, "peak": 22.5},
           {"site": "south", "readings": 1, "peak": 18.0}])


def psycopg_prepared_then_rollback():
    # Once a statement is prepared, psycopg 3 sends DEALLOCATE ALL after a ROLLBACK or a DDL.
    with psycopg.connect(host="127.0.0.1", port=PORT, user=USER, password=PASSWORD,
                         dbname="dev", prepare_threshold=0) as conn:
        for _ in range(2):
            row = conn.execute("SELECT sensor FROM readings WHERE sensor = %s", (1,)).fetchone()
        check("psycopg: a prepared statement", row, (1,))
        conn.rollback()
        conn.execute("CREATE TABLE scratch (a INT)")
        conn.execute("DROP TABLE scratch")
        conn.rollback()
        row = conn.execute("SELECT sensor FROM readings WHERE sensor = %s", (3,)).fetchone()
        check("psycopg: prepared again after DEALLOCATE ALL", row, (3,))


def psycopg2_named_cursor():
    conn = psycopg2.connect(host="127.0.0.1", port=PORT, user=USER, password=PASSWORD,
                            dbname="dev")
    try:
        with conn.cursor(name="readings_cursor") as cur:
            cur.itersize = 2  # FETCH FORWARD 2 at a time
            cur.execute("SELECT sensor, value FROM readings ORDER BY sensor")
            rows = list(cur)
        check("psycopg2: a named cursor, fetched 2 rows at a time", rows,
              [(1, 20.5), (2, 18.0), (3, 22.5)])
        conn.commit()
        # A scrollable one (DECLARE ... SCROLL CURSOR; scroll() sends MOVE).
        with conn.cursor(name="scrolling", scrollable=True) as cur:
            cur.execute("SELECT sensor FROM readings ORDER BY sensor")
            first_two = cur.fetchmany(2)
            cur.scroll(-2)
            again = cur.fetchone()
            cur.scroll(2, mode="absolute")
            second = cur.fetchone()
        check("psycopg2: a scrollable cursor moves back", (first_two, again, second),
              ([(1,), (2,)], (1,), (3,)))
        conn.commit()
    finally:
        conn.close()


def psycopg_named_cursor():
    """psycopg 3's server-side cursors: DECLARE, then a Describe of the cursor as a portal
    (Postgres' cursors are portals), then FETCH FORWARD n."""
    with psycopg.connect(host="127.0.0.1", port=PORT, user=USER, password=PASSWORD,
                         dbname="dev") as conn:
        with conn.cursor(name="big") as cur:
            cur.execute("SELECT generate_series(1, 5)")
            check("psycopg: a named cursor's columns", [c.name for c in cur.description],
                  ["generate_series"])
            check("psycopg: a named cursor, all rows", cur.fetchall(),
                  [(1,), (2,), (3,), (4,), (5,)])
        with conn.cursor(name="bit_by_bit") as cur:
            cur.itersize = 2
            cur.execute("SELECT sensor, value FROM readings ORDER BY sensor")
            check("psycopg: a named cursor, fetched 2 rows at a time", list(cur),
                  [(1, 20.5), (2, 18.0), (3, 22.5)])
        with conn.cursor(name="binary_one", binary=True) as cur:
            cur.execute("SELECT sensor FROM readings ORDER BY sensor")
            check("psycopg: a binary named cursor", cur.fetchmany(2), [(1,), (2,)])
        conn.commit()


def sqlalchemy_stream_results():
    url = f"postgresql+psycopg2://{USER}:{PASSWORD}@127.0.0.1:{PORT}/dev"
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, max_row_buffer=2).execute(
            sqlalchemy.text("SELECT sensor FROM readings ORDER BY sensor"))
        check("sqlalchemy: stream_results (a server-side cursor)",
              [row.sensor for row in result], [1, 2, 3])


def pgcli_completion_metadata():
    """What pgcli's completer loads on connect (its completion thread stops at the first
    error): columns with their types' names, and functions with their argument types."""
    pgexecute = PGExecute(database="dev", user=USER, password=PASSWORD or None,
                          host="127.0.0.1", port=PORT, dsn=None)
    columns = {(table, column): type_name
               for _, table, column, type_name, *_ in pgexecute.table_columns()}
    check("pgcli: a table's columns with their types' names",
          (columns.get(("readings", "sensor")), columns.get(("readings", "value"))),
          ("integer", "double precision"))
    # Every overload of length(), in no particular order: length(text) returns integer.
    lengths = {(f.arg_types[:1], f.return_type) for f in pgexecute.functions()
               if f.func_name == "length"}
    check("pgcli: functions with their argument and result types",
          (("text",), "integer") in lengths, True)
    check("pgcli: tables and views", ("public", "readings") in set(pgexecute.tables()), True)


async def asyncpg_arrays():
    """asyncpg decodes in binary with codecs it finds by introspecting each type it has not
    seen, with a query whose result must be typed as Postgres types it (`oid[]`)."""
    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user=USER,
                                 password=PASSWORD or None, database="dev")
    try:
        row = await conn.fetchrow("""SELECT ARRAY[1, 2, 3]::int[] AS ints,
            ARRAY[1.5::float8, 2.5::float8] AS floats, ARRAY[true, false] AS bools,
            ARRAY[2::smallint] AS smalls, ARRAY[DATE '2026-01-02'] AS dates,
            ARRAY['a', 'b c'] AS texts""")
        check("asyncpg: int, float, bool, date and text arrays", dict(row), {
            "ints": [1, 2, 3], "floats": [1.5, 2.5], "bools": [True, False], "smalls": [2],
            "dates": [datetime.date(2026, 1, 2)], "texts": ["a", "b c"]})
        rows = await conn.fetch(
            "SELECT site, array_agg(sensor ORDER BY sensor) AS sensors FROM readings"
            " WHERE site = $1 GROUP BY site", "north")
        check("asyncpg: array_agg with a parameter", [tuple(r) for r in rows],
              [("north", [1, 3])])
        statement = await conn.prepare("SELECT array_agg(oid) AS oids FROM pg_type WHERE oid = 23")
        check("asyncpg: array_agg of oids is oid[]",
              (statement.get_attributes()[0].type.name, await statement.fetchval()),
              ("oid[]", [23]))
    finally:
        await conn.close()


def psycopg_uuids():
    """psycopg 3 sends uuid.UUID parameters typed uuid and reads uuid columns back as
    uuid.UUID, in text and in binary."""
    first, second = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), uuid.uuid4()
    with psycopg.connect(host="127.0.0.1", port=PORT, user=USER, password=PASSWORD,
                         dbname="dev", autocommit=True) as conn:
        conn.execute("CREATE TABLE accounts (id UUID PRIMARY KEY, owner TEXT)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO accounts VALUES (%s, %s)",
                            [(first, "ann"), (second, "bob")])
        # Upper case, as some applications write them: read as Postgres reads it.
        conn.execute("INSERT INTO accounts VALUES ('C0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'cy')")
        for binary in (True, False):
            with conn.cursor(binary=binary) as cur:
                cur.execute("SELECT id, owner FROM accounts WHERE id = %s", (first,))
                check(f"psycopg: a uuid key by parameter ({'binary' if binary else 'text'})",
                      cur.fetchall(), [(first, "ann")])
                cur.execute("SELECT id FROM accounts WHERE owner = 'cy'")
                check(f"psycopg: a uuid read back ({'binary' if binary else 'text'})",
                      cur.fetchone(), (uuid.UUID("c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),))
        row = conn.execute("SELECT gen_random_uuid()").fetchone()
        check("psycopg: gen_random_uuid() is a version 4 uuid", row[0].version, 4)
        try:
            conn.execute("INSERT INTO accounts VALUES (%s, 'dan')", ("not-a-uuid",))
            sys.exit("psycopg: a bad uuid raised nothing")
        except psycopg.errors.InvalidTextRepresentation:
            print("ok: psycopg: a bad uuid raises InvalidTextRepresentation")


async def asyncpg_uuids():
    """asyncpg encodes and decodes uuid in binary (16 bytes), by the types Describe gives."""
    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user=USER,
                                 password=PASSWORD or None, database="dev")
    try:
        key = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
        rows = await conn.fetch("SELECT id, owner FROM accounts WHERE id = $1", key)
        check("asyncpg: a uuid key by parameter", [tuple(r) for r in rows], [(key, "ann")])
        fresh = uuid.uuid4()
        await conn.execute("INSERT INTO accounts VALUES ($1, $2)", fresh, "eve")
        value = await conn.fetchval("SELECT id FROM accounts WHERE owner = $1", "eve")
        check("asyncpg: a uuid written and read back", value, fresh)
        value = await conn.fetchval("SELECT $1::uuid", key)
        check("asyncpg: a parameter cast to uuid", value, key)
        await conn.execute("DROP TABLE accounts")
    finally:
        await conn.close()


psycopg_with_parameters()
asyncio.run(asyncpg_arrays())
psycopg_uuids()
asyncio.run(asyncpg_uuids())
pgcli_completion_metadata()
psycopg_prepared_then_rollback()
psycopg2_named_cursor()
psycopg_named_cursor()
sqlalchemy_stream_results()
sqlalchemy_inspector_and_pandas()
print("python clients: all checks passed")
