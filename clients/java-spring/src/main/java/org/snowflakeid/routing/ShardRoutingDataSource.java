package org.snowflakeid.routing;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.lookup.AbstractRoutingDataSource;

/**
 * A DataSource over the cluster's data nodes: one HikariCP pool per node (not per shard), the
 * node chosen by the shard bound to the thread ({@link ShardRouter#onShard}) through the shard
 * map read from the router or, with no router, from the nodes (each keeps the router's last
 * map: the highest version they give is taken). Each connection it gives runs {@code use_shard} first in every
 * transaction ({@link ShardConnection}). Declare it as the application's DataSource bean:
 * Spring Boot's JPA and JDBC set-up then use it.
 */
public class ShardRoutingDataSource extends AbstractRoutingDataSource implements AutoCloseable {
    private final String routerUrl;           // null: the map is read from the nodes only
    private final List<String> nodeUrls;     // nodes to read the map from before the map names any
    private final String user;
    private final String password;
    private final Consumer<HikariConfig> poolSettings;
    private volatile ShardMap map;
    private volatile Map<String, DataSource> routes = Map.of();  // node -> pool, swapped whole
    private final Map<String, HikariDataSource> pools = new HashMap<>();  // by node; guarded by this
    private final Map<String, String> poolConnstr = new HashMap<>();

    /**
     * @param routerUrl    the router database (jdbc:postgresql://...), read at start and when a
     *                     node answers SF001; while it does not answer, the nodes of the map
     * @param user         the application's role on the router and the nodes
     * @param password     its password (or null)
     * @param poolSettings pool size, timeouts... of each node's pool (the URL and credentials
     *                     are set here)
     */
    public ShardRoutingDataSource(String routerUrl, String user, String password, Consumer<HikariConfig> poolSettings)
            throws SQLException {
        this(routerUrl, List.of(), user, password, poolSettings);
    }

    /**
     * With no router: the map is read from the nodes (jdbc:postgresql://... of a few of them),
     * then from the nodes the map names.
     */
    public static ShardRoutingDataSource fromNodes(List<String> nodeUrls, String user, String password,
                                                   Consumer<HikariConfig> poolSettings) throws SQLException {
        if (nodeUrls.isEmpty()) {
            throw new IllegalArgumentException("give at least one node's URL");
        }
        return new ShardRoutingDataSource(null, nodeUrls, user, password, poolSettings);
    }

    private ShardRoutingDataSource(String routerUrl, List<String> nodeUrls, String user, String password,
                                   Consumer<HikariConfig> poolSettings) throws SQLException {
        this.routerUrl = routerUrl;
        this.nodeUrls = List.copyOf(nodeUrls);
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
        ShardMap fresh = read();
        if (fresh == null) {
            return;   // the nodes have no newer map than this one
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

    /**
     * The newest map to be had, or null if none is newer than the one held: the router's while
     * it answers; else the highest version among the nodes' copies (those given, and those of
     * the map held), a node down or without a map skipped.
     */
    private ShardMap read() throws SQLException {
        SQLException failure = null;
        if (routerUrl != null) {
            try (Connection router = DriverManager.getConnection(routerUrl, user, password)) {
                return ShardMap.load(router);
            } catch (SQLException e) {
                if (map == null || e.getSQLState() == null || !e.getSQLState().startsWith("08")) {
                    throw e;   // no map yet to name the nodes, or not a connection failure
                }
                failure = e;
            }
        }
        Map<String, Properties> urls = new LinkedHashMap<>();
        for (String url : nodeUrls) {
            urls.put(url, credentials(new Properties()));
        }
        if (map != null) {
            map.nodes().values().forEach(connstr -> {
                Connstr c = new Connstr(connstr);
                Properties props = new Properties();
                props.putAll(c.props);
                urls.putIfAbsent(c.url, credentials(props));
            });
        }
        ShardMap best = null;
        for (Map.Entry<String, Properties> url : urls.entrySet()) {
            try (Connection node = DriverManager.getConnection(url.getKey(), url.getValue())) {
                ShardMap got = ShardMap.loadFromNode(node);
                if (got != null && (best == null || got.version() > best.version())) {
                    best = got;
                }
            } catch (SQLException e) {   // a node down: the others answer
                failure = failure == null ? e : failure;
            }
        }
        if (best == null && map == null) {
            throw new SQLException("no node gave a shard map", "08001", failure);
        }
        return best != null && (map == null || best.version() > map.version()) ? best : null;
    }

    private Properties credentials(Properties props) {
        props.setProperty("user", user);
        if (password != null) {
            props.setProperty("password", password);
        }
        return props;
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
