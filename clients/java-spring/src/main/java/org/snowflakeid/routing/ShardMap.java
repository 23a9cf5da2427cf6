package org.snowflakeid.routing;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The shard map an application routes by, as the router's {@code snowflake_id_router.app_map()}
 * (or a node's {@code app_map()}, its copy of it) gives it: each assigned shard's node, each node's connect string (it holds no secret: the
 * application adds its own user and password) and the map's version. Immutable: a reload
 * makes a new one.
 */
public final class ShardMap {
    /** Logical shards of the ID layout: 13 bits. */
    public static final int SHARDS = 8192;

    private final long version;
    private final String[] nodeOf = new String[SHARDS];  // by shard; null: assigned to no node
    private final Map<String, String> connstrOf = new LinkedHashMap<>();

    private ShardMap(long version) {
        this.version = version;
    }

    /** The shard an ID was made on: bits 10..22 of the ID (the database's {@code id_shard}). */
    public static int shardOf(long id) {
        return (int) ((id >> 10) & (SHARDS - 1));
    }

    /** Reads the map from the router (one query; any role may run app_map()). */
    public static ShardMap load(Connection router) throws SQLException {
        ShardMap map = read(router, "SELECT shard, node, connstr, map_version FROM snowflake_id_router.app_map()");
        if (map == null) {
            throw new SQLException("the router's shard map is empty: no shard is assigned to a node");
        }
        return map;
    }

    /**
     * Reads a node's copy of the map (app_map() there: the map the router last pushed it, any
     * role may read it); null if it has none yet. A node that missed a push gives an older
     * map under its older version: ask several and keep the highest version.
     */
    public static ShardMap loadFromNode(Connection node) throws SQLException {
        return read(node, "SELECT shard, node, connstr, map_version FROM app_map()");
    }

    private static ShardMap read(Connection conn, String query) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(query)) {
            ShardMap map = null;
            while (rs.next()) {
                if (map == null) {
                    map = new ShardMap(rs.getLong(4));
                }
                map.nodeOf[rs.getInt(1)] = rs.getString(2);
                map.connstrOf.put(rs.getString(2), rs.getString(3));
            }
            return map;
        }
    }

    public long version() {
        return version;
    }

    /** The node that serves a shard, or null if the map assigns it to none. */
    public String nodeOrNull(int shard) {
        return shard >= 0 && shard < SHARDS ? nodeOf[shard] : null;
    }

    /** The node that serves a shard; an SQLException if the map assigns it to none. */
    public String node(int shard) throws SQLException {
        String node = nodeOrNull(shard);
        if (node == null) {
            throw new SQLException("shard " + shard + " is assigned to no node (shard map version " + version + ")",
                    "22023");
        }
        return node;
    }

    /** Node name to connect string, for every node that serves a shard. */
    public Map<String, String> nodes() {
        return Collections.unmodifiableMap(connstrOf);
    }
}
