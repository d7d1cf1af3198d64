CREATE TABLE clicks (user_id INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
CREATE MATERIALIZED VIEW per_second AS
SELECT user_id, window_start AS second_start, window_end AS second_end, count(*) AS n
FROM TUMBLE(clicks, ts, INTERVAL '1' SECOND)
GROUP BY user_id, window_start, window_end;
EXPLAIN CREATE MATERIALIZED VIEW per_minute AS
SELECT window_start, sum(n) AS clicks
FROM TUMBLE(per_second, second_end, INTERVAL '1' MINUTE)
GROUP BY window_start
EMIT ON WINDOW CLOSE;
