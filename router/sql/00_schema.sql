-- snowflake_id_router: logical shards over several PostgreSQL servers.
--
-- router/sql/0*.sql make the router's tables as of 0.3.0, once (fresh installs only); what a
-- later release changes in them is in its router/migrations/V-objects.sql, which its
-- upgrade and the fresh install both run (scripts/build-sql).
--
-- The router database holds the map (logical shard -> node) and a PL/Proxy cluster named
-- snowflake_id with 8192 partitions, partition n = logical shard n: an ID's own shard bits
-- (id_shard(id)) name the partition, so `RUN ON id_shard(id)` reaches the node that made it.
-- The cluster is SQL/MED (`CREATE SERVER snowflake_id FOREIGN DATA WRAPPER plproxy`), so no
-- one else's plproxy.get_cluster_* functions are touched; the server's option pN is shard
-- n's node connect string, kept equal to the map by triggers on the map table (whoever
-- writes it: these functions, or a restore). PL/Proxy reloads a SQL/MED cluster on the
-- server's syscache invalidation, so every router session follows a map change from its
-- next transaction on, without a restart. A shard assigned to no node has a connect string
-- libpq refuses by name: `invalid connection option "shard_7_is_assigned_to_no_node"`.
--
-- The tables: the node registry and the shard map (here), the records of moves and test
-- breakpoints (01_moves.sql; a move's state is the type 0.4.0-objects.sql makes), the
-- router's settings (01_settings.sql), rebalances (02_operations.sql), map versions, other
-- routers and schema changes (03_routers_ddl.sql). How a move runs and what each record
-- means: docs/cluster-design.md.
--
-- Connect strings are readable by every role through pg_foreign_server, so add_node refuses
-- passwords in them: put passwords in ~/.pgpass of the router's (and nodes') server user.
-- Not in a user mapping: whoever may use the server (every routing role) could then log in
-- with them through dblink (docs/security.md, "The router").

CREATE SCHEMA snowflake_id_router;
COMMENT ON SCHEMA snowflake_id_router IS 'Internals of the snowflake_id_router extension: the shard map and helpers.';
REVOKE ALL ON SCHEMA snowflake_id_router FROM PUBLIC;

CREATE TABLE snowflake_id_router.node (
    name text PRIMARY KEY CHECK (name <> '' AND octet_length(name) <= 63),
    connstr text NOT NULL,
    identity text UNIQUE
);
COMMENT ON TABLE snowflake_id_router.node IS
  'Data nodes: name, libpq connect string (normalised, no secret) and identity (system identifier/database OID; NULL until first reached, for nodes added by 0.2.0).';
CREATE TABLE snowflake_id_router.shard (
    shard integer PRIMARY KEY CHECK (shard BETWEEN 0 AND @MAX_SHARD@),
    node text NOT NULL REFERENCES snowflake_id_router.node (name) ON UPDATE CASCADE
);
COMMENT ON TABLE snowflake_id_router.shard IS 'The shard map: logical shard -> node. Shards absent are assigned to no node.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.node', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.shard', '');

-- Connect string of a shard assigned to no node: libpq refuses it, naming the shard.
CREATE FUNCTION snowflake_id_router.unassigned(shard integer) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.format('shard_%s_is_assigned_to_no_node=1', shard);
COMMENT ON FUNCTION snowflake_id_router.unassigned(integer) IS
  'Connect string of a shard assigned to no node: libpq refuses it with invalid connection option "shard_N_is_assigned_to_no_node".';

-- The cluster: 8192 partitions, all assigned to no node at first.
DO $$
BEGIN
    EXECUTE 'CREATE SERVER snowflake_id FOREIGN DATA WRAPPER plproxy OPTIONS ('
        || (SELECT string_agg(format('p%s %L', n, snowflake_id_router.unassigned(n)), ', ' ORDER BY n)
              FROM generate_series(0, @MAX_SHARD@) n)
        || ')';
END
$$;
COMMENT ON SERVER snowflake_id IS
  'PL/Proxy cluster of snowflake_id_router: partition n is logical shard n; options follow the shard map.';
CREATE USER MAPPING FOR PUBLIC SERVER snowflake_id;
