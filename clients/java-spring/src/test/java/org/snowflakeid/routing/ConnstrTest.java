package org.snowflakeid.routing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** Nodes' libpq connect strings as pgjdbc URLs (no server needed). */
class ConnstrTest {
    @Test
    void keywordsBecomeUrlAndProperties() {
        Connstr c = new Connstr("host=10.0.0.5 port=5433 dbname='my db' sslmode=require connect_timeout=5");
        assertEquals("jdbc:postgresql://10.0.0.5:5433/my%20db", c.url);
        assertEquals("require", c.props.getProperty("sslmode"));
        assertEquals("5", c.props.getProperty("connectTimeout"));
    }

    @Test
    void quotedValuesAndSeveralHosts() {
        assertEquals("it's", Connstr.parse("application_name = 'it\\'s'").get("application_name"));
        assertEquals("jdbc:postgresql://a:1,b:2,[::1]:3/postgres",
                new Connstr("host=a,b,::1 port=1,2,3 dbname=postgres").url);
        assertEquals("jdbc:postgresql://a:7,b:7/", new Connstr("host=a,b port=7").url);
    }

    @Test
    void unixSocketsAndBadStringsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new Connstr("host=/tmp port=5432"));
        assertThrows(IllegalArgumentException.class, () -> new Connstr("port=5432"));
        assertThrows(IllegalArgumentException.class, () -> new Connstr("host='unterminated"));
        assertThrows(IllegalArgumentException.class, () -> new Connstr("hostonly"));
    }

    @Test
    void shardOfAnId() {
        assertEquals(3, ShardMap.shardOf((123456789L << 23) | (3 << 10) | 17));
        assertEquals(8191, ShardMap.shardOf(-1L));
    }
}
