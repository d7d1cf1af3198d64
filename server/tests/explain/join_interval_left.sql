CREATE TABLE clicks (user_id INT, url VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
CREATE TABLE buys (user_id INT, amount BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW clicks_with_buys AS
SELECT c.user_id, c.url, c.ts, b.amount
FROM clicks c LEFT JOIN buys b ON c.user_id = b.user_id
 AND b.ts BETWEEN c.ts AND c.ts + INTERVAL '10' SECOND
EMIT ON WINDOW CLOSE;
