-- What BI tools and SQL IDEs send on connect and while browsing a schema, gathered from
-- their public source (Grafana's PostgreSQL data source, Metabase's postgres driver,
-- Superset's Postgres engine spec, DBeaver's PostgreSQL plugin) and written out here with
-- Eddy's test objects: a table `readings` (primary key `sensor`), a materialized view
-- `per_sensor` and a source `bid`. Run by sqllogictest/tests/tool_queries.rs: every block
-- must run without error. A block starts with a `-- tool: what` line.

-- grafana: health check
SELECT 1

-- grafana: server version
SELECT current_setting('server_version_num')::int/100 AS version

-- grafana: TimescaleDB detection
SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'

-- grafana: schemas
SELECT schema_name AS "name"
FROM information_schema.schemata
WHERE schema_name NOT IN ('information_schema', 'pg_catalog', 'pg_toast',
                          '_timescaledb_cache', '_timescaledb_catalog', '_timescaledb_internal',
                          '_timescaledb_config', 'timescaledb_information', 'timescaledb_experimental')
ORDER BY schema_name

-- grafana: tables of a schema
SELECT quote_ident(table_name) AS "table"
FROM information_schema.tables
WHERE quote_ident(table_schema) = 'public'
ORDER BY 1

-- grafana: tables on the search path
SELECT
    CASE WHEN
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog')
    ORDER BY 1

-- grafana: columns of a table
SELECT quote_ident(column_name) AS "column", data_type AS "type"
FROM information_schema.columns
WHERE quote_ident(table_name) = 'readings' AND quote_ident(table_schema) = 'public'

-- metabase: time zone
show timezone;

-- metabase: tables, views and materialized views
SELECT n.nspname AS schema, c.relname AS name,
       CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW'
                      WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS type,
       d.description AS description, stat.n_live_tup AS estimated_row_count
FROM pg_catalog.pg_class AS c
INNER JOIN pg_catalog.pg_namespace AS n ON c.relnamespace = n.oid
LEFT JOIN pg_catalog.pg_description AS d ON (c.oid = d.objoid) AND (d.objsubid = 0) AND (d.classoid = 'pg_class'::regclass)
LEFT JOIN pg_stat_user_tables AS stat ON (n.nspname = stat.schemaname) AND (c.relname = stat.relname)
WHERE (c.relnamespace = n.oid) AND (n.nspname !~ '^pg_') AND (n.nspname <> 'information_schema')
  AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND n.nspname IN ('public')
ORDER BY type ASC, schema ASC, name ASC

-- metabase: table privileges of the current user
with table_privileges as (
 select NULL as role, t.schemaname as schema, t.objectname as table,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'update') as update,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'select') as select,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'insert') as insert,
   pg_catalog.has_table_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'delete') as delete
 from (
   select schemaname, tablename as objectname from pg_catalog.pg_tables
   union
   select schemaname, viewname as objectname from pg_catalog.pg_views
   union
   select schemaname, matviewname as objectname from pg_catalog.pg_matviews
 ) t
 where t.schemaname !~ '^pg_' and t.schemaname <> 'information_schema'
   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')
)
select t.* from table_privileges t

-- metabase: enum types
SELECT nspname, typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.oid IN (SELECT DISTINCT enumtypid FROM pg_enum e)

-- metabase: fields of tables and views (information_schema part)
SELECT c.column_name AS name,
       CASE WHEN c.udt_schema IN ('public', 'pg_catalog') THEN format('%s', c.udt_name)
            ELSE format('"%s"."%s"', c.udt_schema, c.udt_name) END AS "database-type",
       c.ordinal_position - 1 AS "database-position", c.table_schema AS "table-schema",
       c.table_name AS "table-name", pk.column_name IS NOT NULL AS "pk?",
       col_description(CAST(CAST(format('%I.%I', CAST(c.table_schema AS TEXT), CAST(c.table_name AS TEXT)) AS REGCLASS) AS OID), c.ordinal_position) AS "field-comment",
       (c.column_default IS NULL OR lower(c.column_default) = 'null') AND c.is_nullable = 'NO'
         AND NOT ((c.column_default IS NOT NULL AND c.column_default LIKE '%nextval(%') OR c.is_identity <> 'NO')
         AS "database-required"
FROM information_schema.columns AS c
LEFT JOIN (SELECT tc.table_schema, tc.table_name, kc.column_name
           FROM information_schema.table_constraints AS tc
           INNER JOIN information_schema.key_column_usage AS kc
             ON (tc.constraint_name = kc.constraint_name) AND (tc.table_schema = kc.table_schema)
            AND (tc.table_name = kc.table_name)
           WHERE tc.constraint_type = 'PRIMARY KEY') AS pk
  ON (c.table_schema = pk.table_schema) AND (c.table_name = pk.table_name) AND (c.column_name = pk.column_name)
WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND c.table_schema IN ('public')
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC

-- metabase: fields of materialized views (pg_catalog part)
SELECT pa.attname AS name,
       CASE WHEN ptn.nspname IN ('public', 'pg_catalog') THEN format('%s', pt.typname)
            ELSE format('"%s"."%s"', ptn.nspname, pt.typname) END AS "database-type",
       pa.attnum - 1 AS "database-position", pn.nspname AS "table-schema", pc.relname AS "table-name"
FROM pg_catalog.pg_class AS pc
INNER JOIN pg_catalog.pg_namespace AS pn ON pn.oid = pc.relnamespace
INNER JOIN pg_catalog.pg_attribute AS pa ON pa.attrelid = pc.oid
INNER JOIN pg_catalog.pg_type AS pt ON pt.oid = pa.atttypid
INNER JOIN pg_catalog.pg_namespace AS ptn ON ptn.oid = pt.typnamespace
WHERE (pc.relkind = 'm') AND (pa.attnum >= 1) AND pn.nspname IN ('public')
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC

-- metabase: foreign keys
SELECT fk_ns.nspname AS "fk-table-schema", fk_table.relname AS "fk-table-name",
       fk_column.attname AS "fk-column-name", pk_ns.nspname AS "pk-table-schema",
       pk_table.relname AS "pk-table-name", pk_column.attname AS "pk-column-name"
FROM pg_constraint AS c
INNER JOIN pg_class AS fk_table ON c.conrelid = fk_table.oid
INNER JOIN pg_namespace AS fk_ns ON c.connamespace = fk_ns.oid
INNER JOIN pg_attribute AS fk_column ON c.conrelid = fk_column.attrelid
INNER JOIN pg_class AS pk_table ON c.confrelid = pk_table.oid
INNER JOIN pg_namespace AS pk_ns ON pk_table.relnamespace = pk_ns.oid
INNER JOIN pg_attribute AS pk_column ON c.confrelid = pk_column.attrelid
WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_' AND c.contype = 'f'::char
  AND fk_column.attnum = ANY(c.conkey) AND pk_column.attnum = ANY(c.confkey)
ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC

-- metabase: indexes (first column of each)
SELECT tmp."table-schema", tmp."table-name",
       trim(BOTH '"' FROM pg_catalog.pg_get_indexdef(tmp.ci_oid, tmp.pos, false)) AS "field-name"
FROM (SELECT n.nspname AS "table-schema", ct.relname AS "table-name", ci.oid AS ci_oid,
             (information_schema._pg_expandarray(i.indkey)).n AS pos
      FROM pg_catalog.pg_class AS ct
      INNER JOIN pg_catalog.pg_namespace AS n ON ct.relnamespace = n.oid
      INNER JOIN pg_catalog.pg_index AS i ON ct.oid = i.indrelid
      INNER JOIN pg_catalog.pg_class AS ci ON ci.oid = i.indexrelid
      WHERE (pg_catalog.pg_get_expr(i.indpred, i.indrelid) IS NULL)
        AND n.nspname !~ '^information_schema|catalog_history|pg_' AND n.nspname IN ('public')) AS tmp
WHERE tmp.pos = 1

-- superset: databases (catalogs)
SELECT datname FROM pg_database WHERE datistemplate = false

-- superset: schema for a query
set search_path = "public"

-- superset: backend id for cancelling a query
SELECT pg_backend_pid()

-- dbeaver: driver settings
SET extra_float_digits = 3

-- dbeaver: application name
SET application_name = 'DBeaver - Main <dev>'

-- dbeaver: current schema and user
SELECT current_schema(),session_user

-- dbeaver: schemas with descriptions
SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass
ORDER BY nspname

-- dbeaver: search path
SHOW search_path

-- dbeaver: the database
SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname='dev'

-- dbeaver: string conformance
SELECT * FROM pg_catalog.pg_settings WHERE name='standard_conforming_strings'

-- dbeaver: keywords
SELECT string_agg(word, ',') FROM pg_catalog.pg_get_keywords()

-- dbeaver: server version
SELECT version()

-- dbeaver: enum probe
SELECT * FROM pg_catalog.pg_enum WHERE 1<>1 LIMIT 1

-- dbeaver: data types
SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, d.description
FROM pg_catalog.pg_type t
LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem
LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid
LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid
WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory IS NULL OR et.typcategory <> 'C')

-- dbeaver: relations of a schema
SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr,
       pg_catalog.pg_get_partkeydef(c.oid) as partition_key
FROM pg_catalog.pg_class c
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass
WHERE c.relnamespace=(SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'public') AND c.relkind not in ('i','I','c')

-- dbeaver: columns of a table
SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description
FROM pg_catalog.pg_attribute a
INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)
LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)
LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c')
  AND c.oid=(SELECT oid FROM pg_catalog.pg_class WHERE relname = 'readings')
ORDER BY a.attnum

-- dbeaver: constraints of a table
SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description
FROM pg_catalog.pg_constraint c
INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid
LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_constraint'::regclass
WHERE c.conrelid=(SELECT oid FROM pg_catalog.pg_class WHERE relname = 'readings')
ORDER BY c.oid

-- dbeaver: view definition
SELECT pg_catalog.pg_get_viewdef(c.oid, true) FROM pg_catalog.pg_class c WHERE c.relname = 'per_sensor'
