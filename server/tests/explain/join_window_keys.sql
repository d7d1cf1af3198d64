CREATE TABLE clicks (user_id INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) APPEND ONLY;
CREATE TABLE views (user_id INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW both AS
SELECT c.user_id, c.ts FROM clicks c JOIN views v ON c.user_id = v.user_id AND c.ts = v.ts;
