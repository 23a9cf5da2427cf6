package org.snowflakeid.example;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Arrays;
import java.util.List;

/** The cluster the tests run on, as reliability/t_app_java.sh describes it (environment). */
final class Cluster {
    /** The shards that hold tables (created by create_shard), to write to. */
    static final List<Integer> SHARDS = Arrays.stream(env("SF_SHARDS", "0,1,2").split(","))
            .map(Integer::valueOf).toList();

    private Cluster() {
    }

    static String env(String name, String otherwise) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? otherwise : v;
    }

    /** The router, as its superuser: for moves and for looking at the map. */
    static Connection admin() throws SQLException {
        return DriverManager.getConnection(env("SF_ROUTER_URL", "jdbc:postgresql://127.0.0.1:5432/postgres"),
                env("SF_ADMIN_USER", "postgres"), "");
    }
}
