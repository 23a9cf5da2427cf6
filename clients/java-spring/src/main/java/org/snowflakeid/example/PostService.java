package org.snowflakeid.example;

import java.util.List;
import java.util.Optional;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * The application's transactions, written as for one database: each runs on the shard that
 * its caller bound ({@link Posts}), in the shard's schema.
 */
@Service
public class PostService {
    private final PostRepository posts;
    private final BatchPostRepository batchPosts;

    public PostService(PostRepository posts, BatchPostRepository batchPosts) {
        this.posts = posts;
        this.batchPosts = batchPosts;
    }

    @Transactional
    public Post create(long userId, String body) {
        return posts.save(new Post(userId, body));
    }

    @Transactional
    public List<Post> createAll(List<Post> many) {
        return posts.saveAll(many);
    }

    /** Many posts whose IDs Hibernate takes a block at a time: the INSERTs go in batches. */
    @Transactional
    public List<BatchPost> createBatched(List<BatchPost> many) {
        return batchPosts.saveAll(many);
    }

    @Transactional
    public boolean edit(long id, String body) {
        Optional<Post> post = posts.findById(id);
        post.ifPresent(p -> p.edit(body));
        return post.isPresent();
    }

    @Transactional(readOnly = true)
    public Optional<Post> get(long id) {
        return posts.findById(id);
    }
}
