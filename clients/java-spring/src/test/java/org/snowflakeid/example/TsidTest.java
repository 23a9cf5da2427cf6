package org.snowflakeid.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.f4b6a3.tsid.Tsid;
import com.github.f4b6a3.tsid.TsidFactory;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * TSIDs beside snowflake_id (docs/other-ids.md): IDs made by tsid-creator, the TSID
 * article's library, decode with the node's {@code tsid} layout. The time is the library's
 * own {@code getInstant()}, the text form its {@code toString()}, and the 22 bits below the
 * time ({@code node_counter}) split as the factory was built: its node in the top 10 bits, and
 * a counter that counts up by one between two TSIDs of one millisecond.
 */
class TsidTest {
    private static final int NODE = 613;

    @Test
    void tsidCreatorsIdsDecodeWithTheTsidLayout() throws Exception {
        TsidFactory factory = TsidFactory.builder().withNodeBits(10).withNode(NODE).build();
        List<Tsid> ids = new ArrayList<>();
        for (int i = 0; i < 5000; i++) {
            ids.add(factory.create());
        }
        int sameMillisecond = 0;
        try (Connection c = DriverManager.getConnection(Cluster.env("SF_NODE_URL", "jdbc:postgresql://127.0.0.1:5432/postgres"),
                Cluster.env("SF_ADMIN_USER", "postgres"), "");
             PreparedStatement st = c.prepareStatement(
                     "SELECT (d).ts, ((d).fields->>'node_counter')::bigint, id_to_text(id) "
                     + "FROM (SELECT id, id_decode(id, 'tsid') d FROM unnest(?::bigint[]) id) x")) {
            st.setArray(1, c.createArrayOf("bigint", ids.stream().map(Tsid::toLong).toArray()));
            try (ResultSet rs = st.executeQuery()) {
                long previous = -1;
                long previousMs = -1;
                for (Tsid id : ids) {
                    assertTrue(rs.next());
                    Instant ts = rs.getTimestamp(1).toInstant();
                    long nodeCounter = rs.getLong(2);
                    assertEquals(id.getInstant(), ts, "time of " + id);
                    assertEquals(id.toString(), rs.getString(3), "text form of " + id.toLong());
                    assertEquals(NODE, nodeCounter >> 12, "node of " + id);
                    if (id.getUnixMilliseconds() == previousMs) {
                        assertEquals((previous & 0xFFF) + 1, nodeCounter & 0xFFF, "counter of " + id);
                        sameMillisecond++;
                    }
                    previous = nodeCounter;
                    previousMs = id.getUnixMilliseconds();
                }
            }
        }
        assertTrue(sameMillisecond > 0, "no two TSIDs of one millisecond: the counter was not checked");
        System.out.println("tsid: " + ids.size() + " TSIDs of tsid-creator decoded, " + sameMillisecond + " counters checked");
    }
}
