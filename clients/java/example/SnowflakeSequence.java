package example;

import java.util.Vector;
import org.eclipse.persistence.config.SessionCustomizer;
import org.eclipse.persistence.internal.databaseaccess.Accessor;
import org.eclipse.persistence.internal.sessions.AbstractSession;
import org.eclipse.persistence.queries.DirectReadQuery;
import org.eclipse.persistence.sequencing.Sequence;
import org.eclipse.persistence.sessions.Session;

/** An EclipseLink sequence whose values are next_id(seq) IDs, taken a block at a time:
 *  one SELECT next_id(seq) FROM generate_series(1, n) per block of n IDs. The name given in
 *  {@code @GeneratedValue(generator = ...)} is the PostgreSQL sequence's, and that sequence
 *  carries its shard (set once with setval(seq, make_id(now(), shard)) or create_shard). */
public class SnowflakeSequence extends Sequence implements SessionCustomizer {
    public SnowflakeSequence() {}

    public SnowflakeSequence(String name, int blockSize) { super(name, blockSize); }

    @Override
    public Vector getGeneratedVector(Accessor accessor, AbstractSession session, String seqName, int size) {
        DirectReadQuery query = new DirectReadQuery(
            "SELECT next_id(CAST(#seq AS regclass)) FROM generate_series(1, #n)");
        query.addArgument("seq");
        query.addArgument("n");
        Vector<Object> args = new Vector<>();
        args.add(getQualified(seqName));
        args.add(size);
        if (accessor != null) {
            query.setAccessor(accessor);
        }
        return (Vector) session.executeQuery(query, args);
    }

    @Override
    public Object getGeneratedValue(Accessor accessor, AbstractSession session, String seqName) {
        return getGeneratedVector(accessor, session, seqName, 1).get(0);
    }

    @Override public boolean shouldUsePreallocation() { return true; }
    @Override public boolean shouldAcquireValueAfterInsert() { return false; }
    @Override public boolean shouldUseTransaction() { return false; }
    @Override public void onConnect() {}
    @Override public void onDisconnect() {}

    /** persistence.xml: eclipselink.session.customizer = example.SnowflakeSequence */
    @Override
    public void customize(Session session) {
        session.getLogin().addSequence(new SnowflakeSequence("el_bulk_item_seq", 100));
    }
}
