"""One application writing straight to the nodes, routing by shard itself through the
SQLAlchemy or the Django router of clients/python/ (reliability/t_app_routing.sh).

Inserts posts on random shards, updates its own earlier posts and reads them back by ID, and
every 20 rounds reads all its posts with the router's fan-out (each must be there once, with its
last acknowledged body, in ID order), until the deadline or LOG.stop; while LOG.pause exists
it waits, its counts so far written to LOG.paused. Each write it saw acknowledged is logged as
reliability/router_check.py reads them:  I <id> <shard> <body> <t0> <t_ack> 1  or
U <id> - <body> <t0> <t_ack> 1. A read must return the body of the post's last acknowledged
write. Any error that reaches the application (the routers retry SF001, 40001 and 40P01
themselves) ends it with exit 1, naming it. Prints one line of counts at the end.
Usage: app_router_client.py sqlalchemy|django SOURCE CLIENT_NO SECONDS SHARDS LOG
SOURCE: the router's connect string, or nodes:DSN|DSN... to read the map from those nodes
(no router). APP_USER (environment): the role to reach the nodes as.
"""
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from snowflake_routing import ShardMap, shard_of  # noqa: E402

kind, source, client, seconds, shards, log_path = sys.argv[1:7]
shards = [int(s) for s in shards.split(",")]
rng = random.Random(int(client))
deadline = time.time() + float(seconds)
credentials = {"user": os.environ["APP_USER"]} if os.environ.get("APP_USER") else {}
if source.startswith("nodes:"):
    shard_map = ShardMap(nodes=source[len("nodes:"):].split("|"), **credentials)
else:
    shard_map = ShardMap(source, **credentials)


def sqlalchemy_app():
    """insert(shard, body) -> id, update(id, body), read(id) -> body, and the stats."""
    from sqlalchemy import BigInteger, FetchedValue, Integer, Text
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

    from routing_sqlalchemy import ShardRouter

    class Base(DeclarativeBase):
        pass

    class Post(Base):
        __tablename__ = "posts"     # unqualified: the shard's, by use_shard
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True, server_default=FetchedValue())
        user_id: Mapped[int] = mapped_column(BigInteger)
        body: Mapped[str] = mapped_column(Text)
        edits: Mapped[int] = mapped_column(Integer, server_default=FetchedValue())

    router = ShardRouter(shard_map, pool_size=2)

    def insert(shard, body):
        def work(s):
            post = Post(user_id=int(client), body=body)
            s.add(post)
            s.flush()
            return post.id
        return router.unit(shard, work)

    def update(post_id, body):
        def work(s):
            s.get(Post, post_id).body = body
        router.unit(shard_of(post_id), work)

    def read(post_id):
        return router.unit(shard_of(post_id), lambda s: s.get(Post, post_id).body)

    def mine():
        return router.fan_out("SELECT id, body FROM posts WHERE user_id = :u ORDER BY id", {"u": int(client)})
    return insert, update, read, mine, router.stats


def django_app():
    import django
    from django.conf import settings

    import routing_django
    settings.configure(DATABASES=routing_django.databases(shard_map), USE_TZ=True,
                       DATABASE_ROUTERS=["routing_django.NodeRouter"], INSTALLED_APPS=[])
    django.setup()
    routing_django.use_map(shard_map)
    from django.db import models

    class Post(models.Model):
        id = models.BigAutoField(primary_key=True)     # the table's default: the shard's next_id()
        user_id = models.BigIntegerField()
        body = models.TextField()
        edits = models.IntegerField(default=0)

        class Meta:
            app_label = "app"
            db_table = "posts"

    unit = routing_django.unit

    def insert(shard, body):
        return unit(shard, lambda: Post.objects.create(user_id=int(client), body=body).pk)

    def update(post_id, body):
        if unit(shard_of(post_id), lambda: Post.objects.filter(pk=post_id).update(body=body)) != 1:
            raise AssertionError(f"update of {post_id} found no row")

    def read(post_id):
        return unit(shard_of(post_id), lambda: Post.objects.get(pk=post_id).body)

    def mine():
        return routing_django.fan_out("SELECT id, body FROM posts WHERE user_id = %s ORDER BY id", [int(client)])
    return insert, update, read, mine, routing_django.stats


insert, update, read, mine, stats = sqlalchemy_app() if kind == "sqlalchemy" else django_app()
last = {}      # id -> body of its last acknowledged write
counts = {"inserts": 0, "updates": 0, "reads": 0, "fan_outs": 0}
n = 0
with open(log_path, "w") as log:
    try:
        while time.time() < deadline and not os.path.exists(log_path + ".stop"):
            if os.path.exists(log_path + ".pause"):
                if not os.path.exists(log_path + ".paused"):
                    with open(log_path + ".paused.tmp", "w") as paused:
                        json.dump({**counts, "retried": dict(stats), "map_loads": shard_map.loads}, paused)
                    os.rename(log_path + ".paused.tmp", log_path + ".paused")
                time.sleep(0.05)
                continue
            n += 1
            body = f"{kind[0]}{client}n{n}"
            t0 = time.time()
            if last and rng.random() < 0.3:
                post = rng.choice(list(last))
                update(post, body)
                log.write(f"U {post} - {body} {t0:.6f} {time.time():.6f} 1\n")
                counts["updates"] += 1
            else:
                shard = rng.choice(shards)
                post = insert(shard, body)
                if shard_of(post) != shard:
                    raise AssertionError(f"ID {post} made for shard {shard} is of shard {shard_of(post)}")
                log.write(f"I {post} {shard} {body} {t0:.6f} {time.time():.6f} 1\n")
                counts["inserts"] += 1
            last[post] = body
            log.flush()
            post = rng.choice(list(last))
            got = read(post)
            if got != last[post]:
                raise AssertionError(f"read of {post} (shard {shard_of(post)}) gave {got!r}, its last write was {last[post]!r}")
            counts["reads"] += 1
            if n % 20 == 0:     # every post of this client's, from every shard, in ID order
                rows = mine()
                if [tuple(r) for r in rows] != sorted(last.items()):
                    raise AssertionError(f"fan-out gave {len(rows)} posts, {len(last)} acknowledged: "
                                         f"{sorted(set(last) ^ {r[0] for r in rows})[:5]} differ")
                counts["fan_outs"] += 1
    except Exception as error:
        print(f"{kind} client {client}: error reached the application: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
print(json.dumps({"kind": kind, "client": int(client), **counts, "retried": dict(stats), "map_loads": shard_map.loads}))
