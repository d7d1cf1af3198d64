-- Indexes in the catalogs: the same tables, materialized view and indexes give the same
-- pg_class, pg_index, pg_attribute and pg_indexes rows and the same pg_get_indexdef text
-- (OIDs differ between the servers, so only what they join to is compared).
CREATE TABLE ref_ix_orders (id BIGINT PRIMARY KEY, customer INT, status TEXT, total DOUBLE PRECISION)
CREATE TABLE ref_ix_events (kind TEXT, at TIMESTAMP)
CREATE MATERIALIZED VIEW ref_ix_per_customer AS SELECT customer, count(*) AS n FROM ref_ix_orders GROUP BY customer
CREATE INDEX ref_ix_orders_by_customer ON ref_ix_orders (customer, status) INCLUDE (total)
CREATE INDEX ref_ix_events_by_time ON ref_ix_events (at)
CREATE INDEX ref_ix_per_customer_by_n ON ref_ix_per_customer (n)
CREATE INDEX ref_ix_events_by_time ON ref_ix_events (kind)
CREATE INDEX IF NOT EXISTS ref_ix_events_by_time ON ref_ix_events (kind)
SELECT c.relname::text AS index, c.relkind::text AS kind, am.amname::text AS am, c.relnatts, c.relnamespace = t.relnamespace AS same_schema, t.relhasindex FROM pg_catalog.pg_class c JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid JOIN pg_catalog.pg_class t ON t.oid = i.indrelid JOIN pg_catalog.pg_am am ON am.oid = c.relam WHERE c.relname LIKE 'ref_ix%' ORDER BY 1
SELECT c.relname::text AS index, t.relname::text AS on_table, i.indnatts, i.indnkeyatts, i.indisunique, i.indisprimary, i.indisvalid, i.indisready, i.indislive, i.indimmediate, i.indisclustered FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid JOIN pg_catalog.pg_class t ON t.oid = i.indrelid WHERE t.relname LIKE 'ref_ix%' ORDER BY 1
SELECT c.relname::text AS index, a.attname::text AS column_name FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE c.relname LIKE 'ref_ix%' ORDER BY 1, 2
SELECT k.index, o.opcname::text AS opclass FROM (SELECT c.relname::text AS index, unnest(i.indclass) AS cls FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'ref_ix%') k JOIN pg_catalog.pg_opclass o ON o.oid = k.cls ORDER BY 1, 2
SELECT schemaname::text AS s, tablename::text AS t, indexname::text AS i, tablespace::text AS ts, indexdef FROM pg_indexes WHERE tablename LIKE 'ref_ix%' ORDER BY 2, 3
SELECT pg_get_indexdef(c.oid) AS def, pg_get_indexdef(c.oid, 3, true) AS third, pg_get_indexdef(c.oid, 1, false) AS first FROM pg_catalog.pg_class c WHERE c.relname = 'ref_ix_orders_by_customer'
SELECT c.relname::text AS index, a.attnum, a.attname::text AS column_name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid WHERE c.relname LIKE 'ref_ix%' AND c.relkind = 'i' ORDER BY 1, 2
SELECT matviewname::text AS v, hasindexes FROM pg_matviews WHERE matviewname LIKE 'ref_ix%'
DROP INDEX ref_ix_orders_by_customer
DROP INDEX ref_ix_orders_by_customer
DROP INDEX IF EXISTS ref_ix_orders_by_customer
DROP INDEX ref_ix_orders
SELECT indexname::text AS i FROM pg_indexes WHERE tablename LIKE 'ref_ix%' ORDER BY 1
SELECT count(*) AS n FROM pg_catalog.pg_class WHERE relname = 'ref_ix_orders_by_customer'
