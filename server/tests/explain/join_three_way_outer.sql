CREATE TABLE person (id BIGINT PRIMARY KEY, name VARCHAR, city VARCHAR);
CREATE TABLE auction (id BIGINT PRIMARY KEY, seller BIGINT, reserve BIGINT);
CREATE TABLE bid (auction BIGINT, price BIGINT) APPEND ONLY;
EXPLAIN CREATE MATERIALIZED VIEW sellers AS
SELECT p.name, a.id AS auction, b.price
FROM person p LEFT JOIN auction a ON a.seller = p.id
FULL JOIN bid b ON b.auction = a.id AND b.price > a.reserve;
