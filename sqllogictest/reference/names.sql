-- Qualified names: [database.]schema.name, and quoted identifiers keep their case.
CREATE TABLE public.ref_t (a INT, b TEXT)
INSERT INTO public.ref_t VALUES (1, 'one'), (2, 'two')
SELECT a, b FROM ref_t ORDER BY a
SELECT a FROM public.ref_t WHERE b = 'two'
CREATE TABLE "Mixed" ("Key" INT)
INSERT INTO "Mixed" VALUES (7)
SELECT "Key" FROM public."Mixed"
SELECT column_name::text AS c, data_type::text AS t FROM information_schema.columns WHERE table_name = 'ref_t' ORDER BY ordinal_position
SELECT table_schema::text AS s, table_name::text AS t FROM information_schema.tables WHERE table_name IN ('ref_t', 'Mixed') ORDER BY table_name
DROP TABLE public.ref_t
DROP TABLE "Mixed"
SELECT * FROM ref_t
-- Repeated output names: a cast is named after what it casts, and both columns are kept.
CREATE TABLE ref_n (value INT)
INSERT INTO ref_n VALUES (1), (2)
SELECT value, CAST(value AS TEXT), (value)::text FROM ref_n ORDER BY 1
SELECT a.value, b.value FROM ref_n a, ref_n b WHERE a.value = 1 AND b.value = 2
DROP TABLE ref_n
