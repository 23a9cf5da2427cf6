package org.snowflakeid.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.snowflakeid.routing.ShardRouter;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * Four writers through the example app while the router moves their shards: move_shards,
 * then drain_node (SF_DRAIN, if given), then rebalance. Each writer inserts on random shards,
 * edits and reads back its own earlier posts; any error that reaches it fails the test (the
 * router must absorb SF001 and 40001). Each acknowledged write is logged in
 * reliability/router_client.py's format, for reliability/router_check.py (every acknowledged
 * write present once, on the node the map names, with its last body; no ID twice).
 */
@SpringBootTest(properties = "spring.jpa.properties.hibernate.generate_statistics=true")  // RoutingTest's context
class MovesTest {
    static final int WRITERS = 4;
    @Autowired
    Posts posts;
    @Autowired
    ShardRouter router;

    final AtomicBoolean stop = new AtomicBoolean();
    final ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
    final Map<Long, String> lastBody = new java.util.concurrent.ConcurrentHashMap<>();
    final Path logs = Path.of(Cluster.env("SF_LOG_DIR", "target"));

    @Test
    void everyAcknowledgedWriteSurvivesTheMoves() throws Exception {
        int base = Integer.parseInt(Cluster.env("SF_CLIENT_BASE", "0"));
        long start = System.nanoTime();
        List<Thread> writers = new ArrayList<>();
        for (int c = 1; c <= WRITERS; c++) {
            int client = base + c;
            Thread w = new Thread(() -> write(client));
            w.start();
            writers.add(w);
        }
        try (Connection admin = Cluster.admin(); Statement st = admin.createStatement()) {
            Thread.sleep(2000);
            moveTwoShards(admin);
            String drain = Cluster.env("SF_DRAIN", "");
            if (!drain.isEmpty()) {
                Thread.sleep(1000);
                st.execute("CALL drain_node('" + drain + "')");
            }
            Thread.sleep(1000);
            st.execute("CALL rebalance()");
            Thread.sleep(2000);
        } finally {
            stop.set(true);
            for (Thread w : writers) {
                w.join();
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        assertTrue(failures.isEmpty(), "errors reached the writers: " + failures);
        // every acknowledged write is read back by ID, on the node the map now names
        int read = 0;
        for (Map.Entry<Long, String> e : lastBody.entrySet()) {
            assertEquals(e.getValue(), posts.get(e.getKey()).map(Post::getBody).orElse("(missing)"), "post " + e.getKey());
            read++;
        }
        System.out.printf("moves: %d posts written by %d writers in %.1f s and read back; units of work run again: "
                + "%d after SF001 (moved), %d after 40001/40P01%n", read, WRITERS, seconds,
                router.movedRetries.sum(), router.conflictRetries.sum());
        assertTrue(router.movedRetries.sum() > 0, "no SF001 was met: the moves were not seen by the writers");
    }

    /** Two shards the writers use, from the node that has most of them to the one with fewest. */
    private void moveTwoShards(Connection admin) throws Exception {
        try (PreparedStatement st = admin.prepareStatement("""
                WITH m AS (SELECT shard, node FROM shard_map WHERE shard = ANY (?)),
                     busiest AS (SELECT node FROM m GROUP BY node ORDER BY count(*) DESC, node LIMIT 1)
                SELECT (SELECT array_agg(shard) FROM (SELECT shard FROM m WHERE node = (SELECT node FROM busiest)
                                                       ORDER BY shard LIMIT 2) x),
                       (SELECT n.name FROM snowflake_id_router.node n
                         ORDER BY (SELECT count(*) FROM m WHERE m.node = n.name), n.name LIMIT 1)""")) {
            st.setArray(1, admin.createArrayOf("integer", Cluster.SHARDS.toArray()));
            ResultSet rs = st.executeQuery();
            rs.next();
            Integer[] shards = (Integer[]) rs.getArray(1).getArray();
            String to = rs.getString(2);
            double t0 = now();
            try (PreparedStatement move = admin.prepareStatement("SELECT move_shards(?, ?)")) {
                move.setArray(1, rs.getArray(1));
                move.setString(2, to);
                move.execute();
            }
            double t1 = now();
            StringBuilder moves = new StringBuilder();
            for (int s : shards) {
                moves.append(String.format("%d %.6f %.6f%n", s, t0, t1));
            }
            Files.writeString(logs.resolve("moves"), moves, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        }
    }

    /** One writer: until stopped, inserts (one post 50%, five in a batch 10%), edits (25%) or
     *  reads back (15%) its posts. */
    private void write(int client) {
        Random rng = new Random(client);
        List<Long> mine = new ArrayList<>();
        Map<Long, String> mineBody = new HashMap<>();
        try (PrintWriter log = new PrintWriter(Files.newBufferedWriter(logs.resolve("client" + client + ".log")))) {
            for (int n = 1; !stop.get(); n++) {
                String body = "c" + client + "n" + n;
                double t0 = now();
                double pick = rng.nextDouble();
                if (pick < 0.10) {   // five posts in one transaction, IDs from a block (@ShardId)
                    int shard = Cluster.SHARDS.get(rng.nextInt(Cluster.SHARDS.size()));
                    List<String> bodies = List.of(body + "a", body + "b", body + "c", body + "d", body + "e");
                    List<BatchPost> saved = posts.createBatched(shard, client, bodies);
                    double t1 = now();
                    for (BatchPost p : saved) {
                        log.printf("I %d %d %s %.6f %.6f 1%n", p.getId(), shard, p.getBody(), t0, t1);
                        mine.add(p.getId());
                        mineBody.put(p.getId(), p.getBody());
                    }
                } else if (mine.isEmpty() || pick < 0.60) {
                    int shard = Cluster.SHARDS.get(rng.nextInt(Cluster.SHARDS.size()));
                    long id = posts.create(shard, client, body).getId();
                    log.printf("I %d %d %s %.6f %.6f 1%n", id, shard, body, t0, now());
                    mine.add(id);
                    mineBody.put(id, body);
                } else if (pick < 0.85) {
                    long id = mine.get(rng.nextInt(mine.size()));
                    if (!posts.edit(id, body)) {
                        throw new IllegalStateException("edit of post " + id + " found no row");
                    }
                    log.printf("U %d - %s %.6f %.6f 1%n", id, body, t0, now());
                    mineBody.put(id, body);
                } else {
                    long id = mine.get(rng.nextInt(mine.size()));
                    String got = posts.get(id).map(Post::getBody).orElse("(missing)");
                    if (!got.equals(mineBody.get(id))) {
                        throw new IllegalStateException("post " + id + " read " + got + ", wrote " + mineBody.get(id));
                    }
                }
                log.flush();
            }
        } catch (IOException | RuntimeException e) {
            failures.add("client " + client + ": " + RoutingTest.messages(e));
            stop.set(true);
        } finally {
            lastBody.putAll(mineBody);
        }
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }
}
