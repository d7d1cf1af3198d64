-- Everyday functions and operators, as Postgres computes, names and prints them. One statement per line.
-- Casts to integers round (numeric half away from zero, floats half to even) and check the range.
SELECT '  12  '::int AS a, '1.5'::float8::int AS b, 2.5::int AS c, 3.5::int AS d, (-2.5)::int AS e, 2.5::float8::int8 AS f, (-1.5)::real::int2 AS g
SELECT 3000000000::int8::int4
SELECT 40000::int2
SELECT 1e19::float8::int8
SELECT 'NaN'::float8::int
SELECT 2147483647.5::int
SELECT -2147483648.4::float8::int AS a
SELECT 1::float8 / 0
SELECT 1.5::real / 0
SELECT NULL::float8 / 0 AS a, 1::float8 / 4 AS b
SELECT round(2.5::float8) AS a, round(3.5::float8) AS b, round(-2.5::float8) AS c, round(2.5) AS d, round(-2.5) AS e
-- SIMILAR TO matches the whole text; % and _ as in LIKE, regular expression operators otherwise.
SELECT 'abc' SIMILAR TO 'a%' AS a, 'abc' SIMILAR TO '(a|b)c' AS b, 'bc' SIMILAR TO '(a|b)c' AS c, 'abc' SIMILAR TO '%(b|d)%' AS d, 'a.c' SIMILAR TO 'a.c' AS e, 'abc' SIMILAR TO 'a.c' AS f
SELECT 'abc' NOT SIMILAR TO '_b_' AS a, 'aaa' SIMILAR TO 'a{2,3}' AS b, 'x%' SIMILAR TO 'x!%' ESCAPE '!' AS c, 'b' SIMILAR TO '[a-c]' AS d
-- Dates and intervals.
SELECT DATE '2026-01-01' + INTERVAL '1 day' AS a, DATE '2026-01-31' - INTERVAL '1 month' AS b, INTERVAL '2 hours' + DATE '2026-01-01' AS c
SELECT '1 day'::interval + '2 hours' AS a, '2 hours' + INTERVAL '1 minute' AS b, TIMESTAMP '2026-01-01 10:00' - INTERVAL '90 minutes' AS c
SELECT age(TIMESTAMP '2026-03-01', TIMESTAMP '2025-01-15') AS a, age(TIMESTAMP '2025-01-15', TIMESTAMP '2026-03-01 12:30') AS b, age(TIMESTAMP '2026-03-31 00:00:01', TIMESTAMP '2026-02-28 23:00') AS c
SELECT justify_hours(INTERVAL '27 hours') AS a, justify_hours(INTERVAL '1 day -3 hours') AS b, justify_days(INTERVAL '35 days') AS c, justify_days(INTERVAL '1 month -5 days') AS d, justify_interval(INTERVAL '1 mon -1 day -1 hour') AS e
SELECT isfinite(DATE '2026-01-01') AS a, isfinite(TIMESTAMP '2026-01-01 00:00') AS b
-- Aggregates Postgres names otherwise.
SELECT bool_and(x) AS a, bool_or(x) AS b, every(x) AS c FROM (VALUES (true), (false)) v(x)
-- Numbers.
SELECT abs(-3) AS a, sign(-3.5::float8) AS b, mod(7, 3) AS c, mod(-7, 3) AS d, 7 % 3 AS e, power(2, 10) AS f
SELECT num_nonnulls(1, NULL, 2) AS a, num_nulls(1, NULL) AS b, scale(1.230) AS c, scale(12) AS d
-- Text.
SELECT quote_literal('it''s') AS a, quote_ident('Ab') AS b, quote_ident('ab') AS c, quote_nullable(NULL) AS d, quote_literal('a\b') AS e
SELECT substring('abcdef' from 2 for 3) AS a, substr('abcdef', 2, 2), substr('abcdef', 3)
SELECT encode('ab'::bytea, 'base64') AS a, encode('abc'::bytea, 'base64') AS b, decode('YWI=', 'base64') AS c, encode('ab'::bytea, 'hex') AS d
-- Arrays.
SELECT array_remove(ARRAY[1, 2, 1], 1) AS a, array_remove(ARRAY['a', 'b'], 'c') AS b
-- JSON.
SELECT jsonb_build_object('b', 1, 'a', 'x') AS a, json_build_object('b', 1, 'a', NULL) AS b, jsonb_build_array(1, 'a', NULL) AS c, json_build_array(1, true) AS d
SELECT to_json('x'::text) AS a, to_jsonb(3) AS b, to_json(true) AS c
SELECT jsonb_typeof('1') AS a, json_typeof('{"a": 1}') AS b, jsonb_typeof('[1]') AS c, jsonb_typeof('null') AS d, jsonb_array_length('[1, 2]') AS e
SELECT jsonb_array_length('{"a": 1}')
SELECT '{"a":{"b":2}}'::jsonb -> 'a' ->> 'b' AS a, '{"a":[1,2]}'::jsonb #> '{a,1}' AS b, '{"a":[1,{"c":"x"}]}'::jsonb #>> '{a,1,c}' AS c, '{"a":1}'::jsonb #> '{b}' AS d
SELECT '{"a":1}'::jsonb ? 'a' AS a, '{"a":1}'::jsonb ? 'b' AS b, '["a","b"]'::jsonb ? 'b' AS c
SELECT '{"a":1,"b":[1,2]}'::jsonb @> '{"b":[2]}' AS a, '{"a":1}'::jsonb @> '{"a":2}' AS b, '[1,2,3]'::jsonb @> '[3,1]' AS c, '["a",2]'::jsonb @> '"a"' AS d, '{"a":1}'::jsonb <@ '{"a":1,"b":2}' AS e
-- An outer join USING merges its column.
SELECT * FROM (VALUES (1), (2)) a(x) FULL JOIN (VALUES (2), (3)) b(x) USING (x) ORDER BY 1
SELECT x FROM (VALUES (1), (2)) a(x) RIGHT JOIN (VALUES (2), (3)) b(x) USING (x) ORDER BY 1
SELECT * FROM (VALUES (1, 'a'), (2, 'b')) a(x, y) LEFT JOIN (VALUES (2, 'c')) b(x, z) USING (x) ORDER BY 1
-- More functions.
SELECT width_bucket(5.35, 0.024, 10.06, 5) AS a, width_bucket(-1, 0, 10, 5) AS b, width_bucket(10, 0, 10, 5) AS c, width_bucket(5, 10, 0, 4) AS d
SELECT width_bucket(1, 0, 10, 0)
SELECT make_timestamp(2026, 1, 2, 3, 4, 5.5) AS a, make_timestamp(2024, 2, 29, 23, 59, 59) AS b
SELECT make_timestamp(2026, 2, 30, 0, 0, 0)
SELECT json_agg(x) AS a, jsonb_agg(x) AS b FROM (VALUES (1), (2)) v(x)
SELECT k, json_agg(s) AS a FROM (VALUES (1, 'a'), (1, NULL), (2, 'c')) v(k, s) GROUP BY k ORDER BY k
SELECT json_agg(x) AS a FROM (VALUES (1)) v(x) WHERE x > 1
-- A set-returning function in the select list gives a row per element.
SELECT generate_series(1, 3)
SELECT generate_series(1, 3) AS n, 'x' AS t
SELECT json_object_agg(k, v) AS a, jsonb_object_agg(k, v) AS b FROM (VALUES ('b', 1), ('a', 2), ('b', 3)) t(k, v)
SELECT regexp_split_to_array('a b  c', '\s+') AS a, regexp_split_to_array('abc', '') AS b, regexp_split_to_array('aXbxc', 'x', 'i') AS c, regexp_split_to_array(',a,', ',') AS d
SELECT x FROM (VALUES (3), (1), (2)) v(x) ORDER BY x FETCH FIRST 2 ROWS ONLY
SELECT x FROM (VALUES (3), (1), (2)) v(x) ORDER BY x OFFSET 1 ROWS FETCH NEXT ROW ONLY
SELECT regexp_split_to_table('a b  c', '\s+') AS part, 1 AS one
-- Intervals compare and sort by length: a month is 30 days, a day 24 hours.
SELECT interval '1 month' = interval '30 days' AS a, interval '1 month' > interval '29 days' AS b, interval '1 day' = interval '24 hours' AS c, interval '1 month 1 day' > interval '31 days' AS d, interval '-1 day' < interval '1 hour' AS e
SELECT x FROM (VALUES (interval '1 month'), (interval '31 days'), (interval '29 days'), (interval '25 hours'), (NULL)) v(x) ORDER BY x DESC NULLS LAST
SELECT x FROM (VALUES (interval '1 month'), (interval '31 days')) v(x) WHERE x > interval '30 days'
-- ceil, floor and trunc of a numeric are integral numerics; div is the integral quotient.
SELECT ceil(1.2) AS a, ceiling(-1.2) AS b, floor(-1.7) AS c, trunc(1234.5678) AS d, trunc(-2.5) AS e, ceil(9.5) AS f, floor(2.7::float8) AS g
SELECT div(7, 2) AS a, div(-7, 2) AS b, div(7.5, 2) AS c, div(9.99, 3.3) AS d, div(NULL, 2) AS e
SELECT div(1, 0)
-- Postgres' prefix operators and ^@.
SELECT |/ 16.0 AS a, @ -5 AS b, ~ 5 AS c, 'abc' ^@ 'ab' AS e, 'abc' ^@ 'b' AS f
-- BETWEEN SYMMETRIC takes its bounds in either order.
SELECT 5 BETWEEN SYMMETRIC 10 AND 1 AS a, 5 NOT BETWEEN SYMMETRIC 10 AND 1 AS b, 5 BETWEEN 10 AND 1 AS c, 5 BETWEEN ASYMMETRIC 1 AND 10 AS d
SELECT x FROM (VALUES (1), (5), (9)) v(x) WHERE x BETWEEN SYMMETRIC 6 AND 2 * 1 ORDER BY x
-- DISTINCT aggregates give their values in order, as Postgres' sort-based DISTINCT does.
SELECT array_agg(DISTINCT x) AS a, string_agg(DISTINCT y, ',') AS b FROM (VALUES (3, 'b'), (1, 'a'), (2, 'b'), (1, 'c')) v(x, y)
-- Ordered-set aggregates.
SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) AS a, percentile_disc(0) WITHIN GROUP (ORDER BY x) AS b, percentile_disc(1) WITHIN GROUP (ORDER BY x) AS c, percentile_disc(0.5) WITHIN GROUP (ORDER BY x DESC) AS d FROM (VALUES (1), (2), (3), (4), (NULL)) v(x)
SELECT mode() WITHIN GROUP (ORDER BY x) AS a, mode() WITHIN GROUP (ORDER BY x DESC) AS b FROM (VALUES (1), (2), (2), (4), (4), (NULL)) v(x)
SELECT g, mode() WITHIN GROUP (ORDER BY s) AS m FROM (VALUES (1, 'x'), (1, 'y'), (1, 'y'), (2, 'z')) v(g, s) GROUP BY g ORDER BY g
-- Templates read as to_char prints them.
SELECT to_date('2026-03-05', 'YYYY-MM-DD') AS a, to_date('05 Mar 2026', 'DD Mon YYYY') AS b, to_date('20260305', 'YYYYMMDD') AS c, to_date('March 5, 26', 'Month DD, YY') AS d
SELECT to_timestamp('2026-03-05 10:11:12', 'YYYY-MM-DD HH24:MI:SS') AS a, to_timestamp('07:30 PM 2026-01-02', 'HH12:MI AM YYYY-MM-DD') AS b, to_timestamp('2026-03-05 12:00:00.5', 'YYYY-MM-DD HH24:MI:SS.MS') AS c
SELECT to_date('2026-13-05', 'YYYY-MM-DD')
SELECT to_date('2026-xx-05', 'YYYY-MM-DD')
-- JSON's set-returning functions, in a select list and in FROM.
SELECT jsonb_object_keys('{"bb": 1, "a": 2}') AS k
SELECT jsonb_array_elements_text('["a", 2, null]') AS e
SELECT * FROM jsonb_array_elements('[1, "a", {"b": null}]')
SELECT value FROM json_array_elements_text('["x", "y"]') AS e ORDER BY value DESC
SELECT * FROM jsonb_object_keys('{"b": 1, "a": 2}') AS k
SELECT * FROM regexp_split_to_table('a,b,,c', ',') AS t(piece)
SELECT jsonb_array_elements('[1, {"b": 2}]') AS e
