-- snowflake_id_router 0.2.0 -> 0.3.0, in place: ALTER EXTENSION snowflake_id_router UPDATE TO '0.3.0'.
-- reliability/t_upgrade.sh requires the result to equal a fresh 0.3.0 install.
\echo Use "ALTER EXTENSION snowflake_id_router UPDATE TO '0.3.0'" to load this file. \quit
