package org.snowflakeid.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.persistence.EntityManagerFactory;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.hibernate.SessionFactory;
import org.hibernate.stat.Statistics;
import org.junit.jupiter.api.Test;
import org.snowflakeid.routing.ShardMap;
import org.snowflakeid.routing.ShardRouter;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.jdbc.core.JdbcTemplate;

/** The routing client's rules, one at a time, on a router and three nodes. */
@SpringBootTest(properties = "spring.jpa.properties.hibernate.generate_statistics=true")
class RoutingTest {
    @Autowired
    Posts posts;
    @Autowired
    PostService service;
    @Autowired
    ShardRouter router;
    @Autowired
    JdbcTemplate jdbc;
    @Autowired
    EntityManagerFactory emf;

    @Test
    void writesReadsAndEditsByIdOnTheIdsShard() {
        int shard = Cluster.SHARDS.get(0);
        Post p = posts.create(shard, 7, "first");
        assertEquals(shard, ShardMap.shardOf(p.getId()), "the ID of a post written on shard " + shard);
        assertEquals("first", posts.get(p.getId()).orElseThrow().getBody());
        assertTrue(posts.edit(p.getId(), "edited"));
        Post read = posts.get(p.getId()).orElseThrow();
        assertEquals("edited", read.getBody());
        assertEquals(1, read.getEdits());
    }

    /** Hibernate reads each IDENTITY key from its own INSERT (RETURNING), not lastval(): 2,000
     *  posts in one transaction each get the ID of their own row. */
    @Test
    void manyPostsInOneTransactionEachGetTheirOwnRowsId() {
        int shard = Cluster.SHARDS.get(2);
        long user = System.nanoTime();
        Statistics stats = emf.unwrap(SessionFactory.class).getStatistics();
        stats.clear();
        List<Post> saved = posts.createAll(shard, user, IntStream.range(0, 2000).mapToObj(i -> "bulk " + i).toList());
        System.out.printf("IDENTITY: 2000 posts inserted with %d statements prepared by Hibernate%n",
                stats.getPrepareStatementCount());
        Map<Long, String> rows = new HashMap<>();
        posts.feed(user, 5000).forEach(p -> rows.put(p.id(), p.body()));
        assertEquals(2000, rows.size());
        for (Post p : saved) {
            assertEquals(p.getBody(), rows.get(p.getId()), "the row of post " + p.getId());
            assertEquals(shard, ShardMap.shardOf(p.getId()));
        }
    }

    /** IDs taken a block at a time (@ShardId): Hibernate batches the INSERTs, 2,000 posts by
     *  one statement prepared once and run in batches (Hibernate's count of statements
     *  prepared; IDENTITY prepares one per row: manyPostsInOneTransaction...), each ID of the
     *  shard's and of its own row. */
    @Test
    void idsTakenInBlocksKeepJdbcBatching() {
        int shard = Cluster.SHARDS.get(4);
        long user = System.nanoTime();
        Statistics stats = emf.unwrap(SessionFactory.class).getStatistics();
        stats.clear();
        List<BatchPost> saved = posts.createBatched(shard, user,
                IntStream.range(0, 2000).mapToObj(i -> "batched " + i).toList());
        long statements = stats.getPrepareStatementCount();
        System.out.printf("batching: 2000 posts inserted with %d statements prepared by Hibernate%n", statements);
        assertTrue(statements <= 2, statements + " statements for 2000 inserts: not batched");
        Map<Long, String> rows = new HashMap<>();
        posts.feed(user, 5000).forEach(p -> rows.put(p.id(), p.body()));
        assertEquals(2000, rows.size());
        for (BatchPost p : saved) {
            assertEquals(p.getBody(), rows.get(p.getId()), "the row of post " + p.getId());
            assertEquals(shard, ShardMap.shardOf(p.getId()));
        }
    }

    @Test
    void workOnNoShardIsRefused() {
        Exception e = assertThrows(Exception.class, () -> service.get(1L));
        assertTrue(messages(e).contains("no shard bound to this thread"), messages(e));
    }

    @Test
    void statementsOutsideATransactionAreRefused() {
        int shard = Cluster.SHARDS.get(0);
        Exception e = assertThrows(Exception.class,
                () -> router.onShard(shard, () -> jdbc.queryForObject("SELECT count(*) FROM posts", Long.class)));
        assertTrue(messages(e).contains("outside a transaction"), messages(e));
    }

    @Test
    void feedReadsEveryNodeInIdOrder() {
        long user = System.nanoTime();
        // one shard of each node (the list holds each node's shards in turn)
        int n = Cluster.SHARDS.size();
        for (int shard : List.of(Cluster.SHARDS.get(0), Cluster.SHARDS.get(n / 2), Cluster.SHARDS.get(n - 1))) {
            posts.create(shard, user, "on " + shard);
        }
        List<Posts.FeedPost> feed = posts.feed(user, 10);
        assertEquals(3, feed.size(), feed.toString());
        assertTrue(feed.get(0).id() > feed.get(1).id() && feed.get(1).id() > feed.get(2).id(), feed.toString());
        assertEquals(2, posts.feed(user, 2).size());
    }

    /** A shard moved behind the client's back: the old node answers SF001, the client reads
     *  the map again and finds the row on the new node. */
    @Test
    void aMovedShardIsFoundAfterReloadingTheMap() throws Exception {
        int shard = Cluster.SHARDS.get(1);
        Post p = posts.create(shard, 8, "before the move");
        long movedBefore = router.movedRetries.sum();
        try (Connection admin = Cluster.admin(); Statement st = admin.createStatement()) {
            ResultSet rs = st.executeQuery("SELECT node FROM shard_map WHERE shard = " + shard
                    + " UNION ALL SELECT min(name) FROM snowflake_id_router.node WHERE name <> "
                    + "(SELECT node FROM shard_map WHERE shard = " + shard + ")");
            rs.next();
            String from = rs.getString(1);
            rs.next();
            String to = rs.getString(1);
            st.execute("SELECT move_shard(" + shard + ", '" + to + "')");
            assertEquals("after the move", posts.edit(p.getId(), "after the move") ? "after the move" : "lost",
                    "the edit after moving shard " + shard + " from " + from + " to " + to);
        }
        assertEquals("after the move", posts.get(p.getId()).orElseThrow().getBody());
        assertTrue(router.movedRetries.sum() > movedBefore, "no SF001 was met: the move was not seen");
    }

    /** The feed reads a shard moved behind the client's back: listed by its new node, run
     *  where the stale map names it, followed there after SF001. */
    @Test
    void theFeedFindsAShardMovedBehindTheClientsBack() throws Exception {
        int shard = Cluster.SHARDS.get(3);
        long user = System.nanoTime();
        Post p = posts.create(shard, user, "moved with its shard");
        try (Connection admin = Cluster.admin(); Statement st = admin.createStatement()) {
            st.execute("SELECT move_shard(" + shard + ", (SELECT min(name) FROM snowflake_id_router.node "
                    + "WHERE name <> (SELECT node FROM shard_map WHERE shard = " + shard + ")))");
        }
        List<Posts.FeedPost> feed = posts.feed(user, 10);
        assertEquals(List.of(p.getId()), feed.stream().map(Posts.FeedPost::id).toList(), "the feed after the move");
    }

    static String messages(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            b.append(t.getMessage()).append(" / ");
        }
        return b.toString();
    }
}
