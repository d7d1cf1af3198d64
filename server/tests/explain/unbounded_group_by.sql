CREATE TABLE clicks (user_id INT, page VARCHAR, ts TIMESTAMP) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW per_user AS
SELECT user_id, count(*) AS clicks, count(DISTINCT page) AS pages
FROM clicks GROUP BY user_id;
