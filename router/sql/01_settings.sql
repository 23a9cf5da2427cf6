-- Settings of the router's own operations. Code that runs with the extension owner's rights
-- reads no session setting: these are rows of a table only its owner may write (a
-- superuser: UPDATE/INSERT here), dumped with the router. Only overrides are stored; the
-- defaults are in snowflake_id_router.setting(name).
CREATE TABLE snowflake_id_router.setting (
    name text PRIMARY KEY
        CHECK (name IN ('lock_timeout', 'copy_timeout', 'cutover_timeout', 'cleanup_timeout', 'status_timeout',
                        'schema_change_timeout', 'self_connstr')),
    value text NOT NULL,
    -- A timeout of 0 would mean no timeout at all.
    CHECK (name = 'self_connstr' OR (value::interval > interval '0' AND value::interval <= interval '1 day'))
);
COMMENT ON TABLE snowflake_id_router.setting IS
  'Overrides of the router''s settings (timeouts, the loopback connect string); writable by the extension''s owner only.';
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_router.setting', '');
