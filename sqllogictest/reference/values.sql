-- Values as Postgres prints them (text) and sends them (binary). One statement per line.
-- Floats: shortest digits, %g's switch to exponents, the special values.
SELECT 21::float8 AS a, 1e15::float8 AS b, 1e14::float8 AS c, 0.1::float8 AS d, 1e-5::float8 AS e
SELECT 123456789.125::float8 AS a, 1e100::float8 AS b, 1.5e-7::float8 AS c, 0.0001::float8 AS d
SELECT CAST('Infinity' AS DOUBLE PRECISION) AS a, CAST('-Infinity' AS DOUBLE PRECISION) AS b, CAST('NaN' AS DOUBLE PRECISION) AS c
SELECT 1.25::real AS a, 16777216::real AS b, 123456.7::real AS c
SELECT CAST(21 AS DOUBLE PRECISION) / 2 AS half
-- NUMERIC: literals keep their digits; an unconstrained NUMERIC prints without padding.
SELECT 1.5 AS a, 1.50 AS b, 0.001 AS c, -2.25 AS d
SELECT 21::numeric AS a, CAST(123456789012345678.5 AS NUMERIC) AS b
SELECT CAST(1.5 AS NUMERIC(10, 3)) AS a
-- A decimal cast to NUMERIC keeps its scale; arithmetic on it follows Postgres' scales.
SELECT CAST(1.50 AS NUMERIC) AS a, 1.50::numeric AS b, CAST(0.1::float8 AS NUMERIC) AS c, 1.50::numeric * 2 AS d, 1.50::numeric + 1 AS e
-- Quotients of numerics to at least 16 significant digits, rounded half away from zero.
SELECT 1 / 3::numeric AS a, 2 / 3.0 AS b, 1000000 / 3::numeric AS c, 0.001::numeric / 3 AS d, -7 / 3::numeric AS e
SELECT CAST(123456789012345678.5 AS NUMERIC) / 3 AS a, CAST(3.14 AS NUMERIC(10, 2)) / 3 AS b, 1e-3 / 7 AS c, 99999999 / 0.0007 AS d
SELECT 1 / 0::numeric
-- A quotient prints with the digits Postgres gives one of its size, trailing zeros included.
SELECT 10.00 / 4 AS a, 7 / 2.0 AS b, 30000 / 2.0 AS c, 1 / 8.0 AS d, 0 / 3.0 AS e, 123456789.0 / 7 AS f
SELECT avg(x) AS a, avg(x)::numeric AS b, (avg(x) / 2)::text AS c, round(avg(x), 2) AS d FROM (VALUES (10.00), (20.50)) t(x)
SELECT avg(x) AS a, avg(x)::numeric(10, 2) AS c FROM (VALUES (2), (3), (3)) t(x)
SELECT avg(x::numeric(10, 3)) AS b, sum(x) / count(x) AS c FROM (VALUES (2), (3), (3)) t(x)
SELECT avg(x) AS a FROM (VALUES (10000), (20000)) t(x) UNION ALL SELECT avg(y) FROM (VALUES (10000), (30000)) u(y)
SELECT trunc(1.55::numeric(10, 2), 1) AS a, trunc(15.55, -1) AS b, trunc(1.5::numeric, 3) AS c, trunc(2.567::numeric, 2) AS d
SELECT pg_typeof(1.5)::text AS a, pg_typeof(now())::text AS b, pg_typeof('x'::text)::text AS c
-- Timestamps, dates and times: no trailing zeros.
SELECT TIMESTAMP '2026-01-01 00:00:00' AS a, '2026-01-01 12:00:00.5'::timestamp AS b
SELECT '2026-03-01 12:00:05.123456'::timestamp AS a, DATE '2026-01-01' AS b
SELECT '12:00:00.5'::time AS a, TIME '23:59:59' AS b
-- timestamptz in the session's TimeZone.
SELECT '2026-01-01 00:00:00+00'::timestamptz AS a
SET TimeZone = 'America/New_York'
SELECT '2026-01-01 00:00:00+00'::timestamptz AS a, '2026-07-01 00:00:00.25+00'::timestamptz AS b
SET TimeZone = 'Asia/Kolkata'
SELECT '2026-01-01 00:00:00+00'::timestamptz AS a
SET TimeZone = 'UTC'
-- Intervals as Eddy prints them, read back.
SELECT INTERVAL '1 day 02:03:04' AS a, INTERVAL '-1 days -02:00:00' AS b, INTERVAL '25:00:00' AS c
SELECT INTERVAL '1 year 2 mons 3 days 04:05:06.789' AS a
-- Intervals scaled by numbers: fractions of months carried to days, of days to time.
SELECT 3 * INTERVAL '20 seconds' AS a, INTERVAL '1 month' * 1.5 AS b, INTERVAL '1 day 02:03:04' / 2 AS c
SELECT INTERVAL '1 mon' * -0.5 AS a, 2.5 * INTERVAL '1 day' AS b, INTERVAL '1 year' / 7 AS c
SELECT CAST(4 AS DOUBLE PRECISION) * INTERVAL '1 hour' AS a, INTERVAL '1 hour' * CAST(NULL AS INT) AS b
-- bytea input in hex.
SELECT '\xdeadbeef'::bytea AS a, '\x00ff'::bytea AS b
-- Booleans, integers, text.
SELECT true AS a, false AS b, 1::int2 AS c, 2::int4 AS d, 3::int8 AS e, 'x'::text AS f
-- JSON operators over text kept as JSON.
SELECT (CAST('{"a": 1, "b": {"c": "x"}}' AS JSONB) -> 'b')::text AS a, CAST('{"a": 1, "b": {"c": "x"}}' AS JSONB) ->> 'a' AS b
SELECT (CAST('[10, 20, 30]' AS JSONB) -> 1)::text AS a, CAST('{"s": "text"}' AS JSONB) ->> 's' AS b
-- Sizes as psql's \l+ and \dt+ show them.
SELECT pg_size_pretty(CAST(0 AS BIGINT)) AS a, pg_size_pretty(CAST(10239 AS BIGINT)) AS b, pg_size_pretty(CAST(10240 AS BIGINT)) AS c, pg_size_pretty(CAST(123456789 AS BIGINT)) AS d
SELECT pg_size_pretty(CAST(-10240 AS BIGINT)) AS a, pg_size_pretty(CAST(20971520 AS BIGINT)) AS b, pg_size_pretty(CAST(1099511627776 AS BIGINT)) AS c
-- to_char with Postgres' template patterns.
SELECT to_char(TIMESTAMP '2026-03-05 14:07:09.123456', 'YYYY-MM-DD HH24:MI:SS.MS') AS a, to_char(TIMESTAMP '2026-03-05 14:07:09', 'yyyy-MM-dd') AS b, to_char(DATE '2026-12-31', 'FMMonth FMDD, YYYY Dy') AS c
SELECT to_char(TIMESTAMP '2026-03-05 00:30:00', 'HH12:MI AM "day" DDD Q IW') AS a, to_char(TIMESTAMP '2026-03-05 14:07:09', 'Month|MON|day') AS b
-- Functions in FROM: one column, named after the alias (or the function).
SELECT i FROM generate_series(CAST(1 AS BIGINT), CAST(3 AS BIGINT)) AS i ORDER BY i
SELECT * FROM generate_series(CAST(1 AS BIGINT), CAST(2 AS BIGINT)) AS g ORDER BY 1
SELECT s, s[2] AS second FROM string_to_array('a,b', ',') s
SELECT trim(s[i]) AS part FROM generate_series(CAST(1 AS BIGINT), CAST(2 AS BIGINT)) AS i, string_to_array('x, y', ',') s ORDER BY i
-- IN (subquery) in a select list, with Postgres' three-valued answer.
SELECT 1 IN (SELECT 1) AS a, 2 IN (SELECT 1) AS b, CAST(NULL AS INT) IN (SELECT 1) AS c, 1 IN (SELECT 1 WHERE false) AS d, 2 IN (SELECT CAST(NULL AS INT) UNION ALL SELECT 1) AS e, 2 NOT IN (SELECT 1) AS f, 1 NOT IN (SELECT CAST(NULL AS INT)) AS g
SELECT CASE WHEN 'public' IN (SELECT trim(s[i]) FROM generate_series(CAST(1 AS BIGINT), CAST(2 AS BIGINT)) AS i, string_to_array('a, public', ',') s) THEN 'in' ELSE 'out' END AS x
