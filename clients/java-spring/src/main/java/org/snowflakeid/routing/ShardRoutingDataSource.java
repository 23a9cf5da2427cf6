package org.snowflakeid.routing;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.lookup.AbstractRoutingDataSource;

/**
 * A DataSource over the cluster's data nodes: one HikariCP pool per node (not per shard), the
 * node chosen by the shard bound to the thread ({@link ShardRouter#onShard}) through the shard
 * map read from the router. Each connection it gives runs {@code use_shard} first in every
 * transaction ({@link ShardConnection}). Declare it as the application's DataSource bean:
 * Spring Boot's JPA and JDBC set-up then use it.
 */
public class ShardRoutingDataSource extends AbstractRoutingDataSource implements AutoCloseable {
    private final String routerUrl;
    private final String user;
    private final String password;
    private final Consumer<HikariConfig> poolSettings;
    private volatile ShardMap map;
    private volatile Map<String, DataSource> routes = Map.of();  // node -> pool, swapped whole
    private final Map<String, HikariDataSource> pools = new HashMap<>();  // by node; guarded by this
    private final Map<String, String> poolConnstr = new HashMap<>();

    /**
     * @param routerUrl    the router database (jdbc:postgresql://...), read at start and when a
     *                     node answers SF001
     * @param user         the application's role on the router and the nodes
     * @param password     its password (or null)
     * @param poolSettings pool size, timeouts... of each node's pool (the URL and credentials
     *                     are set here)
     */
    public ShardRoutingDataSource(String routerUrl, String user, String password, Consumer<HikariConfig> poolSettings)
            throws SQLException {
        this.routerUrl = routerUrl;
        this.user = user;
        this.password = password;
        this.poolSettings = poolSettings;
        setTargetDataSources(Map.of());   // routed by determineTargetDataSource (below)
        reload(null);
    }

    /** The map routed by now. */
    public ShardMap map() {
        return map;
    }

    /**
     * Reads the map again unless it changed since {@code seen} (many threads told of one move
     * read it once); then gives each node of the new map its pool.
     */
    public synchronized void reload(ShardMap seen) throws SQLException {
        if (map != seen) {
            return;
        }
        ShardMap fresh;
        try (Connection router = DriverManager.getConnection(routerUrl, user, password)) {
            fresh = ShardMap.load(router);
        }
        fresh.nodes().forEach((node, connstr) -> {
            if (!connstr.equals(poolConnstr.get(node))) {   // a new node, or alter_node
                HikariDataSource old = pools.put(node, newPool(node, connstr));
                poolConnstr.put(node, connstr);
                if (old != null) {   // its connections in use get Hikari's 10 s to be given back
                    old.close();
                }
            }
        });
        routes = Map.copyOf(pools);
        map = fresh;  // published after the pools: a thread that reads it finds its node's pool
    }

    private HikariDataSource newPool(String node, String connstr) {
        Connstr c = new Connstr(connstr);
        HikariConfig cfg = new HikariConfig();
        poolSettings.accept(cfg);
        cfg.setPoolName("snowflake-" + node);
        cfg.setJdbcUrl(c.url);
        cfg.setDataSourceProperties(c.props);
        cfg.setUsername(user);
        cfg.setPassword(password);
        return new HikariDataSource(cfg);
    }

    /** The pool of one node, for work that is on no shard (fan-out's look at what it serves). */
    public DataSource pool(String node) {
        return routes.get(node);
    }

    @Override
    protected Object determineCurrentLookupKey() {
        Integer shard = ShardContext.current();
        return shard == null ? null : map.nodeOrNull(shard);
    }

    /**
     * The pool of the bound shard's node, from this class's own map: AbstractRoutingDataSource's
     * initialize() refills its map in place, which other threads may not see while it routes.
     */
    @Override
    protected DataSource determineTargetDataSource() {
        Object node = determineCurrentLookupKey();
        DataSource pool = node == null ? null : routes.get(node);
        if (pool == null) {   // the shard left the map between getConnection's look and this one
            throw new IllegalStateException("no pool for node " + node + " of shard " + ShardContext.current());
        }
        return pool;
    }

    @Override
    public Connection getConnection() throws SQLException {
        Integer shard = ShardContext.current();
        if (shard == null) {
            throw new SQLException("no shard bound to this thread: run the work through ShardRouter.onShard or byId");
        }
        map.node(shard);  // an SQLException if the map assigns the shard to no node
        return ShardConnection.wrap(super.getConnection(), shard);
    }

    @Override
    public Connection getConnection(String username, String password) throws SQLException {
        throw new SQLException("the application's credentials are the routing DataSource's own");
    }

    @Override
    public synchronized void close() {
        pools.values().forEach(HikariDataSource::close);
    }
}
