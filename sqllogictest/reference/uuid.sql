-- uuid: read in every form Postgres reads, held and printed in canonical form, 16 bytes in binary.
CREATE TABLE uuid_rows (id uuid PRIMARY KEY, name TEXT, parent UUID)
INSERT INTO uuid_rows VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'upper', NULL), ('{b0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}', 'braces', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), ('c0eebc999c0b4ef8bb6d6bb9bd380a11', 'bare', 'A0EE-BC99-9C0B-4EF8-BB6D-6BB9-BD38-0A11')
SELECT id, name, parent FROM uuid_rows ORDER BY id
SELECT id, name FROM uuid_rows WHERE id = 'B0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'
SELECT name FROM uuid_rows WHERE id IN ('C0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11') ORDER BY name
SELECT name FROM uuid_rows WHERE id > 'B0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11' ORDER BY name
SELECT c.name AS child, p.name AS parent FROM uuid_rows c JOIN uuid_rows p ON c.parent = p.id ORDER BY 1
SELECT parent, count(*) AS n FROM uuid_rows GROUP BY parent ORDER BY parent
SELECT id::text AS t, pg_typeof(id)::text AS ty, upper(id::text) AS u FROM uuid_rows WHERE name = 'bare'
-- Not a uuid: refused, in a write, a cast and a comparison.
INSERT INTO uuid_rows VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1', 'short', NULL)
INSERT INTO uuid_rows VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11x', 'long', NULL)
SELECT 'a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11'::uuid
SELECT 'urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid
SELECT name FROM uuid_rows WHERE id = 'nope'
-- Updated and deleted by any form of its key.
UPDATE uuid_rows SET parent = 'C0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11' WHERE id = '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'
DELETE FROM uuid_rows WHERE id = 'B0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'
SELECT id, name, parent FROM uuid_rows ORDER BY id
-- Literals and casts.
SELECT '123E4567-E89B-12D3-A456-426614174000'::uuid AS a, CAST('123e4567e89b12d3a456426614174000' AS UUID) AS b, NULL::uuid AS c
SELECT x FROM (VALUES ('{123E4567-E89B-12D3-A456-426614174000}'::uuid), ('00000000-0000-0000-0000-000000000000'::uuid)) v(x) ORDER BY x
SELECT length(gen_random_uuid()::text) AS a, pg_typeof(gen_random_uuid())::text AS b, gen_random_uuid() = gen_random_uuid() AS c
-- The catalogs name the type.
SELECT attname::text AS attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'uuid_rows'::regclass AND attnum > 0 ORDER BY attnum
SELECT column_name::text AS c, data_type::text AS t, udt_name::text AS u FROM information_schema.columns WHERE table_name = 'uuid_rows' ORDER BY ordinal_position
