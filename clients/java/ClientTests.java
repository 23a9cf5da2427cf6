import caught.IdentityItem;
import caught.Note;
import caught.TenantItem;
import example.BulkItem;
import example.Item;
import example.JdbcRecipe;
import example.Line;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import javax.persistence.EntityManager;
import javax.persistence.EntityManagerFactory;
import javax.persistence.Persistence;

/** The Java recipes against a real server: JDBC_URL (jdbc:postgresql://127.0.0.1:port/db?user=u)
 *  from clients/run.sh. Prints "ok: ..." per check, and fails at the first check that does not hold. */
public final class ClientTests {
    static final String URL = System.getenv("JDBC_URL");
    static final int N = 2000;
    static int passed;

    static void check(String name, boolean ok) {
        if (!ok) {
            System.out.println("FAIL: " + name);
            System.exit(1);
        }
        passed++;
        System.out.println("ok: " + name);
    }

    static int shardOf(long id) { return (int) ((id >> 10) & 8191); }

    /** id -> body of every row of a table. */
    static Map<Long, String> table(String name) throws SQLException {
        Map<Long, String> rows = new HashMap<>();
        try (Connection c = DriverManager.getConnection(URL);
             Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT id, body FROM " + name)) {
            while (rs.next()) rows.put(rs.getLong(1), rs.getString(2));
        }
        return rows;
    }

    /** Each of ids[i] is the ID of the row holding bodies[i], and they are all distinct. */
    static boolean ownRows(String table, List<Long> ids, List<String> bodies, int shard) throws SQLException {
        Map<Long, String> rows = table(table);
        if (ids.size() != bodies.size() || new HashSet<>(ids).size() != ids.size()) return false;
        for (int i = 0; i < ids.size(); i++) {
            Long id = ids.get(i);
            if (id == null || !bodies.get(i).equals(rows.get(id)) || shardOf(id) != shard) return false;
        }
        return true;
    }

    static List<String> bodies(String prefix) {
        List<String> b = new ArrayList<>();
        for (int i = 0; i < N; i++) b.add(prefix + " " + i);
        return b;
    }

    static void jdbc() throws SQLException {
        try (Connection c = DriverManager.getConnection(URL); Statement st = c.createStatement()) {
            st.execute(JdbcRecipe.DDL);
        }
        String[][] tables = {{"jdbc_item", "7"}, {"jdbc_order", "8"}};
        for (String[] t : tables) {
            String table = t[0];
            int shard = Integer.parseInt(t[1]);
            try (Connection c = DriverManager.getConnection(URL)) {
                long a = JdbcRecipe.insertReturning(c, table, "returning");
                long b = JdbcRecipe.insertGeneratedKey(c, table, "generated key");
                long k = JdbcRecipe.insertAnyGeneratedKeys(c, table, "any generated keys");
                check(table + ": INSERT ... RETURNING id, getGeneratedKeys() by column name and with"
                        + " RETURN_GENERATED_KEYS each give the row's own ID",
                    ownRows(table, List.of(a, b, k), List.of("returning", "generated key", "any generated keys"), shard));
                c.setAutoCommit(false);
                List<String> batch = bodies("batch");
                long[] ids = JdbcRecipe.insertBatch(c, table, batch);
                c.commit();
                check(table + ": a " + N + "-row executeBatch() gives every row its own ID, all distinct",
                    ownRows(table, box(ids), batch, shard));
            }
            // The driver setting that turns a batch into multi-row INSERTs.
            try (Connection c = DriverManager.getConnection(URL + "&reWriteBatchedInserts=true")) {
                List<String> batch = bodies("rewritten");
                long[] ids = JdbcRecipe.insertBatch(c, table, batch);
                check(table + ": the same with reWriteBatchedInserts=true (pgjdbc leaves a batch that returns keys as it is)",
                    ownRows(table, box(ids), batch, shard));
            }
        }
    }

    static List<Long> box(long[] ids) {
        List<Long> l = new ArrayList<>();
        for (long id : ids) l.add(id);
        return l;
    }

    static EntityManagerFactory emf(String unit) {
        Map<String, String> props = new HashMap<>();
        props.put("javax.persistence.jdbc.url", URL);
        return Persistence.createEntityManagerFactory(unit, props);
    }

    /** Persists one entity in a transaction, then N in another; returns them all. */
    static <T> List<T> persistOneAndMany(EntityManager em, Function<String, T> make) {
        List<T> all = new ArrayList<>();
        em.getTransaction().begin();
        all.add(make.apply("one"));
        em.persist(all.get(0));
        em.getTransaction().commit();
        em.getTransaction().begin();
        for (String b : bodies("many")) {
            T e = make.apply(b);
            em.persist(e);
            all.add(e);
        }
        em.getTransaction().commit();
        return all;
    }

    static List<String> withOne(List<String> b) {
        List<String> l = new ArrayList<>(List.of("one"));
        l.addAll(b);
        return l;
    }

    static void jpa() throws SQLException {
        try (Connection c = DriverManager.getConnection(URL); Statement st = c.createStatement()) {
            st.execute("""
                CREATE SEQUENCE el_item_seq;
                CREATE TABLE el_item (id bigint PRIMARY KEY DEFAULT next_id(5, 'el_item_seq'), body text UNIQUE);
                CREATE TABLE el_line (id bigint PRIMARY KEY DEFAULT next_id(5, 'el_item_seq'),
                                      item_id bigint NOT NULL REFERENCES el_item, body text UNIQUE);
                CREATE SEQUENCE el_bulk_item_seq;
                SELECT setval('el_bulk_item_seq', make_id(now(), 9));
                CREATE TABLE el_bulk_item (id bigint PRIMARY KEY DEFAULT next_id('el_bulk_item_seq'), body text UNIQUE);
                CREATE SEQUENCE el_identity_item_seq;
                CREATE TABLE el_identity_item (id bigint PRIMARY KEY DEFAULT next_id(6, 'el_identity_item_seq'), body text UNIQUE);
                CREATE TABLE el_note (id bigserial PRIMARY KEY, body text);
                CREATE TABLE el_tenant_item (
                    tenant bigint, id bigint PRIMARY KEY DEFAULT next_id(6, 'el_identity_item_seq'), body text)""");
        }
        EntityManagerFactory f = emf("recipes");
        EntityManager em = f.createEntityManager();
        List<Item> items = persistOneAndMany(em, Item::new);
        check("EclipseLink @ReturnInsert: persist of one entity, then of " + N + " in one transaction,"
                + " gives each its own row's ID",
            ownRows("el_item", items.stream().map(Item::getId).toList(), withOne(bodies("many")), 5));
        em.getTransaction().begin();
        List<Line> lines = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            Item parent = new Item("parent " + i);
            for (int j = 0; j < 3; j++) {
                lines.add(new Line(parent, "line " + i + "." + j));
                em.persist(lines.get(lines.size() - 1));
            }
        }
        em.getTransaction().commit();
        Map<Long, String> parents = parentBodies();
        check("EclipseLink @ReturnInsert: 100 new parents with 3 new children each, in one transaction:"
                + " each child row references its own parent's row",
            ownRows("el_line", lines.stream().map(Line::getId).toList(), lines.stream().map(Line::getBody).toList(), 5)
                && lines.stream().allMatch(l -> l.getItem().getBody().equals(parents.get(l.getId()))));
        List<BulkItem> bulk = persistOneAndMany(em, BulkItem::new);
        check("EclipseLink SnowflakeSequence: the same, IDs taken in blocks before the INSERTs",
            ownRows("el_bulk_item", bulk.stream().map(BulkItem::getId).toList(), withOne(bodies("many")), 9));
        em.close();
        f.close();

        // The wrong combinations, shown to be wrong. IDENTITY reads the key with SELECT lastval():
        // an error in a session that has called no nextval() yet ...
        f = emf("identity-lastval");
        EntityManager fresh = f.createEntityManager();
        fresh.getTransaction().begin();
        fresh.persist(new IdentityItem("first"));
        check("EclipseLink IDENTITY on a next_id column: lastval() fails in a fresh session (55000)",
            "55000".equals(sqlState(() -> fresh.getTransaction().commit())));
        fresh.close();
        // ... and another sequence's value, silently, in one that has.
        em = f.createEntityManager();
        em.getTransaction().begin();
        Note note = new Note("a row in a bigserial table");
        em.persist(note);
        em.flush();
        IdentityItem wrong = new IdentityItem("second");
        em.persist(wrong);
        em.getTransaction().commit();
        Map<Long, String> rows = table("el_identity_item");
        check("EclipseLink IDENTITY on a next_id column: after a nextval() in the session, the entity"
                + " silently gets that sequence's value, not its row's ID",
            wrong.getId().equals(note.getId()) && rows.containsValue("second")
                && !"second".equals(rows.get(wrong.getId())));
        em.close();
        f.close();

        // IDENTITY through getGeneratedKeys(): EclipseLink reads column 1 of RETURNING *.
        f = emf("identity-generated-keys");
        em = f.createEntityManager();
        em.getTransaction().begin();
        IdentityItem first = new IdentityItem("key first");
        TenantItem second = new TenantItem("key second");
        em.persist(first);
        em.persist(second);
        em.getTransaction().commit();
        check("EclipseLink IDENTITY with getGeneratedKeys(): right when the key is the first column",
            "key first".equals(table("el_identity_item").get(first.getId())));
        check("EclipseLink IDENTITY with getGeneratedKeys(): silently wrong when it is not"
                + " (the entity gets the first column's value)",
            Long.valueOf(42).equals(second.getId()) && table("el_tenant_item").containsValue("key second"));
        em.close();
        f.close();
    }

    /** el_line's ID -> the body of the el_item row it references. */
    static Map<Long, String> parentBodies() throws SQLException {
        Map<Long, String> rows = new HashMap<>();
        try (Connection c = DriverManager.getConnection(URL);
             Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT l.id, i.body FROM el_line l JOIN el_item i ON i.id = l.item_id")) {
            while (rs.next()) rows.put(rs.getLong(1), rs.getString(2));
        }
        return rows;
    }

    /** The SQLSTATE of the SQLException under what a call throws, null if it throws none. */
    static String sqlState(Runnable call) {
        String state = null;
        try {
            call.run();
        } catch (RuntimeException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof SQLException s) state = s.getSQLState();
            }
        }
        return state;
    }

    public static void main(String[] args) throws Exception {
        jdbc();
        jpa();
        System.out.println("java clients: " + passed + " passed, 0 failed");
    }
}
