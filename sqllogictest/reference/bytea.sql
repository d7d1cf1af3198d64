-- bytea: read in the hex and escape input forms, printed in hex, counted in bytes.
SELECT '\xdeadbeef'::bytea AS b, length('\xdeadbeef'::bytea) AS n
SELECT '\x DE AD'::bytea AS b, CAST('\x' AS bytea) AS empty
SELECT '\001abc'::bytea AS b, length('\001abc'::bytea) AS n
SELECT 'a\\b'::bytea AS b, octet_length('a\\b'::bytea) AS n, 'abc'::bytea AS plain
SELECT encode('\xdeadbeef'::bytea, 'hex') AS h, encode('abc'::bytea, 'base64') AS b64
SELECT decode('deadbeef', 'hex') AS b, length(decode('YWJj', 'base64')) AS n
CREATE TABLE bytes (k INT PRIMARY KEY, v BYTEA)
INSERT INTO bytes VALUES (1, '\x00ff'), (2, '\001\002'), (3, ''), (4, NULL)
SELECT k, v, length(v) AS n FROM bytes ORDER BY k
SELECT k FROM bytes WHERE v = '\x00ff'
-- Not bytea input: refused as Postgres refuses it, and nothing is written.
SELECT '\xabc'::bytea
SELECT '\xzz'::bytea
SELECT '\9'::bytea
INSERT INTO bytes VALUES (5, '\xf')
SELECT count(*) AS n FROM bytes
-- encode and decode in Postgres' formats: escape, base64 (padded, broken into lines of 76), hex.
SELECT encode('\x0001ff5c41'::bytea, 'escape') AS e, decode('\000\001\377\\A', 'escape') AS d
SELECT encode('ab'::bytea, 'base64') AS b, decode('YW I=', 'base64') AS d, encode('\x00ff'::bytea, 'hex') AS h
SELECT encode(decode(repeat('ab', 60), 'hex'), 'base64') AS long
SELECT decode('\9', 'escape')
