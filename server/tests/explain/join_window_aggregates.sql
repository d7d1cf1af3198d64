CREATE TABLE bid (auction INT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW hot_items AS
SELECT a.auction, a.num FROM (
  SELECT auction, count(*) AS num, window_start AS starttime
  FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
  GROUP BY window_start, auction) a
JOIN (
  SELECT max(c.num) AS maxn, c.starttime_c FROM (
    SELECT count(*) AS num, window_start AS starttime_c
    FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
    GROUP BY auction, window_start) c
  GROUP BY c.starttime_c) m
ON a.starttime = m.starttime_c AND a.num >= m.maxn;
