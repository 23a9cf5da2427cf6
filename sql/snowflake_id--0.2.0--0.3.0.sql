-- snowflake_id 0.2.0 -> 0.3.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'.
--
-- Each section carries one part of 0.3.0 to a 0.2.0 installation, in the same words as the
-- fresh install. reliability/t_upgrade.sh installs 0.2.0 (and 0.1.0) as released, runs the
-- chain and requires the result to equal a fresh 0.3.0 install (reliability/surface.sql).
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit
