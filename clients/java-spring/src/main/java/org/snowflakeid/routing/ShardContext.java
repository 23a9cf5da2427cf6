package org.snowflakeid.routing;

/**
 * The shard the current thread works on, bound by {@link ShardRouter} for one unit of work and
 * read by {@link ShardRoutingDataSource} when a transaction takes its connection.
 */
final class ShardContext {
    private static final ThreadLocal<Integer> CURRENT = new ThreadLocal<>();

    private ShardContext() {
    }

    static Integer current() {
        return CURRENT.get();
    }

    /** Binds a shard; returns the one bound before (to give back to {@link #restore}). */
    static Integer bind(int shard) {
        Integer before = CURRENT.get();
        CURRENT.set(shard);
        return before;
    }

    static void restore(Integer before) {
        if (before == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(before);
        }
    }
}
