"""Reads the files a file sink wrote with pyarrow, as a real reader would.

Usage: read_sink_files.py DIR parquet|jsonl
Prints one JSON object: {"files": N, "rows": [row objects...], "temporary": N}.
"""

import json
import os
import sys

import pyarrow.json as pa_json
import pyarrow.parquet as pq

directory, kind = sys.argv[1], sys.argv[2]
names = sorted(n for n in os.listdir(directory) if n.startswith("part-") and n.endswith("." + kind))
rows = []
for name in names:
    path = os.path.join(directory, name)
    table = pq.read_table(path) if kind == "parquet" else pa_json.read_json(path)
    rows.extend(table.to_pylist())
temporary = sum(1 for n in os.listdir(directory) if n.startswith("."))
print(json.dumps({"files": len(names), "rows": rows, "temporary": temporary}, default=str))
