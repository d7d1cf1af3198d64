CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP) APPEND ONLY;
CREATE VIEW b AS SELECT *, PROCTIME() AS p_time FROM bid;
EXPLAIN CREATE MATERIALIZED VIEW q12 AS
SELECT bidder, count(*) AS bid_count, window_start, window_end
FROM TUMBLE(b, p_time, INTERVAL '10' SECOND)
GROUP BY bidder, window_start, window_end;
