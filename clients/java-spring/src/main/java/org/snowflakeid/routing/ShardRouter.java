package org.snowflakeid.routing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;
import org.springframework.jdbc.UncategorizedSQLException;
import org.springframework.jdbc.core.RowMapper;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Units of work on one shard: {@link #onShard} binds the shard to the thread for the work (a
 * {@code @Transactional} method, a TransactionTemplate...), which the routing DataSource sends
 * to the shard's node. When a node answers SF001 (the shard is not served there: it moved) the
 * map is read again and the work runs again on the new node; on 40001 (a shard in its fenced
 * moment, a serialization failure) and 40P01 (a deadlock) it runs again after a pause that
 * doubles each time. These errors roll the whole transaction back, so running the work again
 * never writes twice; every other error reaches the caller at once.
 */
public class ShardRouter {
    private final ShardRoutingDataSource dataSource;
    private final int maxAttempts;
    private final long firstPauseMillis;
    private final long maxPauseMillis;
    /** Units of work run again because a node answered SF001 (moved) or 40001/40P01. */
    public final LongAdder movedRetries = new LongAdder(), conflictRetries = new LongAdder();
    private volatile Set<Integer> lastListed = Set.of();  // the shards with tables at the last fan-out

    /** Up to 12 attempts, pauses from 5 ms doubling to at most 1 s (about 5 s in all). */
    public ShardRouter(ShardRoutingDataSource dataSource) {
        this(dataSource, 12, 5, 1000);
    }

    public ShardRouter(ShardRoutingDataSource dataSource, int maxAttempts, long firstPauseMillis, long maxPauseMillis) {
        this.dataSource = dataSource;
        this.maxAttempts = maxAttempts;
        this.firstPauseMillis = firstPauseMillis;
        this.maxPauseMillis = maxPauseMillis;
    }

    /** Runs work on the shard of an ID. */
    public <T> T byId(long id, Supplier<T> work) {
        return onShard(ShardMap.shardOf(id), work);
    }

    /**
     * Runs work on a shard: the work begins and ends its own transaction(s), so that a retry
     * starts afresh. Called inside a transaction, it refuses: that transaction has its
     * connection (and node) already, and could not be run again.
     */
    public <T> T onShard(int shard, Supplier<T> work) {
        if (TransactionSynchronizationManager.isActualTransactionActive()) {
            throw new IllegalStateException("onShard(" + shard + ") inside a transaction: the unit of work "
                    + "on a shard begins its own transaction, call onShard outside of it");
        }
        Integer outer = ShardContext.bind(shard);
        try {
            for (int attempt = 1; ; attempt++) {
                ShardMap seen = dataSource.map();
                try {
                    return work.get();
                } catch (RuntimeException e) {
                    String state = sqlState(e);
                    boolean moved = "SF001".equals(state);
                    if (!(moved || "40001".equals(state) || "40P01".equals(state)) || attempt == maxAttempts) {
                        throw e;
                    }
                    (moved ? movedRetries : conflictRetries).increment();
                    if (moved || attempt >= 3) {   // a fence that lasts: the shard may have moved
                        reload(seen);
                    }
                    if (!moved || attempt > 1) {   // a moved shard's new node is ready at once
                        pause(attempt);
                    }
                }
            }
        } finally {
            ShardContext.restore(outer);
        }
    }

    /**
     * Runs a query on every shard that holds tables (those the nodes list, each node's in turn,
     * one transaction per shard: the query's unqualified names are the shard's) and merges the
     * rows in ID order; a row met twice (its shard moving while the nodes are read) is kept
     * once. A shard is run where the map names it, and followed (SF001) where it moved.
     */
    public <T> List<T> fanOut(String sql, RowMapper<T> rows, ToLongFunction<T> idOf, Object... args) {
        ShardMap map = dataSource.map();
        List<Integer> byNode = new ArrayList<>(shardsWithTables(map));
        byNode.sort(Comparator.comparing(shard -> String.valueOf(map.nodeOrNull(shard))));
        TreeMap<Long, T> merged = new TreeMap<>();
        for (int shard : byNode) {
            if (map.nodeOrNull(shard) != null) {
                for (T row : onShard(shard, () -> query(sql, rows, args))) {
                    merged.put(idOf.applyAsLong(row), row);
                }
            }
        }
        return new ArrayList<>(merged.values());
    }

    /**
     * The shards the nodes list (snowflake_id_shards), whichever node the map names: a client's
     * map may be behind a move. A shard in a move's cutover (sealed on its source, not yet live
     * on its target) is listed by no node for a moment: while one listed last time is missing,
     * the nodes are asked again (8 times at most: a dropped shard is missing for good).
     */
    private Set<Integer> shardsWithTables(ShardMap map) {
        Set<Integer> listed = new TreeSet<>();
        for (int attempt = 1; attempt <= 8; attempt++) {
            listed.clear();
            for (String node : map.nodes().keySet()) {
                listed.addAll(servedShards(node));
            }
            if (listed.containsAll(lastListed)) {
                break;
            }
            pause(attempt);
        }
        lastListed = Set.copyOf(listed);
        return listed;
    }

    private List<Integer> servedShards(String node) {
        List<Integer> shards = new ArrayList<>();
        try (Connection c = dataSource.pool(node).getConnection();
             PreparedStatement st = c.prepareStatement("SELECT shard FROM snowflake_id_shards");
             ResultSet rs = st.executeQuery()) {
            while (rs.next()) {
                shards.add(rs.getInt(1));
            }
        } catch (SQLException e) {
            throw new UncategorizedSQLException("listing the shards of node " + node, null, e);
        }
        return shards;
    }

    /** One query in a transaction of its own on the bound shard. */
    private <T> List<T> query(String sql, RowMapper<T> rows, Object[] args) {
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try (PreparedStatement st = c.prepareStatement(sql)) {
                for (int i = 0; i < args.length; i++) {
                    st.setObject(i + 1, args[i]);
                }
                List<T> out = new ArrayList<>();
                try (ResultSet rs = st.executeQuery()) {
                    while (rs.next()) {
                        out.add(rows.mapRow(rs, out.size()));
                    }
                }
                c.commit();
                return out;
            } finally {
                c.rollback();  // nothing after a commit; after a failure, the transaction's end
            }
        } catch (SQLException e) {
            throw new UncategorizedSQLException("fan-out query", sql, e);
        }
    }

    private void reload(ShardMap seen) {
        try {
            dataSource.reload(seen);
        } catch (SQLException e) {
            throw new UncategorizedSQLException("reloading the shard map", null, e);
        }
    }

    private void pause(int attempt) {
        long cap = Math.min(maxPauseMillis, firstPauseMillis << Math.min(attempt - 1, 20));
        try {
            Thread.sleep(cap / 2 + ThreadLocalRandom.current().nextLong(cap / 2 + 1));  // jitter
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting to retry", e);
        }
    }

    /** The SQLSTATE of the first SQLException among an exception's causes. */
    static String sqlState(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException s && s.getSQLState() != null) {
                return s.getSQLState();
            }
        }
        return null;
    }
}
