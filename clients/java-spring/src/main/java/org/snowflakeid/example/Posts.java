package org.snowflakeid.example;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import org.snowflakeid.routing.ShardRouter;
import org.springframework.stereotype.Component;

/**
 * What the application calls: each call is a unit of work on one shard (a new post on the
 * shard its caller chose, e.g. its user's; a post by ID on the ID's shard), run again by the
 * router when the shard moved; the feed reads every shard.
 */
@Component
public class Posts {
    private final ShardRouter router;
    private final PostService service;

    public Posts(ShardRouter router, PostService service) {
        this.router = router;
        this.service = service;
    }

    public Post create(int shard, long userId, String body) {
        return router.onShard(shard, () -> service.create(userId, body));
    }

    /** Many posts of a user in one transaction. */
    public List<Post> createAll(int shard, long userId, List<String> bodies) {
        return router.onShard(shard, () -> service.createAll(bodies.stream().map(b -> new Post(userId, b)).toList()));
    }

    /** Many posts of a user in one transaction, their INSERTs batched (IDs taken in blocks). */
    public List<BatchPost> createBatched(int shard, long userId, List<String> bodies) {
        return router.onShard(shard,
                () -> service.createBatched(bodies.stream().map(b -> new BatchPost(userId, b)).toList()));
    }

    public boolean edit(long id, String body) {
        return router.byId(id, () -> service.edit(id, body));
    }

    public Optional<Post> get(long id) {
        return router.byId(id, () -> service.get(id));
    }

    /** One post of a feed (read by SQL: a fan-out is no JPA query). */
    public record FeedPost(long id, long userId, String body) {
    }

    /** The newest posts of a user over all shards, newest first. */
    public List<FeedPost> feed(long userId, int limit) {
        List<FeedPost> all = router.fanOut(
                "SELECT id, user_id, body FROM posts WHERE user_id = ? ORDER BY id DESC LIMIT ?",
                (rs, n) -> new FeedPost(rs.getLong(1), rs.getLong(2), rs.getString(3)),
                FeedPost::id, userId, limit);
        List<FeedPost> newest = new ArrayList<>(all.subList(Math.max(0, all.size() - limit), all.size()));
        Collections.reverse(newest);
        return newest;
    }
}
