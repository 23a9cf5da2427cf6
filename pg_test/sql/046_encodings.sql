-- Text in any server encoding: every function taking text reads its bytes and names the
-- offending character, 22P02 or 22023, never XX000. A SQL_ASCII database holds any byte
-- (E'\xe9'), a LATIN1 one holds é as one byte; in a UTF-8 one the character is shown as it
-- is, elsewhere as \xNN.
\set regress_db :DBNAME
CREATE DATABASE snowflake_sql_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE snowflake_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
CREATE DATABASE snowflake_utf8 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;

\c snowflake_sql_ascii
CREATE EXTENSION snowflake_id;
CREATE SEQUENCE s;
SHOW server_encoding;
SELECT id_from_text(E'3F0PTSTESXW\xe9');
SELECT id_from_text(E'\xe9\xff\x01 x');
SELECT ulid_timestamp(E'01\xe9RYZ6S41TSV4RRFFQ69G5FAV');
SELECT objectid_timestamp(E'507c7f79bcf86cd7994f6c0\xe9');
SELECT id_timestamp(1, E'discord\xe9');
SELECT id_timestamp(1, E'\xe9', '2026-01-01+00');
SELECT id_fields(1, E'twitt\xe9r');
SELECT * FROM id_decode(1, E'\xe9');
SELECT * FROM id_decode(1, E'\xe9', '2026-01-01+00');
SELECT next_id(1, 's', E'twitter\xe9');
SELECT next_id(1, 's', E'\xe9', '2026-01-01+00');
SELECT id_mask(1, E'000102030405060708090a0b0c0d0e0\xe9');
SELECT id_unmask(1, E'\xe9');
-- ASCII text still works in such a database.
SET timezone = 'UTC';
SELECT id_from_text('3F0PTSTESXWJ0') AS id, id_timestamp(175928847299117063, 'DISCORD') AS discord,
       ulid_timestamp('01ARYZ6S41TSV4RRFFQ69G5FAV') AS ulid,
       id_unmask(id_mask(5, '000102030405060708090a0b0c0d0e0f'), '000102030405060708090a0b0c0d0e0f') AS unmasked;

\c snowflake_latin1
CREATE EXTENSION snowflake_id;
SHOW server_encoding;
SELECT id_from_text(E'3F0PTSTESXW\xe9');
SELECT ulid_timestamp(E'01\xe9RYZ6S41TSV4RRFFQ69G5FAV');
SELECT id_timestamp(1, E'discord\xe9');

\c snowflake_utf8
CREATE EXTENSION snowflake_id;
SHOW server_encoding;
SELECT id_from_text('3F0PTSTESXWé');
SELECT ulid_timestamp('01éRYZ6S41TSV4RRFFQ69G5FAV');
SELECT ulid_timestamp('01ARYZ6S41TSV4RRFFQ69G5FA✓');
SELECT objectid_timestamp('507c7f79bcf86cd7994f6c0✓');
SELECT id_timestamp(1, 'discord✓');

\c :regress_db
DROP DATABASE snowflake_sql_ascii;
DROP DATABASE snowflake_latin1;
DROP DATABASE snowflake_utf8;
