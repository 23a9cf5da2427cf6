package example;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;

/** Plain JDBC (pgjdbc): the column's default makes the ID, the INSERT hands it back. Each
 *  method takes the table's name from the application's own code (it is spliced into the SQL). */
public final class JdbcRecipe {
    private JdbcRecipe() {}

    public static final String DDL = """
        CREATE SEQUENCE jdbc_item_seq;
        CREATE TABLE jdbc_item (
            id   bigint PRIMARY KEY DEFAULT next_id(7, 'jdbc_item_seq'),
            body text NOT NULL UNIQUE);
        -- next_id(seq): the sequence carries its shard, set once
        CREATE SEQUENCE jdbc_order_seq;
        SELECT setval('jdbc_order_seq', make_id(now(), 8));
        CREATE TABLE jdbc_order (
            customer bigint NOT NULL DEFAULT 42,  -- the key need not come first
            id       bigint PRIMARY KEY DEFAULT next_id('jdbc_order_seq'),
            body     text NOT NULL UNIQUE)""";

    /** INSERT ... RETURNING id, read as a result set. */
    public static long insertReturning(Connection c, String table, String body) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO " + table + " (body) VALUES (?) RETURNING id")) {
            ps.setString(1, body);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /** getGeneratedKeys() naming the key column: pgjdbc appends RETURNING "id". */
    public static long insertGeneratedKey(Connection c, String table, String body) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO " + table + " (body) VALUES (?)", new String[] {"id"})) {
            ps.setString(1, body);
            ps.executeUpdate();
            try (ResultSet keys = ps.getGeneratedKeys()) {
                keys.next();
                return keys.getLong("id");
            }
        }
    }

    /** Statement.RETURN_GENERATED_KEYS: pgjdbc appends RETURNING *, so read the key by name. */
    public static long insertAnyGeneratedKeys(Connection c, String table, String body) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO " + table + " (body) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
            ps.setString(1, body);
            ps.executeUpdate();
            try (ResultSet keys = ps.getGeneratedKeys()) {
                keys.next();
                return keys.getLong("id");
            }
        }
    }

    /** A batch: getGeneratedKeys() holds one key per row, in the order the rows were added. */
    public static long[] insertBatch(Connection c, String table, List<String> bodies) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO " + table + " (body) VALUES (?)", new String[] {"id"})) {
            for (String body : bodies) {
                ps.setString(1, body);
                ps.addBatch();
            }
            ps.executeBatch();
            long[] ids = new long[bodies.size()];
            try (ResultSet keys = ps.getGeneratedKeys()) {
                for (int i = 0; i < ids.length && keys.next(); i++) {
                    ids[i] = keys.getLong("id");
                }
            }
            return ids;
        }
    }
}
