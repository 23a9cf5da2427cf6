-- snowflake_id 0.1.0 -> 0.2.0, in place: ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'.
--
-- Each section below carries one part of 0.2.0 to a 0.1.0 installation, in the same words as
-- the fresh install (snowflake_id--0.2.0.sql, generated from src/ by cargo pgrx). The upgrade
-- test (reliability/t_upgrade.sh) installs 0.1.0 as released, runs this script and requires
-- the result to be identical to a fresh 0.2.0 install: every function's signature,
-- volatility, strictness, parallel safety, settings, body and comment, every table and view.
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.2.0'" to load this file. \quit

-- == The installer (create_shard and friends): hardened, shard templates ==

-- == Layouts: other people's IDs ==

-- == Applications: text form, masks, JSON, adopting tables ==

-- == Platform ==
