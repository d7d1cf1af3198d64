// node-postgres (`pg`) against a running eddy: parameterized queries (the extended protocol),
// text results, errors with SQLSTATEs. Run by sqllogictest/tests/clients.rs with EDDY_PORT set.
const { Client } = require("pg");
const assert = require("assert/strict");

async function main() {
  const client = new Client({
    host: "127.0.0.1",
    port: Number(process.env.EDDY_PORT),
    user: process.env.EDDY_USER || "eddy",
    password: process.env.EDDY_PASSWORD || "",
    database: "dev",
  });
  await client.connect();
  await client.query("CREATE TABLE orders (id BIGINT PRIMARY KEY, item VARCHAR, qty INT, price DOUBLE)");
  for (const [id, item, qty, price] of [[1, "pen", 3, 1.5], [2, "ink", 1, 7.25], [3, "pen", 2, 1.5]]) {
    const res = await client.query("INSERT INTO orders VALUES ($1, $2, $3, $4)", [id, item, qty, price]);
    assert.equal(res.rowCount, 1);
  }
  await client.query(`CREATE MATERIALIZED VIEW per_item AS
                      SELECT item, sum(qty) AS qty FROM orders GROUP BY item`);
  await client.query("FLUSH");

  const rows = await client.query("SELECT id, item FROM orders WHERE price < $1 ORDER BY id", [2]);
  assert.deepEqual(rows.rows, [{ id: "1", item: "pen" }, { id: "3", item: "pen" }]);
  console.log("ok: pg: rows with a parameter (bigint as text, as node-postgres does)");

  const view = await client.query("SELECT item, qty FROM per_item WHERE item = $1", ["pen"]);
  assert.deepEqual(view.rows, [{ item: "pen", qty: "5" }]);
  assert.deepEqual(view.fields.map((f) => f.name), ["item", "qty"]);
  console.log("ok: pg: a view with a parameter");

  const typed = await client.query(
    "SELECT $1::int AS i, $2::double precision AS d, $3::boolean AS b, $4::text AS t",
    [42, 2.5, true, "x"]);
  assert.deepEqual(typed.rows, [{ i: 42, d: 2.5, b: true, t: "x" }]);
  console.log("ok: pg: typed parameters and results");

  // An integer literal is an int4, which pg reads as a number (an int8 would be a string);
  // unnamed columns are named as Postgres names them.
  const literals = await client.query("SELECT 1, 2 + 3, 5000000000 AS big, 1::int, CASE WHEN true THEN 1 END");
  assert.deepEqual(literals.fields.map((f) => f.name), ["?column?", "?column?", "big", "int4", "case"]);
  assert.deepEqual(literals.rows[0], { "?column?": 5, big: "5000000000", int4: 1, case: 1 });
  assert.deepEqual(literals.fields.map((f) => f.dataTypeID), [23, 23, 20, 23, 23]);
  console.log("ok: pg: integer literals are int4 and unnamed columns are named as in Postgres");

  await assert.rejects(client.query("SELECT * FROM nowhere WHERE id = $1", [1]),
                       (e) => e.code === "42P01");
  console.log("ok: pg: a missing table fails with 42P01");
  const again = await client.query("SELECT count(*) AS n FROM orders");
  assert.equal(again.rows[0].n, "3");
  await client.end();
  await postgresJs();
  console.log("node clients: all checks passed");
}

// Postgres.js (the npm package `postgres`): tagged-template queries over the extended
// protocol, with a JSON parameter.
async function postgresJs() {
  const postgres = require("postgres");
  const sql = postgres({
    host: "127.0.0.1",
    port: Number(process.env.EDDY_PORT),
    user: process.env.EDDY_USER || "eddy",
    password: process.env.EDDY_PASSWORD || "",
    database: "dev",
    max: 1,
  });
  try {
    const rows = await sql`SELECT id, item FROM orders WHERE qty > ${1} ORDER BY id`;
    assert.deepEqual(rows.map((r) => [String(r.id), r.item]), [["1", "pen"], ["3", "pen"]]);
    console.log("ok: postgres: a parameter");
    const json = await sql`SELECT ${sql.json({ a: 1, b: "two" })}::text AS doc`;
    assert.deepEqual(JSON.parse(json[0].doc), { a: 1, b: "two" });
    console.log("ok: postgres: a JSON parameter");
  } finally {
    await sql.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
