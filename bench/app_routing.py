"""The Python part of bench/app_routing.sh: one session's single-row insert latency on a random
shard of node_a's first 16, through psycopg straight to the node (schema-qualified), a plain
SQLAlchemy Session on the node (SET LOCAL search_path, the ORM's INSERT: the ORM's own cost), the
SQLAlchemy and Django routers of clients/python/ (use_shard, then the ORM's INSERT), and
psycopg through the router (insert_post, PL/Proxy). Medians over interleaved rounds.
Usage: app_routing.py ROUTER_DSN NODE_A_DSN [OUT.json] (the medians, in ms, and their ratios)"""
import os
import random
import statistics
import sys
import time

import json

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from snowflake_routing import ShardMap  # noqa: E402

router_dsn, node_dsn = sys.argv[1:3]
out = sys.argv[3] if len(sys.argv) > 3 else None
N, ROUNDS = 1000, 3
shard_map = ShardMap(router_dsn)
rng = random.Random(1)


def sqlalchemy_insert():
    from sqlalchemy import BigInteger, FetchedValue, Text, create_engine, text
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    from routing_sqlalchemy import ShardRouter

    class Base(DeclarativeBase):
        pass

    class Post(Base):
        __tablename__ = "posts"
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True, server_default=FetchedValue())
        user_id: Mapped[int] = mapped_column(BigInteger)
        body: Mapped[str] = mapped_column(Text)

    router = ShardRouter(shard_map)
    plain = Session(create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(node_dsn)),
                    expire_on_commit=False)

    def plain_insert(shard):
        with plain.begin():
            plain.execute(text(f"SET LOCAL search_path = shard_{shard}"))
            post = Post(user_id=1, body="bench")
            plain.add(post)
            plain.flush()
            return post.id

    def work(s):
        post = Post(user_id=1, body="bench")
        s.add(post)
        s.flush()
        return post.id
    return plain_insert, lambda shard: router.unit(shard, work)


def django_insert():
    import django
    from django.conf import settings

    import routing_django
    settings.configure(DATABASES=routing_django.databases(shard_map), INSTALLED_APPS=[], USE_TZ=True,
                       DATABASE_ROUTERS=["routing_django.NodeRouter"])
    django.setup()
    routing_django.use_map(shard_map)
    from django.db import models

    class Post(models.Model):
        id = models.BigAutoField(primary_key=True)
        user_id = models.BigIntegerField()
        body = models.TextField()

        class Meta:
            app_label = "bench"
            db_table = "posts"
    return lambda shard: routing_django.unit(shard, lambda: Post.objects.create(user_id=1, body="bench").pk)


direct = psycopg.connect(node_dsn, autocommit=True)
routed = psycopg.connect(router_dsn, autocommit=True)
sqlalchemy_plain, sqlalchemy_routed = sqlalchemy_insert()
variants = {
    "psycopg direct": lambda shard: direct.execute(
        f"INSERT INTO shard_{shard}.posts (user_id, body) VALUES (1, 'bench') RETURNING id").fetchone(),
    "SQLAlchemy on node": sqlalchemy_plain,
    "SQLAlchemy router": sqlalchemy_routed,
    "Django router": django_insert(),
    "psycopg via router": lambda shard: routed.execute("SELECT insert_post(%s, 1, 'bench')", [shard]).fetchone(),
}
times = {name: [] for name in variants}
for _ in range(ROUNDS):
    for name, insert in variants.items():
        for shard in [rng.randrange(16) for _ in range(N)]:
            t0 = time.perf_counter()
            insert(shard)
            times[name].append(time.perf_counter() - t0)
base = statistics.median(times["psycopg direct"])
print(f"Python, one session, single-row insert, median latency of {N * ROUNDS} (ratio to psycopg direct):")
for name, ts in times.items():
    m = statistics.median(ts)
    print(f"  {name:20} {m * 1000:.3f} ms ({m / base:.2f}x)")
if out:
    json.dump({name: {"latency_ms": round(statistics.median(ts) * 1000, 4),
                      "ratio_to_direct": round(statistics.median(ts) / base, 3)} for name, ts in times.items()},
              open(out, "w"), indent=1)
