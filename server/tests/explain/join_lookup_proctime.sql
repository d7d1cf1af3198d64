CREATE TABLE orders (id INT, customer INT, ts TIMESTAMP) APPEND ONLY;
CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR);
EXPLAIN CREATE MATERIALIZED VIEW named_orders AS
SELECT o.id, c.name FROM orders o JOIN customers FOR SYSTEM_TIME AS OF PROCTIME() c ON o.customer = c.id;
