package org.snowflakeid.example;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.GeneratedValue;
import jakarta.persistence.GenerationType;
import jakarta.persistence.Id;
import jakarta.persistence.Table;

/** A post in its shard's posts table (unqualified: use_shard puts the shard's schema first). */
@Entity
@Table(name = "posts")
public class Post {
    /** Made by the column's default, the shard's own next_id(): Hibernate reads it back with
     *  INSERT ... RETURNING, so the ID carries the shard it was written to. */
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    private Long id;

    @Column(name = "user_id", nullable = false)
    private long userId;

    @Column(nullable = false)
    private String body;

    @Column(nullable = false)
    private int edits;

    protected Post() {
    }

    public Post(long userId, String body) {
        this.userId = userId;
        this.body = body;
    }

    public Long getId() {
        return id;
    }

    public long getUserId() {
        return userId;
    }

    public String getBody() {
        return body;
    }

    public int getEdits() {
        return edits;
    }

    public void edit(String body) {
        this.body = body;
        this.edits++;
    }
}
