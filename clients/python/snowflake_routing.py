"""Applications that route by shard themselves (docs/app-routing.md), the driver-neutral part:
the shard map read from the router or from the nodes, the shard of an ID, the unit-of-work runner with the retry
rules, and the fan-out over every shard. routing_sqlalchemy.py and routing_django.py build on it.
"""
import heapq
import random
import threading
import time
from collections import Counter

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

NOT_SERVED = "SF001"                  # use_shard: this node does not serve the shard
TRY_AGAIN = {"40001", "40P01"}        # a move's fence, a deadlock: the same work again, later


def shard_of(snowflake_id: int) -> int:
    """The logical shard of an ID (id_shard(id) on the server)."""
    return (snowflake_id >> 10) & 8191


def sqlstate(error: BaseException):
    """The SQLSTATE of a driver error, through SQLAlchemy's (.orig) and Django's (__cause__) wrappers."""
    while error is not None:
        state = getattr(error, "sqlstate", None) or getattr(getattr(error, "orig", None), "sqlstate", None)
        if state:
            return state
        error = error.__cause__
    return None


ROUTER_MAP = "SELECT shard, node, connstr, map_version FROM snowflake_id_router.app_map()"
NODE_MAP = "SELECT shard, node, connstr, map_version FROM app_map()"   # every node's copy


def read_map(dsn: str, query: str):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query).fetchall()


class ShardMap:
    """The shard map (app_map()), with the application's own credentials added to each node's
    connect string (which holds none). Read from the router (router_dsn) or, with no router,
    from the nodes (nodes: connect strings of a few of them): every node keeps the map the
    router last pushed it, and the highest version any of them gives is taken. Reloaded when
    a node says SF001: from the router while it answers, else from the nodes given and those
    of the map held, so that once it has a map an application needs no router."""

    def __init__(self, router_dsn: str = None, nodes=(), **credentials):
        if not router_dsn and not nodes:
            raise ValueError("give the router's connect string or some nodes'")
        self.router_dsn, self.credentials = router_dsn, credentials
        self.bootstrap = [make_conninfo(dsn, **credentials) for dsn in nodes]
        self.lock = threading.Lock()
        self.version, self.loads, self.listeners = None, 0, []
        self.dsns = {}
        self.served_before = set()         # the shards the last fan-out found (fan_out)
        self.load()

    def load(self, seen_version=None):
        """Reads the map again, unless another thread did since the caller read seen_version."""
        with self.lock:
            if seen_version is not None and seen_version != self.version:
                return
            rows = self.read()
            if rows is not None:
                self.nodes = {shard: node for shard, node, _, _ in rows}
                self.dsns = {node: make_conninfo(connstr, **self.credentials) for _, node, connstr, _ in rows}
                self.version = rows[0][3] if rows else 0
            self.loads += 1
        for listener in self.listeners:
            listener(self)

    def read(self):
        """The newest map to be had, or None when none is newer than the one held: the
        router's while it answers; else the highest version among the nodes' copies (a node
        that missed a push gives an older one)."""
        if self.router_dsn:
            try:
                return read_map(self.router_dsn, ROUTER_MAP)
            except psycopg.OperationalError:
                if not self.dsns:
                    raise                       # (no map yet, and no node known)
        best, failures = None, []
        for dsn in dict.fromkeys(self.bootstrap + list(self.dsns.values())):
            try:
                rows = read_map(dsn, NODE_MAP)
            except psycopg.Error as error:      # a node down: the others answer
                failures.append(error)
                continue
            if rows and (best is None or rows[0][3] > best[0][3]):
                best = rows
        if best is None and self.version is None:
            raise LookupError(f"no node gave a shard map ({len(failures)} could not be reached)") \
                from (failures[0] if failures else None)
        return best if best is not None and (self.version is None or best[0][3] > self.version) else None

    def node(self, shard: int) -> str:
        try:
            return self.nodes[shard]
        except KeyError:
            raise LookupError(f"shard {shard} is assigned to no node") from None

    def dsn_params(self, node: str) -> dict:
        return conninfo_to_dict(self.dsns[node])


def begin_on_shard(driver, shard: int) -> bool:
    """Begins driver's transaction with use_shard(shard) in one round trip, when driver is a
    psycopg 3 connection about to begin one (not in autocommit, no transaction open): psycopg
    would send its BEGIN apart. Sent as one simple query on the connection's libpq object
    (psycopg's documented way to send what it does not wrap), with the BEGIN psycopg would
    send (isolation level, access modes); psycopg then sees the transaction open and sends
    none. Raises the server's error (SF001 if the node does not serve the shard). False when
    driver is not in that state (or is in pipeline mode, where a simple query is refused): the
    caller then runs use_shard as its first statement."""
    pgconn = getattr(driver, "pgconn", None)
    if (pgconn is None or driver.autocommit
            or pgconn.transaction_status != pq.TransactionStatus.IDLE
            or pgconn.pipeline_status != pq.PipelineStatus.OFF):
        return False
    begin = ["BEGIN"]
    if driver.isolation_level is not None:
        begin.append("ISOLATION LEVEL " + psycopg.IsolationLevel(driver.isolation_level).name.replace("_", " "))
    if driver.read_only is not None:
        begin.append("READ ONLY" if driver.read_only else "READ WRITE")
    if driver.deferrable is not None:
        begin.append("DEFERRABLE" if driver.deferrable else "NOT DEFERRABLE")
    result = pgconn.exec_(b"%s; SELECT use_shard(%d)" % (" ".join(begin).encode(), int(shard)))
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise psycopg.errors.error_from_result(result, encoding=driver.info.encoding)
    return True


class Stats(Counter):
    """What the runner retried, by SQLSTATE (thread-safe counts)."""
    lock = threading.Lock()

    def note(self, key):
        with self.lock:
            self[key] += 1


def run(shard_map: ShardMap, shard: int, attempt, stats: Stats = None, tries: int = 40,
        first_pause: float = 0.005, longest_pause: float = 0.5):
    """Runs attempt(node) -- one transaction on that node that begins with use_shard(shard) --
    by the rules: SF001 reloads the map and runs it again where the map now says; 40001 and
    40P01 run it again after a pause; the pause doubles (with jitter, up to longest_pause)
    whenever there is nowhere new to try. Any other error, or the last try's, is the caller's.
    The attempt must be whole: everything it did is rolled back when it fails."""
    pause = first_pause
    for tried in range(1, tries + 1):
        version = shard_map.version
        try:
            node = shard_map.node(shard)
        except LookupError:                     # assigned since the map was read?
            shard_map.load(seen_version=version)
            node = shard_map.node(shard)
        try:
            return attempt(node)
        except Exception as error:
            state = sqlstate(error)
            if tried == tries or (state != NOT_SERVED and state not in TRY_AGAIN):
                raise
            if stats is not None:
                stats.note(state)
            if state == NOT_SERVED:
                shard_map.load(seen_version=version)
                if shard_map.node(shard) != node:
                    continue                    # moved: straight to its node
            time.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, longest_pause)


def fan_out(shard_map: ShardMap, list_shards, run_on_shard, stats: Stats = None):
    """Rows of run_on_shard(node, shard) (one transaction beginning with use_shard, returning
    rows in ID order, the ID first) over every shard that holds tables, merged in ID order.
    Those are the shards the nodes serve (list_shards(node): the shard column of its
    snowflake_id_shards), whichever node the map names: the map assigns shards that have no
    schema anywhere, and may be behind a move. Each runs where the map names it, retried as
    run() does. A move's cutover lists its shard nowhere for a moment, so the shards the
    previous fan-out found run too; one of those still served nowhere after run()'s retries
    (SF001) was dropped, and is left out."""
    listed = set().union(*(list_shards(node) for node in shard_map.dsns))
    served, per_shard = set(listed), []
    for shard in sorted(listed | shard_map.served_before):
        try:
            per_shard.append(run(shard_map, shard, lambda node, s=shard: run_on_shard(node, s), stats))
            served.add(shard)
        except Exception as error:
            if shard in listed or (sqlstate(error) != NOT_SERVED and not isinstance(error, LookupError)):
                raise
    shard_map.served_before = served
    return list(heapq.merge(*per_shard, key=lambda row: row[0]))
