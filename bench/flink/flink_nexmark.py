#!/usr/bin/env python3
"""Apache Flink SQL (PyFlink, local mini-cluster, streaming mode, event time) running a Nexmark
join query over the person, auction and bid JSON-lines files that `eddy-bench nexmark-files`
writes, so that Flink and Eddy read the very same events.

    flink_nexmark.py DIR --query q3|q4|q5|q7|q8|q9|q18|q19|q20 [-p 1] [--sink blackhole|count] [--primary-keys]

Prints one line `FLINK_RESULT {json}`: the job's wall time (after the mini-cluster is up and a
warm-up job has run), the CPU-seconds of the whole process tree (Python driver and JVM) during
the job, its peak RSS, the events read (rows of the files the query reads) and, with
`--sink count`, the number of result rows (inserts minus retractions).

Needs `pip install apache-flink psutil` and a Java 17 runtime.
"""
import argparse
import json
import os
import re
import threading
import time

import psutil

COLUMNS = {
    "person": "id BIGINT, name STRING, email_address STRING, credit_card STRING, city STRING, "
              "state STRING, date_time TIMESTAMP_LTZ(3), extra STRING",
    "auction": "id BIGINT, item_name STRING, description STRING, initial_bid BIGINT, reserve BIGINT, "
               "date_time TIMESTAMP_LTZ(3), expires TIMESTAMP_LTZ(3), seller BIGINT, category BIGINT, "
               "extra STRING",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
           "date_time TIMESTAMP_LTZ(3), extra STRING",
}

# The standard Nexmark forms, as Eddy's eddy-bench runs them.
QUERIES = {
    "q3": ("SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P ON A.seller = P.id "
           "WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')",
           ["auction", "person"], "name STRING, city STRING, state STRING, id BIGINT"),
    "q20": ("SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time, B.extra, "
            "A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS a_date_time, "
            "A.expires, A.seller, A.category, A.extra AS a_extra "
            "FROM bid B JOIN auction A ON B.auction = A.id WHERE A.category = 10",
            ["bid", "auction"],
            "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
            "date_time TIMESTAMP_LTZ(3), extra STRING, item_name STRING, description STRING, "
            "initial_bid BIGINT, reserve BIGINT, a_date_time TIMESTAMP_LTZ(3), "
            "expires TIMESTAMP_LTZ(3), seller BIGINT, category BIGINT, a_extra STRING"),
    "q4": ("SELECT Q.category, AVG(Q.final) AS avg_final FROM ("
           "SELECT MAX(B.price) AS final, A.category FROM auction A, bid B "
           "WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires "
           "GROUP BY A.id, A.category) Q GROUP BY Q.category",
           ["bid", "auction"], "category BIGINT, avg_final BIGINT"),
    "q5": ("SELECT AuctionBids.auction, AuctionBids.num FROM ("
           "SELECT auction, count(*) AS num, window_start AS starttime "
           "FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
           "GROUP BY window_start, window_end, auction) AS AuctionBids JOIN ("
           "SELECT max(CountBids.num) AS maxn, CountBids.starttime_c FROM ("
           "SELECT count(*) AS num, window_start AS starttime_c "
           "FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) "
           "GROUP BY auction, window_start, window_end) AS CountBids "
           "GROUP BY CountBids.starttime_c) AS MaxBids "
           "ON AuctionBids.starttime = MaxBids.starttime_c AND AuctionBids.num >= MaxBids.maxn",
           ["bid"], "auction BIGINT, num BIGINT"),
    "q7": ("SELECT B.auction, B.price, B.bidder, B.date_time FROM bid B JOIN ("
           "SELECT MAX(price) AS maxprice, window_end AS date_time "
           "FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) "
           "GROUP BY window_start, window_end) B1 ON B.price = B1.maxprice "
           "WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time",
           ["bid"], "auction BIGINT, price BIGINT, bidder BIGINT, date_time TIMESTAMP_LTZ(3)"),
    "q8": ("SELECT P.id, P.name, P.starttime FROM ("
           "SELECT id, name, window_start AS starttime, window_end AS endtime "
           "FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) "
           "GROUP BY id, name, window_start, window_end) P JOIN ("
           "SELECT seller, window_start AS starttime, window_end AS endtime "
           "FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) "
           "GROUP BY seller, window_start, window_end) A "
           "ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime",
           ["person", "auction"], "id BIGINT, name STRING, starttime TIMESTAMP(3)"),
    "q18": ("SELECT auction, bidder, price, channel, url, date_time, extra FROM ("
            "SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) "
            "AS rank_number FROM bid) WHERE rank_number <= 1",
            ["bid"], "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
            "date_time TIMESTAMP_LTZ(3), extra STRING"),
    "q19": ("SELECT auction, bidder, price, channel, url, date_time, extra, rank_number FROM ("
            "SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) "
            "AS rank_number FROM bid) WHERE rank_number <= 10",
            ["bid"], "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
            "date_time TIMESTAMP_LTZ(3), extra STRING, rank_number BIGINT"),
    "q9": ("SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, "
           "category, auction, bidder, price, bid_date_time FROM ("
           "SELECT A.id, A.item_name, A.description, A.initial_bid, A.reserve, A.date_time, "
           "A.expires, A.seller, A.category, B.auction, B.bidder, B.price, "
           "B.date_time AS bid_date_time, ROW_NUMBER() OVER (PARTITION BY A.id "
           "ORDER BY B.price DESC, B.date_time ASC) AS rownum FROM auction A, bid B "
           "WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires) "
           "WHERE rownum <= 1",
           ["bid", "auction"],
           "id BIGINT, item_name STRING, description STRING, initial_bid BIGINT, reserve BIGINT, "
           "date_time TIMESTAMP_LTZ(3), expires TIMESTAMP_LTZ(3), seller BIGINT, category BIGINT, "
           "auction BIGINT, bidder BIGINT, price BIGINT, bid_date_time TIMESTAMP_LTZ(3)"),
}


def tree(measure):
    me = psutil.Process()
    total = 0
    for process in [me] + me.children(recursive=True):
        try:
            total += measure(process)
        except psutil.Error:
            pass
    return total


def cpu(process):
    times = process.cpu_times()
    return times.user + times.system


def lines(path):
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


args = argparse.ArgumentParser()
args.add_argument("dir")
args.add_argument("--query", choices=sorted(QUERIES), default="q20")
args.add_argument("-p", "--parallelism", type=int, default=1)
args.add_argument("--sink", choices=["blackhole", "count"], default="blackhole")
args.add_argument("--primary-keys", action="store_true",
                  help="declare id the PRIMARY KEY (NOT ENFORCED) of person and auction, as eddy-bench does")
a = args.parse_args()
query, tables, sink_columns = QUERIES[a.query]

from pyflink.table import EnvironmentSettings, TableEnvironment  # noqa: E402

env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
env.get_config().set("parallelism.default", str(a.parallelism))
env.get_config().set("table.local-time-zone", "UTC")


def source(name, path):
    table = name.split('_')[0]
    key = ", PRIMARY KEY (id) NOT ENFORCED" if a.primary_keys and table in ("person", "auction") else ""
    env.execute_sql(f"""
    CREATE TEMPORARY TABLE {name} ({COLUMNS[table]},
        WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND{key}
    ) WITH ('connector' = 'filesystem', 'path' = '{os.path.abspath(path)}', 'format' = 'json',
            'json.timestamp-format.standard' = 'ISO-8601', 'json.fail-on-missing-field' = 'false')""")


# Warm-up: the same query over the first line of each file (class loading, planning, deploy).
warm = "/tmp/flink-nexmark-warmup"
os.makedirs(warm, exist_ok=True)
for table in tables:
    with open(os.path.join(a.dir, f"{table}.jsonl")) as f, open(os.path.join(warm, f"{table}.jsonl"), "w") as w:
        w.write(f.readline())
    source(f"{table}_warm", os.path.join(warm, f"{table}.jsonl"))
env.execute_sql(f"CREATE TEMPORARY TABLE warm_sink ({sink_columns}) WITH ('connector' = 'blackhole')")
warm_query = query
for table in tables:
    # The table where it is read (FROM t, JOIN t, TABLE t, ", t B"), not columns of that name.
    warm_query = re.sub(rf"\b(FROM|JOIN|TABLE)\s+{table}\b", rf"\1 {table}_warm", warm_query)
    warm_query = re.sub(rf",\s*{table}\s+([A-Z]\w*)\b", rf", {table}_warm \1", warm_query)
env.execute_sql("INSERT INTO warm_sink " + warm_query).wait()

for table in tables:
    source(table, os.path.join(a.dir, f"{table}.jsonl"))
events = sum(lines(os.path.join(a.dir, f"{t}.jsonl")) for t in tables)
if a.sink == "blackhole":
    env.execute_sql(f"CREATE TEMPORARY TABLE sink ({sink_columns}) WITH ('connector' = 'blackhole')")
peak = [tree(lambda p: p.memory_info().rss)]
stop = threading.Event()


def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], tree(lambda p: p.memory_info().rss))
        stop.wait(0.1)


sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
cpu0, t0 = tree(cpu), time.time()
result_rows = None
if a.sink == "blackhole":
    env.execute_sql("INSERT INTO sink " + query).wait()
else:
    result_rows = 0
    with env.execute_sql(query).collect() as results:
        for row in results:
            kind = str(row.get_row_kind())
            result_rows += -1 if ("DELETE" in kind or "UPDATE_BEFORE" in kind) else 1
t1, cpu1 = time.time(), tree(cpu)
stop.set()
sampler.join()
print("FLINK_RESULT " + json.dumps({
    "query": a.query, "parallelism": a.parallelism, "events": events,
    "job_s": round(t1 - t0, 2), "job_cpu_s": round(cpu1 - cpu0, 2),
    "events_per_cpu_s": round(events / max(cpu1 - cpu0, 1e-9)),
    "peak_rss_mb": round(peak[0] / 2**20), "result_rows": result_rows,
}))
