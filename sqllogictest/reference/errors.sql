-- SQLSTATEs of bad input.
SELECT 1 / 0
SELECT * FROM no_such_table
SELEC 1
SELECT current_setting('no_such_setting')
SELECT current_setting('jit')
SELECT 'abc'::int
SELECT INTERVAL '1 day' / 0
SELECT INTERVAL '1 month' * 1e12
SELECT INTERVAL '1 day' * INTERVAL '1 day'
