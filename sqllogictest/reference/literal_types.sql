-- Integer literals are int4 when they fit, int8 past that; integer arithmetic is checked.
-- Unnamed select-list items are named as Postgres names them.
CREATE TABLE lt (a INT, b BIGINT, c SMALLINT, d DOUBLE PRECISION, s TEXT, n NUMERIC(10,2))
INSERT INTO lt VALUES (2147483647, 9223372036854775807, 32767, 1.5, 'x', 2.50), (-5, 7, 3, 0.25, NULL, NULL)
SELECT 1, -1, 2147483647, -2147483648, 2147483648, 9223372036854775807
SELECT 1 + 1, 7 / 2, 7 % 3, -7 / 2, 2 * 3 - 1, 10 - 20
SELECT pg_typeof(1)::text, pg_typeof(2147483648)::text, pg_typeof(1 + 1)::text, pg_typeof(1.5)::text, pg_typeof(ARRAY[1, 2])::text
SELECT ARRAY[1, 2], ARRAY[1, 2147483648], ARRAY[-1]
SELECT 2147483647 + 1
SELECT -2147483647 - 2
SELECT 65536 * 65536
SELECT 9223372036854775807 + 1
SELECT 2147483647 + 1::bigint
SELECT a + 1 FROM lt WHERE a = 2147483647
SELECT a + 0, a - 1 FROM lt ORDER BY a
SELECT b + 1 FROM lt WHERE b > 100
SELECT b - 1, b * 1 FROM lt ORDER BY b
SELECT c + c FROM lt WHERE c > 100
SELECT c + 1, c * 2 FROM lt WHERE c < 100
SELECT a * 2 FROM lt WHERE a < 0
SELECT a, b, c, a + c, b + a FROM lt ORDER BY a
SELECT a + 1 AS next, b FROM lt ORDER BY 1
SELECT d * 2, n * 2, n + 1, d + 1 FROM lt ORDER BY d
SELECT * FROM (VALUES (1), (2)) AS v(x) ORDER BY x
SELECT * FROM (VALUES (1, 'a'), (5000000000, 'b')) AS v(x, y) ORDER BY x
SELECT x, pg_typeof(x)::text FROM (VALUES (1), (NULL)) AS v(x) ORDER BY x
SELECT 1 UNION SELECT 2 ORDER BY 1
SELECT 1 UNION ALL SELECT 5000000000 ORDER BY 1
SELECT count(*), sum(a), sum(c), max(a) + 1, min(b) FROM lt
SELECT CASE WHEN a > 0 THEN 1 ELSE 2 END, COALESCE(s, 'none'), NULLIF(a, 1), GREATEST(a, 1), LEAST(c, 4) FROM lt ORDER BY a
SELECT upper(s), length(s), s || 'y', s IS NULL, a > 0, NOT (a > 0) FROM lt ORDER BY a
SELECT 1::int, '2'::bigint, 3::smallint, 4::numeric, '5'::text, 6::float8, 7::real, '8'::varchar
SELECT CAST(1 AS INTEGER), CAST(a AS BIGINT), CAST(s AS VARCHAR(3)) FROM lt ORDER BY a
SELECT true, false, NULL, 'str', 1.5, -a FROM lt ORDER BY a
SELECT ARRAY[a, 1], (SELECT max(a) FROM lt), EXISTS (SELECT 1 FROM lt), NOT EXISTS (SELECT 1 FROM lt), ROW(1, 2) FROM lt ORDER BY a
SELECT trim(' x '), ltrim(' x'), rtrim('x '), substring('abc' FROM 2), position('b' IN 'abc')
SELECT DATE '2026-01-02', INTERVAL '1 day', TIMESTAMP '2026-01-02 03:04:05', '2026-01-02'::date
SELECT current_user::text, session_user::text, user::text, current_role::text, current_schema::text
SELECT lt.a, lt.s FROM lt ORDER BY 1
SELECT a + 1, a + 1 FROM lt ORDER BY a
SELECT a AS b, b, 1 AS a FROM lt ORDER BY 2
SELECT CAST(a AS BIGINT), a::text FROM lt ORDER BY 2
SELECT a IN (1, 2), a BETWEEN 1 AND 3, s LIKE 'x%' FROM lt ORDER BY a
SELECT 1 AS one, 2 AS "Two", 3 four
SELECT 10 / 0
SELECT 10 % 0
SELECT sum(x) FROM (VALUES (2147483647), (1)) AS v(x)
-- Interval text in Postgres' forms, where it is read at run time.
CREATE TABLE iv (i INTERVAL, s TEXT)
INSERT INTO iv VALUES ('1 day 02:03:04.5', '1 mon 2 days'), ('-1.5 seconds', '00:00:01'), ('1 year 2 mons 3 days 04:05:06', NULL)
SELECT i, s::interval FROM iv ORDER BY i
SELECT count(*) FROM iv WHERE i > '1 day 00:00:00'
