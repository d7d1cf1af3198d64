CREATE TABLE person (id INT, name VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
CREATE TABLE auction (id INT, seller INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW people_and_auctions AS
SELECT p.id, p.window_start, a.id AS auction
FROM TUMBLE(person, ts, INTERVAL '10' SECOND) p
FULL JOIN TUMBLE(auction, ts, INTERVAL '10' SECOND) a
  ON p.id = a.seller AND p.window_start = a.window_start AND p.window_end = a.window_end;
