-- Declared types Eddy keeps beside their Arrow type: varchar(n), numeric(p,s), json, jsonb.
CREATE TABLE declared_types (id INT NOT NULL, title VARCHAR(5), kind character varying, price NUMERIC(10, 2), doc JSONB, raw JSON)
INSERT INTO declared_types VALUES (1, 'abc', 'x', 1.5, '{"b": 1, "a": [1, 2]}', '{"b":1,"a":2}')
-- Longer than its varchar(n): refused (characters, not bytes, are counted).
INSERT INTO declared_types VALUES (2, 'abcdef', 'x', 1, '{}', '{}')
INSERT INTO declared_types VALUES (3, 'éèêëē', 'x', 1, '{}', '{}')
-- Not JSON in a json or jsonb column: refused.
INSERT INTO declared_types VALUES (4, 'a', 'x', 1, '{bad', '{}')
INSERT INTO declared_types VALUES (5, 'a', 'x', 1, '[]', 'nope')
-- Described with their own types (varchar, jsonb, json), jsonb printed as jsonb prints it.
SELECT id, title, kind, price, doc, raw FROM declared_types ORDER BY id
SELECT pg_typeof(title)::text AS a, pg_typeof(doc)::text AS b, pg_typeof(raw)::text AS c, pg_typeof(price)::text AS d FROM declared_types WHERE id = 1
SELECT '{"z": 1, "a": 2}'::jsonb AS j, 'x'::varchar AS v
-- A cast to text is a text, whatever the declared type it reads.
SELECT doc::text AS a, title::text AS b, CAST(raw AS TEXT) AS c, pg_typeof(doc::text)::text AS d FROM declared_types WHERE id = 1
-- CASE and COALESCE keep a declared type their branches share (a string literal takes it).
SELECT COALESCE(title, 'x') AS a, CASE WHEN id = 1 THEN title ELSE NULL END AS b, COALESCE(doc, '{}') AS d, CASE WHEN true THEN title ELSE 'x'::text END AS f FROM declared_types ORDER BY id
-- A cast to varchar(n) keeps the first n characters.
SELECT 'abcdef'::varchar(3) AS a, CAST(12345 AS VARCHAR(2)) AS b, 'ab'::varchar(5) AS c, CAST(NULL AS VARCHAR(2)) AS d, 'éèêë'::character varying(2) AS e
SELECT title::varchar(2) AS t FROM declared_types ORDER BY id
-- The catalogs give each column its declared type and modifier.
SELECT attname::text AS attname, format_type(atttypid, atttypmod) AS type, atttypmod FROM pg_attribute WHERE attrelid = 'declared_types'::regclass AND attnum > 0 ORDER BY attnum
SELECT column_name::text AS c, data_type::text AS t, character_maximum_length AS l, numeric_precision AS p, numeric_scale AS s FROM information_schema.columns WHERE table_name = 'declared_types' ORDER BY ordinal_position
-- A primary key added to an empty table, as a pg_dump script adds it.
CREATE TABLE declared_keys (id INT NOT NULL, name TEXT)
ALTER TABLE ONLY declared_keys ADD CONSTRAINT declared_keys_pkey PRIMARY KEY (id)
SELECT conname::text AS conname, contype::text AS contype FROM pg_constraint WHERE conrelid = 'declared_keys'::regclass
ALTER TABLE declared_keys ADD PRIMARY KEY (id)
CREATE TABLE declared_keys_2 (id INT NOT NULL)
ALTER TABLE declared_keys_2 ADD PRIMARY KEY (nope)
ALTER TABLE IF EXISTS no_such_table ADD PRIMARY KEY (id)
