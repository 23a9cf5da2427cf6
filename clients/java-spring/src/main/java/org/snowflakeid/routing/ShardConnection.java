package org.snowflakeid.routing;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;

/**
 * A node's connection bound to one shard. Before the first statement of each transaction it
 * runs {@code SELECT use_shard(shard)}: the node checks that it serves the shard (SQLSTATE
 * SF001 if not: the shard moved) and puts the shard's schema first on search_path for that
 * transaction only, so the application's unqualified SQL reaches the shard's tables.
 *
 * <p>Why here, and lazily: whatever begins the transaction (Spring's JPA or JDBC transaction
 * manager, Hibernate, plain JDBC), its statements are made by this connection, so the check
 * cannot be skipped and costs no round trip of its own (pgjdbc sends BEGIN with it). Statements
 * outside a transaction are refused: use_shard's setting would end with the statement that
 * made it, and the application's next statement would run on no shard.
 */
final class ShardConnection implements InvocationHandler {
    private final Connection target;
    private final int shard;
    private boolean bound;  // use_shard ran in the transaction open now

    private ShardConnection(Connection target, int shard) {
        this.target = target;
        this.shard = shard;
    }

    static Connection wrap(Connection target, int shard) {
        return (Connection) Proxy.newProxyInstance(ShardConnection.class.getClassLoader(),
                new Class<?>[] {Connection.class}, new ShardConnection(target, shard));
    }

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
        switch (method.getName()) {
            case "createStatement", "prepareStatement", "prepareCall" -> bindShard();
            // the transaction ends (rollback to a savepoint keeps use_shard's setting)
            case "commit", "setAutoCommit" -> bound = false;
            case "rollback" -> bound = bound && args != null;
            default -> { }
        }
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    private void bindShard() throws SQLException {
        if (bound) {
            return;
        }
        if (target.getAutoCommit()) {
            throw new SQLException("a statement on shard " + shard + " outside a transaction: "
                    + "run the shard's work in a transaction (@Transactional)", "25000");
        }
        try (PreparedStatement st = target.prepareStatement("SELECT use_shard(?)")) {
            st.setInt(1, shard);
            st.execute();
        }
        bound = true;
    }
}
