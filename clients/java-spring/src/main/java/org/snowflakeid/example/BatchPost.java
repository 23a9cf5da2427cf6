package org.snowflakeid.example;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import org.snowflakeid.routing.ShardId;

/**
 * A post whose ID Hibernate takes before the INSERT, a block at a time from the shard's
 * next_id(), so that many inserts go in JDBC batches (the same table as {@link Post}).
 */
@Entity
@Table(name = "posts")
public class BatchPost {
    @Id
    @ShardId(blockSize = 50)
    private Long id;

    @Column(name = "user_id", nullable = false)
    private long userId;

    @Column(nullable = false)
    private String body;

    @Column(nullable = false)
    private int edits;

    protected BatchPost() {
    }

    public BatchPost(long userId, String body) {
        this.userId = userId;
        this.body = body;
    }

    public Long getId() {
        return id;
    }

    public String getBody() {
        return body;
    }
}
