-- The node side of snowflake_id_router's protocol: its schema and tables, made once (at 0.3.0).
-- The functions over them are sql/node/node.sql's, sql/node/ddl.sql's and the others' of
-- src/sql/files.rs (CREATE OR REPLACE, so a migration can take them whole); a table new in a
-- later release is written in that release's migration (sql/migrations/), and changed there.

CREATE SCHEMA snowflake_id_node;
COMMENT ON SCHEMA snowflake_id_node IS
  'Internals of snowflake_id: the node side of snowflake_id_router''s protocol (moves, identity, connect strings).';
REVOKE ALL ON SCHEMA snowflake_id_node FROM PUBLIC;

-- A move's record on this node (sql/node/node.sql): one row per move, what it made here and its
-- state. Not dumped: a dump taken mid-move restores inert fence triggers, no state.
CREATE TABLE snowflake_id_node.move (
    key text PRIMARY KEY,                       -- '<router8>/<move id>'
    router text NOT NULL,                       -- the router's identity
    role text NOT NULL CHECK (role IN ('source', 'target')),
    peer text NOT NULL,                         -- the other node's identity
    shards integer[] NOT NULL,
    schemas text[] NOT NULL CHECK (cardinality(schemas) = cardinality(shards) AND cardinality(shards) > 0),
    state text NOT NULL CHECK (state IN ('preparing', 'copying', 'fenced', 'sealed', 'incoming', 'serving')),
    marker text NOT NULL,                       -- marker table, in snowflake_id_node
    created text[] NOT NULL DEFAULT '{}',       -- target: the schemas this move made
    publication text,                           -- source
    slot text,                                  -- source
    subscription text,                          -- target
    suboid oid,                                 -- target: the subscription's OID
    fingerprints text[],                        -- source: each schema's fingerprint when sealed (md5)
    guarded text,                               -- source: md5 of the schemas' owners and privileges at the fence (set_fence)
    dropped integer NOT NULL DEFAULT 0,         -- source, sealed: how many of schemas are dropped (in order)
    made timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((role = 'source') = (state IN ('preparing', 'copying', 'fenced', 'sealed')))
);
COMMENT ON TABLE snowflake_id_node.move IS
  'Moves of snowflake_id_router in progress on this node: one row per move, what it made here and its state.';
CREATE INDEX ON snowflake_id_node.move USING gin (schemas);

-- What each change did here, keyed by the router's name for it ('<router8>/<change id>').
-- Dumped with the database: a restored node still knows the changes it has.
CREATE TABLE snowflake_id_node.schema_change (
    key text PRIMARY KEY,
    ddl text NOT NULL,
    template text NOT NULL,
    schemas integer NOT NULL,
    applied timestamptz NOT NULL
);
COMMENT ON TABLE snowflake_id_node.schema_change IS
  'Changes alter_shards applied on this node, each in the transaction that applied it.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_node.schema_change', '');
