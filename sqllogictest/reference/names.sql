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
