CREATE TABLE bid (auction INT, price BIGINT, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW highest_bids AS
SELECT b.auction, b.price, b.date_time FROM bid b
JOIN (SELECT max(price) AS maxprice, window_end AS date_time
      FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND)
      GROUP BY window_start, window_end) m
  ON b.price = m.maxprice
WHERE b.date_time BETWEEN m.date_time - INTERVAL '10' SECOND AND m.date_time;
