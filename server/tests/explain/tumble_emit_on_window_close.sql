CREATE TABLE bid (auction INT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW per_minute AS
SELECT auction, window_start, window_end, count(*) AS bids, max(price) AS top
FROM TUMBLE(bid, ts, INTERVAL '1' MINUTE)
WHERE price > 0
GROUP BY auction, window_start, window_end
EMIT ON WINDOW CLOSE;
