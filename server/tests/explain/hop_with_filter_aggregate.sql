CREATE TABLE bid (auction INT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW hot AS
SELECT auction, window_start, count(*) AS bids, count(*) FILTER (WHERE price > 100) AS big
FROM HOP(bid, ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
GROUP BY auction, window_start;
