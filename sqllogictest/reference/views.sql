-- Plain views: stored queries read through, OR REPLACE's column rule, what depends on what,
-- and renames (the objects that read a renamed one follow it).
CREATE TABLE ref_v_t (id INT, name TEXT, amount BIGINT)
INSERT INTO ref_v_t VALUES (1, 'ann', 10), (2, 'bob', 5), (3, 'cy', 70)
CREATE VIEW ref_v AS SELECT id, name FROM ref_v_t WHERE amount > 6
SELECT id, name FROM ref_v ORDER BY id
CREATE VIEW ref_v2 (k, who) AS SELECT id, name FROM ref_v
SELECT k, who FROM ref_v2 ORDER BY k
SELECT * FROM ref_v2 WHERE k > 1
CREATE VIEW ref_v AS SELECT 1 AS one
CREATE OR REPLACE VIEW ref_v AS SELECT id FROM ref_v_t
CREATE OR REPLACE VIEW ref_v AS SELECT name, id FROM ref_v_t
CREATE OR REPLACE VIEW ref_v_t AS SELECT 1 AS one
CREATE OR REPLACE VIEW ref_v AS SELECT id, name, amount FROM ref_v_t WHERE amount > 60
SELECT id, name, amount FROM ref_v ORDER BY id
SELECT k, who FROM ref_v2 ORDER BY k
CREATE VIEW ref_bad (a, b, c) AS SELECT id, name FROM ref_v_t
DROP TABLE ref_v_t
DROP VIEW ref_v
DROP MATERIALIZED VIEW ref_v
DROP TABLE ref_v
ALTER TABLE ref_v_t RENAME TO ref_v_t2
SELECT k, who FROM ref_v2 ORDER BY k
SELECT * FROM ref_v_t
ALTER VIEW ref_v_t2 RENAME TO ref_x
ALTER TABLE ref_v_t2 RENAME TO ref_v
ALTER TABLE ref_nowhere RENAME TO ref_somewhere
ALTER TABLE IF EXISTS ref_nowhere RENAME TO ref_somewhere
ALTER VIEW ref_v2 RENAME TO ref_v3
SELECT viewname::text AS v FROM pg_views WHERE viewname LIKE 'ref_v%' ORDER BY v
SELECT table_name::text AS t, table_type::text AS k FROM information_schema.tables WHERE table_name LIKE 'ref_v%' ORDER BY t
SELECT relname::text AS r, relkind::text AS k FROM pg_class WHERE relname LIKE 'ref_v%' ORDER BY r
DROP VIEW ref_v3
DROP VIEW ref_v
DROP VIEW IF EXISTS ref_v
DROP TABLE ref_v_t2
