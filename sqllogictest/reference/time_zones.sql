-- Timestamps read in Postgres' forms, and a timestamptz read, split and printed in the
-- session's TimeZone (Eddy keeps the UTC instant).
SELECT TIMESTAMP '2026-01-01 00:00', TIMESTAMP '2026-01-01T10:00:00', TIMESTAMP ' 2026-1-5 10:11:12 ', TIMESTAMP '20260101 101112'
SELECT TIMESTAMP '2026-01-01 10:00:00+02', TIMESTAMP '2026-01-01 24:00:00', TIMESTAMP '2026-01-01 10:00:00.1234565', TIMESTAMP 'epoch'
SELECT TIMESTAMPTZ '2026-01-01 10:00:00+05:30:15', TIMESTAMPTZ '2026-01-01 10:00 -0330', TIMESTAMPTZ '2026-01-01 10:00:00 America/New_York', TIMESTAMPTZ '2026-01-01 10:00Z'
SELECT TIMESTAMP '2026-02-30 00:00:00'
SELECT TIMESTAMP 'garbage'
SELECT TIMESTAMPTZ '2026-01-01 10:00 Mars/Olympus'
SELECT '2026-01-01 00:00'::timestamp, CAST('2026-06-01 12:30' AS TIMESTAMPTZ)
CREATE TABLE zoned (id INT, at TIMESTAMPTZ, wall TIMESTAMP)
INSERT INTO zoned VALUES (1, '2026-01-01 03:00:00+00', '2026-01-01 03:00'), (2, '2026-07-01 12:30:00+00', '2026-07-01 12:30')
SELECT id FROM zoned WHERE at > '2026-06-01 00:00' ORDER BY id
SET TimeZone = 'America/New_York'
INSERT INTO zoned VALUES (3, '2026-03-08 01:30', '2026-03-08 01:30')
SELECT id, at, wall FROM zoned ORDER BY id
SELECT id, extract(hour FROM at), date_part('day', at), extract(timezone FROM at), extract(hour FROM wall) FROM zoned ORDER BY id
SELECT id, date_trunc('day', at), date_trunc('month', at), to_char(at, 'YYYY-MM-DD HH24:MI') FROM zoned ORDER BY id
SELECT id, CAST(at AS DATE), CAST(at AS TIMESTAMP), CAST(at AS TIME), CAST(wall AS TIMESTAMPTZ) FROM zoned ORDER BY id
SELECT id, at AT TIME ZONE 'UTC', wall AT TIME ZONE 'Asia/Kolkata', at AT TIME ZONE 'Asia/Kolkata', timezone('Europe/Paris', at) FROM zoned ORDER BY id
SELECT id, at AT TIME ZONE '+05', CAST(at AS TEXT), 'at ' || at FROM zoned ORDER BY id
SELECT count(*) FROM zoned WHERE CAST(at AS DATE) = DATE '2025-12-31'
SELECT TIMESTAMPTZ '2026-01-01 03:00', TIMESTAMP '2026-01-01 03:00' AT TIME ZONE 'UTC'
SET TimeZone = 'UTC+3'
SELECT TIMESTAMPTZ '2026-01-01 00:00+00', extract(hour FROM TIMESTAMPTZ '2026-01-01 00:00+00')
SET TimeZone = 'UTC'
SELECT id, at, CAST(at AS DATE), extract(hour FROM at) FROM zoned ORDER BY id
-- Casts to text in Postgres' forms.
SELECT CAST(21.0::float8 AS text), CAST(0.1::float4 AS text), CAST(1e20::float8 AS text), CAST(1.50 AS text), CAST(CAST(21 AS numeric) AS text)
SELECT CAST(INTERVAL '1 day 2 hours' AS text), CAST(TIME '12:00:00.5' AS text), CAST('\xdead'::bytea AS text) AS hex, CAST(true AS text)
SELECT CAST(TIMESTAMP '2026-01-01 03:00:00.25' AS text), TIMESTAMP '2026-01-01 03:00:00' || 'x', 'p' || 2.5::float8
DROP TABLE zoned
