-- == Seeing the nodes: one query per node, sent to all at once ==

-- Runs sql (a query returning one jsonb value) on every node, in parallel: each node is
-- reached, sent its query, and only then are the answers collected, so the nodes work at
-- the same time and the total is about the slowest node's time, not the sum. A node that
-- cannot be reached, refuses, times out (setting status_timeout) or turns out to be another
-- database (identity) gives a row with its error and no result, never an error of the whole
-- call: a status view must work best when a node is down. A cancel or statement_timeout of
-- the caller's own, before that deadline, ends the call (57014), never a partial answer.
-- With chunk, sql is a format() string asking for the next chunk of rows: %1$s is the shard
-- after which to start (-1 at first), %2$s the chunk; it returns a jsonb array of objects
-- with a "shard" key, and is sent again from the last shard while a full chunk came back.
-- The result is then the whole array. (Each chunk is its own transaction on the node: see
-- sql/node_status.sql on locks.)
CREATE OR REPLACE FUNCTION snowflake_id_router.on_nodes(sql text, chunk integer DEFAULT NULL)
RETURNS TABLE (node text, error text, result jsonb)
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nodes snowflake_id_router.node[];
    conns text[] := '{}';
    errors text[] := '{}';
    results jsonb[] := '{}';
    after integer[] := '{}';
    waiting boolean[] := '{}';          -- a query was sent and is not collected yet
    pending boolean := true;
    found_identity text;
    answer jsonb;
    got text[];
    deadline timestamptz := snowflake_id_node.monotonic() + snowflake_id_router.timeout('status_timeout');
BEGIN
    SELECT coalesce(array_agg(n ORDER BY n.name), '{}') INTO nodes FROM snowflake_id_router.node n;
    FOR i IN 1 .. cardinality(nodes) LOOP
        conns[i] := 'snowflake_id_router_node_' || i;
        after[i] := -1;
        results[i] := CASE WHEN chunk IS NULL THEN NULL ELSE '[]'::jsonb END;
        BEGIN
            PERFORM snowflake_id_router.connect(conns[i], snowflake_id_router.connect_options() || ' ' || nodes[i].connstr,
                                                format('node %L', nodes[i].name));
            found_identity := snowflake_id_router.remote_node_identity(conns[i]);
            IF NOT snowflake_id_router.same_node(coalesce(nodes[i].identity, found_identity), found_identity) THEN
                RAISE EXCEPTION 'the connect string reaches another node (identity %, registered as %)',
                                found_identity, nodes[i].identity USING ERRCODE = 'object_not_in_prerequisite_state';
            END IF;
            PERFORM snowflake_id_router.call(conns[i], format('SET statement_timeout = %L',
                extract(epoch FROM snowflake_id_router.setting('status_timeout')::interval) * 1000),
                snowflake_id_router.timeout('status_timeout'), 'setting up the session');
        EXCEPTION WHEN query_canceled THEN
            IF snowflake_id_node.monotonic() < deadline THEN
                RAISE;      -- the caller's cancel or statement_timeout, not this node's error
            END IF;
            errors[i] := SQLERRM;
        WHEN OTHERS THEN
            errors[i] := SQLERRM;
        END;
    END LOOP;
    WHILE pending LOOP
        pending := false;
        FOR i IN 1 .. cardinality(nodes) LOOP
            waiting[i] := errors[i] IS NULL AND (chunk IS NULL OR after[i] IS NOT NULL);
            CONTINUE WHEN NOT waiting[i];
            BEGIN
                PERFORM snowflake_id_node.remote_send(conns[i],
                    format('SELECT jsonb_build_array(snowflake_id_node.identity(), (%s))::text',
                           CASE WHEN chunk IS NULL THEN sql ELSE format(sql, after[i], chunk) END));
            EXCEPTION WHEN OTHERS THEN
                errors[i] := SQLERRM;
                waiting[i] := false;
            END;
        END LOOP;
        FOR i IN 1 .. cardinality(nodes) LOOP
            CONTINUE WHEN NOT waiting[i];
            -- A remote error comes back as a value, not raised; a timeout (status_timeout
            -- for all the nodes together) or a broken connection is this node's error.
            BEGIN
                got := snowflake_id_node.remote_result(conns[i],
                    greatest(date_part('epoch', deadline - snowflake_id_node.monotonic()), 0), 'asking the node');
                found_identity := (got[1]::jsonb)->>0;
                answer := (got[1]::jsonb)->1;
            EXCEPTION WHEN query_canceled THEN
                IF snowflake_id_node.monotonic() < deadline THEN
                    RAISE;  -- the caller's cancel or statement_timeout, not this node's error
                END IF;
                got := ARRAY[NULL, SQLSTATE, SQLERRM];
            WHEN OTHERS THEN
                got := ARRAY[NULL, SQLSTATE, SQLERRM];
            END;
            IF got[2] IS NOT NULL THEN
                errors[i] := CASE WHEN got[3] LIKE '%snowflake_id_node.%does not exist%'
                                  THEN 'the node runs snowflake_id older than 0.3.0 (there: ALTER EXTENSION snowflake_id UPDATE)'
                                  ELSE coalesce(got[3], 'no answer') END;
            -- (found is identity(), without the mark: the connection was checked whole above.)
            ELSIF NOT snowflake_id_router.same_node(found_identity, coalesce(nodes[i].identity, found_identity)) THEN
                errors[i] := format('the connect string reaches another database (identity %s, registered as %s)',
                                    found_identity, nodes[i].identity);
            ELSIF chunk IS NULL THEN
                results[i] := answer;
            ELSE
                results[i] := results[i] || answer;
                after[i] := CASE WHEN jsonb_array_length(answer) = chunk THEN (answer->(chunk - 1)->>'shard')::integer END;
                pending := pending OR after[i] IS NOT NULL;
            END IF;
        END LOOP;
    END LOOP;
    FOR i IN 1 .. cardinality(nodes) LOOP
        PERFORM snowflake_id_router.disconnect(conns[i]);
        node := nodes[i].name;
        error := errors[i];
        result := CASE WHEN errors[i] IS NULL THEN results[i] END;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.on_nodes(text, integer) IS
  'Runs a query returning one jsonb on every node at once (identities checked), or chunk by chunk: per node the answer, or the error that kept it.';

-- Shards a node is asked about per query (sql/node_status.sql: each takes about six
-- relation locks a shard on the node until its transaction ends).
CREATE OR REPLACE FUNCTION snowflake_id_router.status_chunk() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 128;
COMMENT ON FUNCTION snowflake_id_router.status_chunk() IS
  'Shards a node answers for per query of shard_status and the rebalancer.';

CREATE OR REPLACE FUNCTION snowflake_id_router.node_status()
RETURNS TABLE (node text, reachable boolean, error text, wal_level text, in_recovery boolean,
               shards_mapped integer, shards_served integer, rows bigint, bytes bigint,
               moves_running integer, leftovers text[],
               slot_wal_bytes bigint, free_slots integer, free_wal_senders integer,
               standbys integer, sync_standbys integer, standby_lag_bytes bigint)
LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    SELECT o.node, o.error IS NULL, o.error, s.wal_level, s.in_recovery,
           (SELECT count(*) FROM snowflake_id_router.shard m WHERE m.node = o.node)::integer,
           s.shards, s.rows, s.bytes, s.moves_running, s.leftovers,
           s.slot_wal_bytes, s.free_slots, s.free_wal_senders, s.standbys, s.sync_standbys, s.standby_lag_bytes
      FROM snowflake_id_router.on_nodes('SELECT to_jsonb(s) FROM snowflake_id_node.node_stats() s') o
      LEFT JOIN LATERAL jsonb_to_record(o.result) AS s(
           wal_level text, in_recovery boolean, shards integer, rows bigint, bytes bigint,
           moves_running integer, leftovers text[], slot_wal_bytes bigint,
           free_slots integer, free_wal_senders integer, standbys integer, sync_standbys integer,
           standby_lag_bytes bigint) ON true
     ORDER BY o.node;
END;
COMMENT ON FUNCTION snowflake_id_router.node_status() IS 'The rows of the view node_status.';

CREATE OR REPLACE VIEW node_status AS SELECT * FROM snowflake_id_router.node_status();
COMMENT ON VIEW node_status IS
  'Each node, asked now (one query per node, all at once): reachable, wal_level, shards mapped and served, rows (estimated), the database''s bytes, moves running and what moves left, WAL held by slots, free slots and WAL senders, standbys and their lag.';

-- One row per shard a node serves (with data: a schema made by create_shard), from every
-- node that answers; mapped is false for a copy the map does not send calls to (a shard
-- made on the wrong node, a copy left behind). A node that does not answer is named in a
-- WARNING: its shards are missing from the result.
CREATE OR REPLACE FUNCTION snowflake_id_router.shard_status()
RETURNS TABLE (shard integer, node text, mapped boolean, schema_name text, tables integer, rows bigint,
               bytes bigint, newest_id bigint, newest_at timestamptz, ahead_of_clock interval,
               ids_last_minute bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT * FROM snowflake_id_router.on_nodes(
                 $q$SELECT coalesce(jsonb_agg(to_jsonb(s)), '[]') FROM snowflake_id_node.shard_stats(true, %s, %s) s$q$,
                 snowflake_id_router.status_chunk()) LOOP
        IF o.error IS NOT NULL THEN
            RAISE WARNING 'node %: %', quote_literal(o.node), o.error
                USING DETAIL = 'The shards of this node are not listed.';
            CONTINUE;
        END IF;
        RETURN QUERY
        SELECT x.shard, o.node, m.node IS NOT DISTINCT FROM o.node, x.schema_name, x.tables, x.rows, x.bytes,
               x.newest_id, x.newest_at, x.ahead_of_clock, x.ids_last_minute
          FROM jsonb_to_recordset(o.result) AS x(
                   shard integer, schema_name text, tables integer, rows bigint, bytes bigint, newest_id bigint,
                   newest_at timestamptz, ahead_of_clock interval, ids_last_minute bigint)
          LEFT JOIN snowflake_id_router.shard m ON m.shard = x.shard;
    END LOOP;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.shard_status() IS 'The rows of the view shard_status.';

CREATE OR REPLACE VIEW shard_status AS SELECT * FROM snowflake_id_router.shard_status() ORDER BY shard, node;
COMMENT ON VIEW shard_status IS
  'Each shard a node serves, asked now (one query per node, all at once): node, whether the map sends its calls there, schema, tables, rows (estimated), bytes, newest ID, its time and lead over the node''s clock, rows with an ID of the last minute.';

-- == Repointing and removing nodes ==

-- A node reached through another connect string: its promoted standby after a failover, a
-- new address. The new string must reach the same database (identity: system identifier
-- and database OID, which a promoted physical standby keeps), one that is not in recovery
-- (a standby not yet promoted would refuse every write). The connect string of every shard
-- of the node changes in this one transaction (the map's trigger), so every router session
-- routes there from its next transaction on, all at once.
CREATE OR REPLACE FUNCTION alter_node(node text, connstr text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n snowflake_id_router.node;
    normal text;
    found_identity text;
    recovering boolean;
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('alter_node');
    IF node IS NULL OR connstr IS NULL THEN
        RAISE EXCEPTION 'alter_node: node and connstr must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('alter_node');
    normal := snowflake_id_router.normalize_connstr(connstr);
    SELECT * INTO n FROM snowflake_id_router.node x WHERE x.name = alter_node.node;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object',
            HINT = 'Register it with add_node(name, connstr).';
    END IF;
    BEGIN
        PERFORM snowflake_id_router.connect('snowflake_id_router_alter', snowflake_id_router.connect_options() || ' ' || normal,
                                            format('node %L', node));
        found_identity := snowflake_id_router.remote_node_identity('snowflake_id_router_alter');
        recovering := snowflake_id_router.fetch('snowflake_id_router_alter', 'SELECT pg_catalog.pg_is_in_recovery()::text');
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_alter');
    EXCEPTION WHEN OTHERS THEN
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_alter');
        RAISE;
    END;
    IF n.identity IS NULL THEN
        -- Registered by 0.2.0 and never reached since: the old connect string, if it still
        -- reaches anything, says what the node is.
        BEGIN
            PERFORM snowflake_id_router.connect('snowflake_id_router_alter', snowflake_id_router.connect_options() || ' ' || n.connstr,
                                                format('node %L', node));
            n.identity := snowflake_id_router.remote_node_identity('snowflake_id_router_alter');
        EXCEPTION WHEN OTHERS THEN
            PERFORM snowflake_id_router.check_new_identity(node, found_identity);
            RAISE WARNING 'node % had no recorded identity and its old connect string reaches nothing: it is now known as %',
                quote_literal(node), found_identity
                USING DETAIL = 'Whether the new connect string reaches the same database as the old one could not be checked.';
        END;
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_alter');
    END IF;
    IF NOT snowflake_id_router.same_node(n.identity, found_identity) THEN
        RAISE EXCEPTION 'the new connect string of node % reaches another database (identity %, node % is %)',
            quote_literal(node), found_identity, quote_literal(node), n.identity
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'alter_node repoints a node to the same database: another address of it, or its promoted physical standby (which carries the mark the router wrote into the node).';
    END IF;
    IF recovering THEN
        RAISE EXCEPTION 'the new connect string of node % reaches a server in recovery (a standby)', quote_literal(node)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Promote it first (pg_ctl promote, or SELECT pg_promote() there), then run alter_node again.';
    END IF;
    IF snowflake_id_router.node_mark_of(n.identity) IS NULL THEN
        -- Registered without a mark (by 0.3.0): this call gives it one, unless the server
        -- carries another registered node's.
        PERFORM snowflake_id_router.check_new_identity(node, found_identity);
        found_identity := snowflake_id_router.give_mark(node, normal, found_identity);
    END IF;
    -- Committed at once, for every router session here, then pushed to the other routers.
    IF NOT snowflake_id_router.repoint_node(node, n.connstr, normal, found_identity) THEN
        RAISE WARNING 'node % is repointed on this router, but not yet on every other router', quote_literal(node)
            USING HINT = 'See router_status; repair_moves() or snowflake_id_router.push_map() brings them up to date once they can be reached.';
    END IF;
    -- The loopback connection repoint_node committed through is this call's: it must not
    -- stay open in the caller's session (and transaction) once the call returns.
    PERFORM snowflake_id_router.disconnect('sfid:self');
END
$$;
COMMENT ON FUNCTION alter_node(text, text) IS
  'Repoints a node to a new connect string reaching the same database (another address, its promoted standby), for every router session at once.';

-- Gives the node that connect string normal reaches (identity seen) a mark if it has none
-- (mark_node); returns its identity, with its mark.
CREATE OR REPLACE FUNCTION snowflake_id_router.give_mark(node text, normal text, seen text) RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM snowflake_id_router.connect('snowflake_id_router_mark', snowflake_id_router.connect_options() || ' ' || normal,
                                        format('node %L', node));
    IF snowflake_id_router.remote_node_identity('snowflake_id_router_mark') IS DISTINCT FROM seen THEN
        RAISE EXCEPTION 'node % changed while it was being checked (now %, was %)', quote_literal(node),
            snowflake_id_router.remote_node_identity('snowflake_id_router_mark'), seen
            USING ERRCODE = 'serialization_failure';
    END IF;
    seen := snowflake_id_router.mark_node('snowflake_id_router_mark', seen);
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_mark');
    RETURN seen;
EXCEPTION WHEN OTHERS THEN
    PERFORM snowflake_id_router.disconnect('snowflake_id_router_mark');
    RAISE;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.give_mark(text, text, text) IS
  'Gives a node whose identity is still seen a mark if it has none (mark_node); returns its identity.';

-- Removes a node that holds no shard: none mapped to it (drain_node moves them off first),
-- none it still serves whatever the map says (a shard made there by hand, a copy left
-- behind: its rows would vanish from every view and from the router's reach), and none in an
-- unfinished move from or to it. A node that cannot be reached (or no longer reaches its
-- database) and to which no shard is mapped is removed with a WARNING: what it may still
-- serve is not checked, and is no longer the router's.
CREATE OR REPLACE FUNCTION remove_node(node text) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    served integer[];
    unreachable text;
BEGIN
    PERFORM snowflake_id_router.refuse_transaction_block('remove_node');
    IF node IS NULL THEN
        RAISE EXCEPTION 'remove_node: node must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM snowflake_id_router.require_primary('remove_node');
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = remove_node.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    -- What it serves, asked before the map is locked (reaching it may take connect_timeout).
    BEGIN
        PERFORM snowflake_id_router.connect_node('snowflake_id_router_remove', node);
        served := snowflake_id_router.call('snowflake_id_router_remove', 'SELECT snowflake_id_node.served_shards()::text',
                                           snowflake_id_router.timeout('status_timeout'), 'asking for its shards');
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_remove');
    EXCEPTION WHEN OTHERS THEN
        PERFORM snowflake_id_router.disconnect('snowflake_id_router_remove');
        unreachable := SQLERRM;
    END;
    PERFORM snowflake_id_router.commit_apart(format('SELECT snowflake_id_router.drop_node(%L, %L)', node, served));
    IF unreachable IS NOT NULL THEN
        RAISE WARNING 'node % cannot be reached: whether it still serves shard schemas was not checked (%)', quote_literal(node), unreachable
            USING DETAIL = 'No shard is mapped to it: it is removed. What it may still hold is no longer the router''s.';
    END IF;
END
$$;
COMMENT ON FUNCTION remove_node(text) IS
  'Removes a node to which no shard is mapped, that serves no shard schema and takes part in no unfinished move (55000 otherwise); one that cannot be reached, with a WARNING.';

-- (Run apart by remove_node: commit_apart.) Removes node unless a shard is mapped to it, it
-- is part of an unfinished move, or it serves one of the shards served (its answer).
CREATE OR REPLACE FUNCTION snowflake_id_router.drop_node(node text, served integer[]) RETURNS void
LANGUAGE plpgsql VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    held integer;
    first_held integer;
    unfinished text;
BEGIN
    -- Serialises with assign_shards and map flips: no shard can be assigned to it meanwhile.
    LOCK TABLE snowflake_id_router.shard IN SHARE ROW EXCLUSIVE MODE;
    IF NOT EXISTS (SELECT FROM snowflake_id_router.node n WHERE n.name = drop_node.node) THEN
        RAISE EXCEPTION 'node % does not exist', quote_literal(node) USING ERRCODE = 'undefined_object';
    END IF;
    SELECT count(*), min(s.shard) INTO held, first_held FROM snowflake_id_router.shard s WHERE s.node = drop_node.node;
    IF held > 0 THEN
        RAISE EXCEPTION 'node % still holds % shard(s), the first shard %', quote_literal(node), held, first_held
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('CALL drain_node(%L) moves them to the other nodes.', node);
    END IF;
    -- An unfinished move from or to it still has something to complete or undo there.
    SELECT format('move %s of shard(s) %s from node %L to node %L (%s)', m.id, array_to_string(m.shards, ', '),
                  m.source, m.target, m.state)
      INTO unfinished FROM snowflake_id_router.move m
     WHERE NOT snowflake_id_router.move_finished(m.state) AND drop_node.node IN (m.source, m.target)
     ORDER BY m.id LIMIT 1;
    IF unfinished IS NOT NULL THEN
        RAISE EXCEPTION 'node % is part of an unfinished move: %', quote_literal(node), unfinished
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'SELECT * FROM repair_moves() completes or undoes it once its mover is gone.';
    END IF;
    IF cardinality(served) > 0 THEN
        RAISE EXCEPTION 'node % still serves % shard schema(s), which the map sends elsewhere: %', quote_literal(node),
            cardinality(served),
            (SELECT string_agg(format('shard %s (mapped to %s)', s, coalesce(quote_literal(m.node), 'no node')), ', ' ORDER BY s)
               FROM unnest(served[1:5]) s LEFT JOIN snowflake_id_router.shard m ON m.shard = s)
            || CASE WHEN cardinality(served) > 5 THEN ', ...' ELSE '' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Removed, the node''s schemas and their rows would vanish from every view of the router.',
                  HINT = 'shard_status lists them (mapped false): carry what they hold to the node the map names, or drop them there (drop_shard), then remove the node.';
    END IF;
    DELETE FROM snowflake_id_router.node n WHERE n.name = drop_node.node;
END
$$;
COMMENT ON FUNCTION snowflake_id_router.drop_node(text, integer[]) IS
  'remove_node''s change of the map, committed apart: removes a node no shard is mapped to, in no unfinished move, serving none of served (55000 otherwise).';
