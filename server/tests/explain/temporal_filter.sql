CREATE TABLE readings (sensor INT, value DOUBLE, ts TIMESTAMP);
EXPLAIN CREATE MATERIALIZED VIEW last_hour AS
SELECT sensor, value, ts FROM readings
WHERE ts > now() - INTERVAL '1' HOUR AND ts <= now() AND value > 0;
