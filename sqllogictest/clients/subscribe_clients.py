"""SUBSCRIBE from Python's drivers against a running eddy: psycopg 3 and psycopg 2 declare a
cursor over a SUBSCRIBE and FETCH from it (the snapshot, then each committed change with its
epoch and diff, progress rows, FETCH ... WITH (timeout) returning nothing when nothing changed,
AS OF resuming after an epoch), and psycopg 3's COPY reads COPY (SUBSCRIBE ...) TO STDOUT as
it comes. Run by sqllogictest/tests/subscribe.rs with EDDY_PORT set; exits non-zero (with the
failing check) on any mismatch."""

import os
import sys

import psycopg
import psycopg2
import psycopg2.errors

PORT = int(os.environ["EDDY_PORT"])
DSN = f"host=127.0.0.1 port={PORT} user=eddy dbname=dev"


def check(label, got, expected):
    if got != expected:
        sys.exit(f"{label}: expected {expected!r}, got {got!r}")
    print(f"ok: {label}")


def fetch_until(cur, cursor, wanted, timeout="1s", limit=30):
    """FETCHes until `wanted` rows came (or `limit` FETCHes), returning them all."""
    rows = []
    for _ in range(limit):
        cur.execute(f"FETCH 100 FROM {cursor} WITH (timeout = '{timeout}')")
        rows.extend(cur.fetchall())
        if len(rows) >= wanted:
            break
    return rows


def data(rows):
    """Rows without their epoch: (diff, columns...), sorted within the batch."""
    return sorted(tuple(r[1:]) for r in rows)


writer = psycopg.connect(DSN, autocommit=True)
writer.execute("CREATE TABLE accounts (id INT PRIMARY KEY, owner TEXT, balance BIGINT)")
writer.execute(
    "CREATE MATERIALIZED VIEW by_owner AS "
    "SELECT owner, count(*) AS accounts, sum(balance) AS total FROM accounts GROUP BY owner"
)
writer.execute("INSERT INTO accounts VALUES (1, 'ann', 10), (2, 'bob', 20), (3, 'ann', 5)")

# psycopg 3: a cursor over a SUBSCRIBE in a transaction, FETCHed with a timeout.
with psycopg.connect(DSN) as conn:
    cur = conn.cursor()
    cur.execute("DECLARE sub CURSOR FOR SUBSCRIBE TO by_owner")
    snapshot = fetch_until(cur, "sub", 2)
    check(
        "psycopg: the snapshot, each row +1",
        data(snapshot),
        [(1, "ann", 2, 15), (1, "bob", 1, 20)],
    )
    start = snapshot[0][0]
    check("psycopg: the snapshot rows share their epoch", {r[0] for r in snapshot}, {start})
    check(
        "psycopg: the columns",
        [c.name for c in cur.description],
        ["eddy_epoch", "eddy_diff", "owner", "accounts", "total"],
    )
    cur.execute("FETCH 10 FROM sub WITH (timeout = '200ms')")
    check("psycopg: nothing new within the timeout", cur.fetchall(), [])

    writer.execute("UPDATE accounts SET balance = 50 WHERE id = 2")
    change = fetch_until(cur, "sub", 2)
    check(
        "psycopg: an update is -1 of the old row then +1 of the new",
        [tuple(r[1:]) for r in change],
        [(-1, "bob", 1, 20), (1, "bob", 1, 50)],
    )
    first_change = change[0][0]
    check("psycopg: the change is of a later epoch", first_change > start, True)

    writer.execute("INSERT INTO accounts VALUES (4, 'cy', 7)")
    writer.execute("DELETE FROM accounts WHERE id = 1")
    later = fetch_until(cur, "sub", 3)
    check(
        "psycopg: changes in epoch order",
        [r[0] for r in later] == sorted(r[0] for r in later) and later[0][0] > first_change,
        True,
    )
    check(
        "psycopg: an insert and a changed group",
        sorted(tuple(r[1:]) for r in later),
        [(-1, "ann", 2, 15), (1, "ann", 1, 5), (1, "cy", 1, 7)],
    )
    seen = later[-1][0]
    cur.execute("CLOSE sub")

# snapshot = false and progress rows.
with psycopg.connect(DSN) as conn:
    cur = conn.cursor()
    cur.execute(
        "DECLARE p CURSOR FOR SUBSCRIBE TO (SELECT owner, total FROM by_owner WHERE owner <> 'cy') "
        "WITH (snapshot = false, progress = true)"
    )
    first = fetch_until(cur, "p", 1)
    check("psycopg: snapshot = false starts with a progress row only", len(first), 1)
    check("psycopg: a progress row", (first[0][1], first[0][2:]), (True, (None, None, None)))
    writer.execute("UPDATE accounts SET balance = balance + 1 WHERE owner IN ('bob', 'cy')")
    rows = fetch_until(cur, "p", 3)
    check(
        "psycopg: the query's rows, then the epoch's progress row",
        [(r[1], r[2], r[3], r[4]) for r in rows[:3]],
        [(False, -1, "bob", 50), (False, 1, "bob", 51), (True, None, None, None)],
    )
    check("psycopg: the progress row closes the epoch of the rows", rows[2][0], rows[0][0])
    update_epoch = rows[0][0]
    conn.rollback()

# AS OF: every change after an epoch seen, no snapshot.
with psycopg.connect(DSN) as conn:
    cur = conn.cursor()
    cur.execute(f"DECLARE r CURSOR FOR SUBSCRIBE TO by_owner AS OF {seen}")
    resumed = fetch_until(cur, "r", 4)
    check(
        "psycopg: AS OF resumes with the changes after that epoch",
        sorted((r[0], tuple(r[1:])) for r in resumed),
        [
            (update_epoch, (-1, "bob", 1, 50)),
            (update_epoch, (-1, "cy", 1, 7)),
            (update_epoch, (1, "bob", 1, 51)),
            (update_epoch, (1, "cy", 1, 8)),
        ],
    )
    conn.rollback()
    try:
        cur.execute("DECLARE old CURSOR FOR SUBSCRIBE TO by_owner AS OF 1")
        sys.exit("AS OF an epoch before the history should fail")
    except psycopg.errors.SnapshotTooOld as e:
        print(f"ok: AS OF too old: {e}")
    conn.rollback()

# Errors, in PostgreSQL's codes.
with psycopg.connect(DSN) as conn:
    for sql, error in [
        ("DECLARE e CURSOR FOR SUBSCRIBE TO missing", psycopg.errors.UndefinedTable),
        (
            "DECLARE e CURSOR FOR SUBSCRIBE TO (SELECT owner, count(*) FROM accounts GROUP BY owner)",
            psycopg.errors.FeatureNotSupported,
        ),
        (
            "DECLARE e CURSOR FOR SUBSCRIBE TO (SELECT * FROM accounts a JOIN by_owner b ON a.owner = b.owner)",
            psycopg.errors.FeatureNotSupported,
        ),
        ("SUBSCRIBE TO by_owner", psycopg.errors.FeatureNotSupported),
    ]:
        try:
            conn.execute(sql)
            sys.exit(f"{sql} should fail")
        except error as e:
            print(f"ok: {sql}: {e.sqlstate}")
        conn.rollback()

# psycopg 2 (a transaction opened implicitly): DECLARE, then FETCH.
conn2 = psycopg2.connect(DSN)
cur2 = conn2.cursor()
cur2.execute("DECLARE s2 CURSOR FOR SUBSCRIBE accounts WITH (snapshot = false)")
cur2.execute("FETCH 10 FROM s2 WITH (timeout = '100ms')")
check("psycopg2: nothing yet", cur2.fetchall(), [])
writer.execute("INSERT INTO accounts VALUES (9, 'dee', 1)")
rows2 = []
for _ in range(30):
    cur2.execute("FETCH 10 FROM s2 WITH (timeout = '1s')")
    rows2 += cur2.fetchall()
    if rows2:
        break
check("psycopg2: a table's insert", [tuple(r[1:]) for r in rows2], [(1, 9, "dee", 1)])
conn2.rollback()
conn2.close()

# psycopg 3's COPY: rows as they come. Eddy does not act on cancel requests (which psycopg
# sends when a COPY block is left early), so the client closes its connection instead.
conn = psycopg.connect(DSN, autocommit=True)
copying = conn.cursor().copy("COPY (SUBSCRIBE TO by_owner WITH (snapshot = false)) TO STDOUT")
copy = copying.__enter__()
writer.execute("INSERT INTO accounts VALUES (10, 'eve', 3)")
line = b""
for block in copy:
    line += bytes(block)
    if b"\n" in line:
        break
fields = line.decode().strip().split("\t")
check("psycopg COPY: a row as it came", fields[1:], ["1", "eve", "1", "3"])
conn.close()
print("ok: psycopg COPY ended by the client leaving")

check(
    "the server still answers",
    writer.execute("SELECT count(*) FROM accounts").fetchone()[0],
    5,
)
print("subscribe clients: all checks passed")
