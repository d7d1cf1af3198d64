CREATE TABLE readings (sensor INT, value DOUBLE, ts TIMESTAMP) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW hot AS
SELECT sensor, value * 1.8 + 32 AS fahrenheit FROM readings WHERE value > 30;
