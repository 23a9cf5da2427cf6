package org.snowflakeid.routing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.EnumSet;
import java.util.Map;
import java.util.WeakHashMap;
import org.hibernate.JDBCException;
import org.hibernate.engine.spi.SharedSessionContractImplementor;
import org.hibernate.generator.BeforeExecutionGenerator;
import org.hibernate.generator.EventType;
import org.hibernate.generator.EventTypeSets;

/**
 * {@link ShardId}'s generator: IDs from the bound shard's own {@code next_id()} (the function
 * create_shard makes in each shard's schema, found through use_shard's search_path), taken
 * {@code blockSize} at a time in the session's transaction. A block serves one session and
 * one shard: an ID is never used on another shard than its own, nor kept past its session.
 */
public class ShardIdGenerator implements BeforeExecutionGenerator {
    private final int blockSize;
    private final Map<Object, Block> blocks = Collections.synchronizedMap(new WeakHashMap<>());  // by session

    private record Block(int shard, ArrayDeque<Long> ids) {
    }

    public ShardIdGenerator(ShardId config) {
        this.blockSize = config.blockSize();
    }

    @Override
    public Object generate(SharedSessionContractImplementor session, Object owner, Object currentValue,
                           EventType eventType) {
        Integer shard = ShardContext.current();
        if (shard == null) {
            throw new IllegalStateException("no shard bound to this thread: run the work through ShardRouter.onShard");
        }
        Block block = blocks.get(session);
        if (block == null || block.shard() != shard || block.ids().isEmpty()) {
            block = new Block(shard, take(session));
            blocks.put(session, block);
        }
        return block.ids().poll();
    }

    private ArrayDeque<Long> take(SharedSessionContractImplementor session) {
        String sql = "SELECT next_id() FROM generate_series(1, ?)";
        Connection c = session.getJdbcCoordinator().getLogicalConnection().getPhysicalConnection();
        try (PreparedStatement st = c.prepareStatement(sql)) {
            st.setInt(1, blockSize);
            ArrayDeque<Long> ids = new ArrayDeque<>(blockSize);
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                    ids.add(rs.getLong(1));
                }
            }
            return ids;
        } catch (SQLException e) {
            throw new JDBCException("taking a block of IDs from the shard", e, sql);
        }
    }

    @Override
    public EnumSet<EventType> getEventTypes() {
        return EventTypeSets.INSERT_ONLY;
    }
}
