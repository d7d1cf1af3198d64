CREATE TABLE bids (id INT PRIMARY KEY, auction INT, price BIGINT);
EXPLAIN CREATE MATERIALIZED VIEW top2 AS
SELECT auction, id, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, id) AS rn FROM bids
) t WHERE rn <= 2;
