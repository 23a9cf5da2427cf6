-- Several routers, and schema changes on every shard.

-- The map's version: one more at every statement that changes the map (the shard or node
-- table), in the transaction that changes it. Absent: version 0.
CREATE TABLE snowflake_id_router.map_state (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    version bigint NOT NULL
);
COMMENT ON TABLE snowflake_id_router.map_state IS
  'The version of this router''s map: counts the statements that changed the shard or node table.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.map_state', '');

-- On the primary: the routers that follow its map, and how far each has applied it.
CREATE TABLE snowflake_id_router.router (
    name text PRIMARY KEY CHECK (name <> '' AND octet_length(name) <= 63),
    connstr text NOT NULL,
    identity text NOT NULL UNIQUE,
    map_version bigint NOT NULL DEFAULT 0,
    behind_since timestamptz,
    error text
);
COMMENT ON TABLE snowflake_id_router.router IS
  'Routers following this one''s map: name, connect string, identity, the map version each routes by, since when it is behind and why.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.router', '');

-- On a follower: the primary whose map it routes by (one row at most), and the version of
-- that map it applied.
CREATE TABLE snowflake_id_router.follows (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    identity text NOT NULL,
    description text NOT NULL,
    map_version bigint NOT NULL DEFAULT 0,
    since timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_router.follows IS
  'On a follower router: the primary router it follows (identity, how it describes itself) and the version of its map applied here.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.follows', '');

-- alter_shards: each change, and where it stands on each node. Written through the
-- loopback connection as the change goes, so they outlive the caller's session.
CREATE TABLE snowflake_id_router.schema_change (
    id bigint PRIMARY KEY,
    ddl text NOT NULL,
    template text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'done', 'incomplete', 'abandoned')),
    started timestamptz NOT NULL,
    finished timestamptz,
    started_by text NOT NULL,
    error text
);
COMMENT ON TABLE snowflake_id_router.schema_change IS
  'Changes made by alter_shards: the statement, the template, and whether every node has it.';
CREATE TABLE snowflake_id_router.schema_change_node (
    change bigint NOT NULL REFERENCES snowflake_id_router.schema_change (id) ON DELETE CASCADE,
    node text NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'done', 'failed', 'skipped')),
    schemas integer,
    seconds numeric,
    at timestamptz,
    error text,
    PRIMARY KEY (change, node)
);
COMMENT ON TABLE snowflake_id_router.schema_change_node IS
  'Where each alter_shards change stands on each node: pending, done (with the schemas changed), failed or skipped (behind).';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.schema_change', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.schema_change_node', '');
