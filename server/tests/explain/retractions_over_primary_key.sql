CREATE TABLE accounts (id INT PRIMARY KEY, region VARCHAR, balance BIGINT);
EXPLAIN CREATE MATERIALIZED VIEW per_region AS
SELECT region, count(*) AS n, sum(balance) AS total, min(balance) AS low
FROM accounts GROUP BY region;
