-- EXTRACT is a numeric whose scale follows the field; date_part the same value as float8.
CREATE TABLE ex (ts TIMESTAMP, d DATE, t TIME, i INTERVAL)
INSERT INTO ex VALUES ('2026-01-02 03:04:05.5', '2026-01-04', '13:14:15.25', '1 month 1 day 00:00:01.5'), ('1999-12-31 23:59:59', '2000-02-29', '00:00:00', '-1.5 seconds'), (NULL, NULL, NULL, NULL)
SELECT extract(year FROM ts), extract(month FROM ts), extract(day FROM ts), extract(hour FROM ts), extract(minute FROM ts) FROM ex ORDER BY ts
SELECT extract(second FROM ts), extract(milliseconds FROM ts), extract(microseconds FROM ts), extract(epoch FROM ts) FROM ex ORDER BY ts
SELECT extract(dow FROM ts), extract(isodow FROM ts), extract(doy FROM ts), extract(week FROM ts), extract(quarter FROM ts), extract(isoyear FROM ts) FROM ex ORDER BY ts
SELECT extract(decade FROM ts), extract(century FROM ts), extract(millennium FROM ts) FROM ex ORDER BY ts
SELECT extract(year FROM d), extract(dow FROM d), extract(epoch FROM d), extract(doy FROM d) FROM ex ORDER BY d
SELECT extract(hour FROM t), extract(minute FROM t), extract(second FROM t), extract(epoch FROM t) FROM ex ORDER BY t
SELECT extract(year FROM i), extract(month FROM i), extract(day FROM i), extract(second FROM i), extract(epoch FROM i), extract(milliseconds FROM i) FROM ex ORDER BY 1
SELECT date_part('second', ts), date_part('epoch', ts), date_part('hour', ts), date_part('dow', d) FROM ex ORDER BY ts
SELECT extract(hour FROM ts) AS h, count(*) FROM ex GROUP BY 1 ORDER BY 1
SELECT EXTRACT(EPOCH FROM TIMESTAMP '2026-01-02 03:04:05.123456'), EXTRACT(SECOND FROM TIME '10:00:30')
SELECT extract(second FROM d) FROM ex
SELECT extract(day FROM t) FROM ex
SELECT extract(timezone FROM ts) FROM ex
SELECT extract(fortnight FROM ts) FROM ex
SELECT extract(timezone FROM TIMESTAMPTZ '2026-01-02 03:04:05+00'), extract(timezone_hour FROM TIMESTAMPTZ '2026-01-02 03:04:05+00')
