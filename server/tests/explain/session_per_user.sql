CREATE TABLE clicks (user_id INT, page VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW sessions AS
SELECT user_id, window_start, window_end, count(*) AS pages
FROM SESSION(clicks, ts, INTERVAL '30' SECOND)
GROUP BY user_id, window_start, window_end;
