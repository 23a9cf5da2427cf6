"""SQLAlchemy 2 routing by shard (docs/app-routing.md), on its horizontal sharding extension:
one engine (one pool) per node; the ShardedSession's "shard ids" are node names, chosen from
the ID's logical shard; each transaction on a node begins with use_shard(shard).

    router = ShardRouter(ShardMap(router_dsn, user="app", password=...))
    post_id = router.unit(shard, lambda s: s.add(Post(user_id=7, body="hi")) or s.flush() ...)
    post = router.unit(shard_of(post_id), lambda s: s.get(Post, post_id))

A session's transaction on a node serves one logical shard (use_shard sets the schema for the
transaction): its work on shards of other nodes runs in those nodes' own transactions, which
commit one after the other, not atomically.
"""
import threading

import psycopg
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.ext.horizontal_shard import ShardedSession

from snowflake_routing import Stats, begin_on_shard, fan_out, run, shard_of


class RoutedSession(ShardedSession):
    """A ShardedSession whose every transaction on a node begins with use_shard."""


@event.listens_for(RoutedSession, "after_begin")
def _use_shard(session, transaction, connection):
    # The transaction's first statement on this node: SF001 if the node does not serve it;
    # with psycopg's BEGIN, one round trip (begin_on_shard).
    shard = session.info["shard_on"][connection.engine.sf_node]
    driver = connection.connection.driver_connection
    if not begin_on_shard(driver, shard):
        driver.execute("SELECT use_shard(%s)", [shard])


class ShardRouter:
    def __init__(self, shard_map, **engine_options):
        self.map, self.engine_options = shard_map, engine_options
        self.engines = {}          # node -> (dsn, engine)
        self.stats = Stats()
        self.local = threading.local()   # each thread's session for unit(), reused

    def engine(self, node):
        """The node's engine (its pool), made again if the map gave the node a new connect string."""
        dsn = self.map.dsns[node]
        if node not in self.engines or self.engines[node][0] != dsn:
            engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn),
                                   **self.engine_options)
            engine.sf_node = node
            self.engines[node] = (dsn, engine)
        return self.engines[node][1]

    def session(self, shard: int) -> ShardedSession:
        """A session for work on shard: new rows go to its node; rows by ID to their shard's node."""
        session = RoutedSession(
            shards={node: self.engine(node) for node in self.map.dsns},
            shard_chooser=lambda mapper, instance, clause=None: self._claim(session, self._shard(instance, session.info["unit"])),
            identity_chooser=lambda mapper, primary_key, **kw: [self._claim(session, shard_of(primary_key[0]))],
            execute_chooser=lambda context: [self._claim(session, session.info["unit"])],
            expire_on_commit=False)
        session.info.update(unit=shard, shard_on={}, dsns=self.map.dsns)
        return session

    def _unit_session(self, shard: int) -> ShardedSession:
        """This thread's session, set for a unit on shard: made once, and again only when the
        map has been read since (its nodes' engines may have changed). Making a ShardedSession
        costs about as much as a short unit's own work (bench/app_routing.py)."""
        session = getattr(self.local, "session", None)
        if session is None or session.info["dsns"] is not self.map.dsns:
            session = self.local.session = self.session(shard)
        else:
            session.info.update(unit=shard, shard_on={})
        return session

    @staticmethod
    def _shard(instance, default):
        """An object's shard: its ID's once it has one, else the unit's (a new row's ID is made there)."""
        identity = inspect(instance).identity if instance is not None else None
        return shard_of(identity[0]) if identity else default

    def _claim(self, session, shard):
        """The node of shard, which this session's transaction there then serves."""
        node = self.map.node(shard)
        claimed = session.info.setdefault("shard_on", {}).setdefault(node, shard)
        if claimed != shard:
            raise ValueError(f"shards {claimed} and {shard} are both on {node}: one shard per transaction there")
        return node


    def unit(self, shard: int, work):
        """work(session) as one unit of work on shard, committed, retried by the rules (run())."""
        def attempt(_node):
            session = self._unit_session(shard)
            try:
                with session.begin():
                    return work(session)
            finally:
                session.close()      # its connection back to the pool, its objects detached
        return run(self.map, shard, attempt, self.stats)

    def fan_out(self, statement, params=None):
        """Rows of statement (ID first, ORDER BY it) over every shard that holds tables, merged
        in ID order (snowflake_routing.fan_out)."""
        def served(node):
            with self.engine(node).connect() as conn:
                return [s for (s,) in conn.execute(text("SELECT shard FROM snowflake_id_shards"))]

        def on_shard(node, shard):
            with self.engine(node).begin() as conn:
                conn.execute(text("SELECT use_shard(:shard)"), {"shard": shard})
                return conn.execute(text(statement), params or {}).all()
        return fan_out(self.map, served, on_shard, self.stats)
