CREATE TABLE orders (id INT PRIMARY KEY, customer INT);
CREATE TABLE blocked (customer INT PRIMARY KEY);
EXPLAIN CREATE MATERIALIZED VIEW allowed AS
SELECT id FROM orders o
WHERE NOT EXISTS (SELECT 1 FROM blocked b WHERE b.customer = o.customer);
