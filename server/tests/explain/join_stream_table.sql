CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
CREATE TABLE auction (id BIGINT PRIMARY KEY, seller BIGINT, category INT);
EXPLAIN CREATE MATERIALIZED VIEW enriched AS
SELECT b.auction, b.price, a.seller FROM bid b JOIN auction a ON b.auction = a.id
WHERE a.category = 10;
