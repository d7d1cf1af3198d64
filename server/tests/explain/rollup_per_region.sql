CREATE TABLE ex_sales (id INT PRIMARY KEY, region TEXT, product TEXT, qty INT);
EXPLAIN CREATE MATERIALIZED VIEW sales_rollup AS
SELECT region, product, count(*) AS n, sum(qty) AS total, GROUPING(region, product) AS g
FROM ex_sales GROUP BY ROLLUP(region, product);
