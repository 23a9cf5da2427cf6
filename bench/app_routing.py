"""The Python part of bench/app_routing.sh (issue 36's bar): single-row insert and read-by-ID on a
random one of node_a's first 16 shards, the same two statements each way:
  psycopg direct       straight to the node, schema-qualified, autocommit (one round trip)
  psycopg direct tx    the same in a transaction (BEGIN, statement, COMMIT: as any unit of work)
  SQLAlchemy on node   a plain SQLAlchemy Session on the node, schema-qualified, in a transaction:
                       SQLAlchemy's own cost, no routing
  SQLAlchemy router    clients/python's ShardRouter.unit (use_shard, then the unqualified statement)
  psycopg via router   SELECT insert_post / get_post through the router (PL/Proxy, then the node)
Latency: one session, ROUNDS interleaved rounds of N of each, median and p99. Throughput: 4
sessions (4 processes: the GIL would serialise threads), SECS seconds each, interleaved.
Usage: app_routing.py ROUTER_DSN NODE_A_DSN [OUT.json]"""
import json
import multiprocessing
import os
import random
import statistics
import sys
import time

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from snowflake_routing import ShardMap, shard_of  # noqa: E402

router_dsn, node_dsn = sys.argv[1:3]
out = sys.argv[3] if len(sys.argv) > 3 else None
N, ROUNDS = int(os.environ.get("PY_N", 1000)), int(os.environ.get("ROUNDS", 3))
SECS, SESSIONS = float(os.environ.get("PY_SECS", 3)), 4
INSERT = "INSERT INTO {}posts (user_id, body) VALUES (1, 'bench') RETURNING id"
READ = "SELECT id, user_id, body, edits FROM {}posts WHERE id = %s"
NAMES = ["psycopg direct", "psycopg direct tx", "SQLAlchemy on node", "SQLAlchemy router", "psycopg via router"]


def make(name):
    """(insert(shard) -> id, read(id)) of one variant, on its own connections."""
    if name == "psycopg direct":
        c = psycopg.connect(node_dsn, autocommit=True)
        return (lambda s: c.execute(INSERT.format(f"shard_{s}.")).fetchone()[0],
                lambda i: c.execute(READ.format(f"shard_{shard_of(i)}."), [i]).fetchone())
    if name == "psycopg direct tx":
        c = psycopg.connect(node_dsn)

        def tx(sql, params=None):
            with c.transaction():
                return c.execute(sql, params).fetchone()
        return (lambda s: tx(INSERT.format(f"shard_{s}."))[0],
                lambda i: tx(READ.format(f"shard_{shard_of(i)}."), [i]))
    if name == "psycopg via router":
        c = psycopg.connect(router_dsn, autocommit=True)
        return (lambda s: c.execute("SELECT insert_post(%s, 1, 'bench')", [s]).fetchone()[0],
                lambda i: c.execute("SELECT * FROM get_post(%s)", [i]).fetchone())
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session
    sa_read = READ.replace("%s", ":id")
    if name == "SQLAlchemy on node":
        engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(node_dsn))

        def plain(sql, params=None):
            with Session(engine) as s, s.begin():
                return s.execute(text(sql), params).one()
        return (lambda sh: plain(INSERT.format(f"shard_{sh}."))[0],
                lambda i: plain(sa_read.format(f"shard_{shard_of(i)}."), {"id": i}))
    from routing_sqlalchemy import ShardRouter
    router = ShardRouter(ShardMap(router_dsn))
    return (lambda sh: router.unit(sh, lambda s: s.execute(text(INSERT.format(""))).scalar()),
            lambda i: router.unit(shard_of(i), lambda s: s.execute(text(sa_read.format("")), {"id": i}).one()))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def worker(name, op, ids, start, deadline, counts):
    insert, read = make(name)
    rng = random.Random(os.getpid())
    start.wait()
    n = 0
    while time.time() < deadline.value:
        insert(rng.randrange(16)) if op == "insert" else read(rng.choice(ids))
        n += 1
    counts.put(n)


def throughput(name, op, ids):
    ctx = multiprocessing.get_context("fork")
    start, counts, deadline = ctx.Barrier(SESSIONS + 1), ctx.Queue(), ctx.Value("d", 0.0)
    procs = [ctx.Process(target=worker, args=(name, op, ids, start, deadline, counts)) for _ in range(SESSIONS)]
    for p in procs:
        p.start()
    deadline.value = time.time() + 3600
    start.wait()
    t0 = time.time()
    deadline.value = t0 + SECS
    total = sum(counts.get() for _ in procs)
    elapsed = time.time() - t0
    for p in procs:
        p.join()
    return total / elapsed


def main():
    variants = {name: make(name) for name in NAMES}
    rng = random.Random(1)
    ids = [variants["psycopg direct"][0](rng.randrange(16)) for _ in range(2000)]
    lat = {(name, op): [] for name in NAMES for op in ("insert", "read")}
    tps = {(name, op): [] for name in NAMES for op in ("insert", "read")}
    for _ in range(ROUNDS):
        for name, (insert, read) in variants.items():
            for op, f, arg in (("insert", insert, lambda: rng.randrange(16)), ("read", read, lambda: rng.choice(ids))):
                for _ in range(N):
                    a = arg()
                    t0 = time.perf_counter()
                    f(a)
                    lat[name, op].append(time.perf_counter() - t0)
        for name in NAMES:
            for op in ("insert", "read"):
                tps[name, op].append(throughput(name, op, ids))
    result = {}
    for op in ("insert", "read"):
        print(f"Python, {op}: latency over {N * ROUNDS} (1 session), {SESSIONS}-session throughput "
              f"(median of {ROUNDS} x {SECS:g} s); ratios to psycopg direct tx / autocommit")
        b_tx, b_ac = statistics.median(lat["psycopg direct tx", op]), statistics.median(lat["psycopg direct", op])
        t_tx, t_ac = statistics.median(tps["psycopg direct tx", op]), statistics.median(tps["psycopg direct", op])
        for name in NAMES:
            m, p99 = statistics.median(lat[name, op]), pct(lat[name, op], 0.99)
            t = statistics.median(tps[name, op])
            result.setdefault(name, {})[op] = {
                "latency_ms": round(m * 1000, 4), "p99_ms": round(p99 * 1000, 4),
                "latency_ratio_tx": round(m / b_tx, 3), "latency_ratio_autocommit": round(m / b_ac, 3),
                "tps_4": round(t, 1), "tps_rounds": [round(x, 1) for x in tps[name, op]],
                "tps_ratio_tx": round(t / t_tx, 3), "tps_ratio_autocommit": round(t / t_ac, 3)}
            print(f"  {name:20} {m * 1000:.3f} ms p99 {p99 * 1000:.3f} ({m / b_tx:.2f}x / {m / b_ac:.2f}x)  "
                  f"{t:,.0f}/s ({t / t_tx:.2f}x / {t / t_ac:.2f}x)  rounds {[round(x) for x in tps[name, op]]}")
    if out:
        json.dump(result, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
