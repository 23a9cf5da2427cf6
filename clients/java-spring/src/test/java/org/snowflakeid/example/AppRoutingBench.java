package org.snowflakeid.example;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.snowflakeid.routing.ShardMap;
import org.snowflakeid.routing.ShardRouter;
import org.snowflakeid.routing.ShardRoutingDataSource;

/**
 * Not a test: the Java part of bench/app_routing.sh (run only when SF_BENCH_OUT names its
 * output). A single-row insert on a random one of node_a's first 16 shards and a read by ID,
 * the same statements each way: pgjdbc straight to the node (HikariCP pool, schema-qualified)
 * in autocommit and in a transaction; the routing DataSource under ShardRouter.onShard (a
 * transaction that ShardConnection begins with use_shard, unqualified names); pgjdbc through
 * the router (insert_post / get_post, PL/Proxy). Latency of one thread (median, p99) over
 * interleaved rounds, then the throughput of 4 threads.
 */
class AppRoutingBench {
    interface Op {
        long run(long arg) throws SQLException;
    }

    record Variant(Op insert, Op read) {
    }

    static final String INSERT = "INSERT INTO %sposts (user_id, body) VALUES (1, 'bench') RETURNING id";
    static final String READ = "SELECT id, user_id, body, edits FROM %sposts WHERE id = ?";

    static long one(DataSource ds, boolean tx, String sql, Long param) throws SQLException {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(!tx);
            long v;
            try (PreparedStatement st = c.prepareStatement(sql)) {
                if (param != null) {
                    st.setLong(1, param);
                }
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    v = rs.getLong(1);
                }
            }
            if (tx) {
                c.commit();
            }
            return v;
        }
    }

    static String schema(long shard) {
        return "shard_" + shard + ".";
    }

    @Test
    void bench() throws Exception {
        String out = System.getenv("SF_BENCH_OUT");
        assumeTrue(out != null && !out.isEmpty(), "a benchmark: run by bench/app_routing.sh");
        int n = Integer.parseInt(Cluster.env("SF_BENCH_N", "1000"));
        int rounds = Integer.parseInt(Cluster.env("ROUNDS", "3"));
        double secs = Double.parseDouble(Cluster.env("SF_BENCH_SECS", "3"));
        String user = Cluster.env("SF_USER", "postgres");
        HikariConfig nodeCfg = new HikariConfig();
        nodeCfg.setJdbcUrl(Cluster.env("SF_NODE_URL", "jdbc:postgresql://127.0.0.1:5433/postgres"));
        nodeCfg.setUsername(user);
        nodeCfg.setMaximumPoolSize(4);
        HikariConfig routerCfg = new HikariConfig();
        routerCfg.setJdbcUrl(Cluster.env("SF_ROUTER_URL", "jdbc:postgresql://127.0.0.1:5432/postgres"));
        routerCfg.setUsername(user);
        routerCfg.setMaximumPoolSize(4);
        try (HikariDataSource node = new HikariDataSource(nodeCfg);
             HikariDataSource router = new HikariDataSource(routerCfg);
             ShardRoutingDataSource routed = new ShardRoutingDataSource(routerCfg.getJdbcUrl(), user, null,
                     pool -> pool.setMaximumPoolSize(4))) {
            ShardRouter shards = new ShardRouter(routed);
            Map<String, Variant> variants = new LinkedHashMap<>();
            variants.put("pgjdbc direct", new Variant(
                    s -> one(node, false, INSERT.formatted(schema(s)), null),
                    id -> one(node, false, READ.formatted(schema(ShardMap.shardOf(id))), id)));
            variants.put("pgjdbc direct tx", new Variant(
                    s -> one(node, true, INSERT.formatted(schema(s)), null),
                    id -> one(node, true, READ.formatted(schema(ShardMap.shardOf(id))), id)));
            variants.put("Spring routing DataSource", new Variant(
                    s -> shards.onShard((int) s, () -> unchecked(() -> one(routed, true, INSERT.formatted(""), null))),
                    id -> shards.byId(id, () -> unchecked(() -> one(routed, true, READ.formatted(""), id)))));
            variants.put("pgjdbc via router", new Variant(
                    s -> one(router, false, "SELECT insert_post(" + s + ", 1, 'bench')", null),
                    id -> one(router, false, "SELECT id FROM get_post(?)", id)));
            Random rng = new Random(1);
            long[] ids = new long[2000];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = variants.get("pgjdbc direct").insert().run(rng.nextInt(16));
            }
            for (Variant v : variants.values()) {   // warm-up: classes loaded, pools filled, plans cached
                for (int i = 0; i < 200; i++) {
                    v.insert().run(rng.nextInt(16));
                    v.read().run(ids[rng.nextInt(ids.length)]);
                }
            }
            Map<String, List<Double>> lat = new LinkedHashMap<>(), tps = new LinkedHashMap<>();
            for (int r = 0; r < rounds; r++) {
                for (var e : variants.entrySet()) {
                    for (String op : List.of("insert", "read")) {
                        List<Double> l = lat.computeIfAbsent(e.getKey() + "/" + op, k -> new ArrayList<>());
                        for (int i = 0; i < n; i++) {
                            long arg = op.equals("insert") ? rng.nextInt(16) : ids[rng.nextInt(ids.length)];
                            long t0 = System.nanoTime();
                            (op.equals("insert") ? e.getValue().insert() : e.getValue().read()).run(arg);
                            l.add((System.nanoTime() - t0) / 1e6);
                        }
                    }
                }
                for (var e : variants.entrySet()) {
                    for (String op : List.of("insert", "read")) {
                        Op f = op.equals("insert") ? e.getValue().insert() : e.getValue().read();
                        tps.computeIfAbsent(e.getKey() + "/" + op, k -> new ArrayList<>())
                                .add(throughput(f, op.equals("insert"), ids, secs));
                    }
                }
            }
            try (PrintWriter w = new PrintWriter(out)) {
                w.println("{");
                int i = 0;
                for (String key : lat.keySet()) {
                    double[] l = lat.get(key).stream().mapToDouble(Double::doubleValue).sorted().toArray();
                    double[] t = tps.get(key).stream().mapToDouble(Double::doubleValue).sorted().toArray();
                    w.printf("  \"%s\": {\"latency_ms\": %.4f, \"p99_ms\": %.4f, \"tps_4\": %.1f, \"tps_rounds\": %s}%s%n",
                            key, l[l.length / 2], l[Math.min(l.length - 1, (int) (0.99 * l.length))], t[t.length / 2],
                            Arrays.toString(tps.get(key).stream().mapToLong(Math::round).toArray()),
                            ++i < lat.size() ? "," : "");
                }
                w.println("}");
            }
        }
    }

    /** Operations per second of 4 threads for secs seconds. */
    static double throughput(Op f, boolean insert, long[] ids, double secs) throws InterruptedException {
        AtomicBoolean stop = new AtomicBoolean();
        LongAdder done = new LongAdder();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            Thread thread = new Thread(() -> {
                ThreadLocalRandom r = ThreadLocalRandom.current();
                while (!stop.get()) {
                    try {
                        f.run(insert ? r.nextInt(16) : ids[r.nextInt(ids.length)]);
                    } catch (SQLException e) {
                        throw new RuntimeException(e);
                    }
                    done.increment();
                }
            });
            thread.start();
            threads.add(thread);
        }
        long t0 = System.nanoTime();
        Thread.sleep((long) (secs * 1000));
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        return done.sum() / ((System.nanoTime() - t0) / 1e9);
    }

    interface Body {
        long get() throws SQLException;
    }

    static long unchecked(Body b) {
        try {
            return b.get();
        } catch (SQLException e) {
            throw new RuntimeException(e);
        }
    }
}
