CREATE TABLE ex_readings (id INT PRIMARY KEY, sensor INT, reading DOUBLE, ts TIMESTAMP);
EXPLAIN CREATE MATERIALIZED VIEW latest_reading AS
SELECT DISTINCT ON (sensor) sensor, reading, ts FROM ex_readings ORDER BY sensor, ts DESC;
