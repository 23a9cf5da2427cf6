package org.snowflakeid.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.snowflakeid.routing.ShardMap;
import org.snowflakeid.routing.ShardRouter;
import org.snowflakeid.routing.ShardRoutingDataSource;

/**
 * An application with no router: the map read from one node (every node keeps the router's
 * last map, app_map() there), and read again from the nodes when a node answers SF001.
 */
class NodeMapTest {
    @Test
    void theMapFromTheNodesFollowsAMove() throws Exception {
        String nodeUrl = Cluster.env("SF_NODE_URL", "jdbc:postgresql://127.0.0.1:5433/postgres");
        try (ShardRoutingDataSource nodes = ShardRoutingDataSource.fromNodes(List.of(nodeUrl),
                     Cluster.env("SF_USER", "app"), null, pool -> pool.setMaximumPoolSize(2));
             Connection admin = Cluster.admin(); Statement st = admin.createStatement()) {
            assertEquals(routersMap(st), describe(nodes.map()), "the map read from one node");
            ShardRouter router = new ShardRouter(nodes);
            int shard = Cluster.SHARDS.get(5);
            assertEquals(shard, (int) router.onShard(shard, () -> useShard(nodes)));
            st.execute("SELECT move_shard(" + shard + ", (SELECT min(name) FROM snowflake_id_router.node "
                    + "WHERE name <> (SELECT node FROM shard_map WHERE shard = " + shard + ")))");
            long movedBefore = router.movedRetries.sum();
            assertEquals(shard, (int) router.onShard(shard, () -> useShard(nodes)));
            assertTrue(router.movedRetries.sum() > movedBefore, "no SF001 was met: the move was not seen");
            assertEquals(routersMap(st), describe(nodes.map()), "the map read again from the nodes");
        }
    }

    /** One transaction on the bound shard (ShardConnection sends use_shard first): the
     *  number of the shard whose schema it reached. */
    private static int useShard(ShardRoutingDataSource ds) {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            int shard;
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(
                    "SELECT shard FROM snowflake_id_shards WHERE schema_name = (current_schemas(false))[2]")) {
                rs.next();
                shard = rs.getInt(1);
            }
            c.commit();
            return shard;
        } catch (SQLException e) {
            throw new RuntimeException(e);
        }
    }

    private static String routersMap(Statement st) throws SQLException {
        StringBuilder b = new StringBuilder();
        long version = 0;
        try (ResultSet rs = st.executeQuery("SELECT shard, node, map_version FROM snowflake_id_router.app_map()")) {
            while (rs.next()) {
                b.append(rs.getInt(1)).append('=').append(rs.getString(2)).append(' ');
                version = rs.getLong(3);
            }
        }
        return b.append('v').append(version).toString();
    }

    private static String describe(ShardMap map) {
        StringBuilder b = new StringBuilder();
        for (int s = 0; s < ShardMap.SHARDS; s++) {
            if (map.nodeOrNull(s) != null) {
                b.append(s).append('=').append(map.nodeOrNull(s)).append(' ');
            }
        }
        return b.append('v').append(map.version()).toString();
    }
}
