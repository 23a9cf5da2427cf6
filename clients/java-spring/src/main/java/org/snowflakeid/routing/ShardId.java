package org.snowflakeid.routing;

import static java.lang.annotation.ElementType.FIELD;
import static java.lang.annotation.ElementType.METHOD;
import static java.lang.annotation.RetentionPolicy.RUNTIME;

import java.lang.annotation.Retention;
import java.lang.annotation.Target;
import org.hibernate.annotations.IdGeneratorType;

/**
 * An entity's ID taken from its shard's {@code next_id()} a block at a time
 * ({@link ShardIdGenerator}): Hibernate knows the ID before the INSERT, so it batches them, as
 * it cannot with {@code IDENTITY}.
 */
@IdGeneratorType(ShardIdGenerator.class)
@Retention(RUNTIME)
@Target({FIELD, METHOD})
public @interface ShardId {
    /** IDs taken per round trip. */
    int blockSize() default 50;
}
