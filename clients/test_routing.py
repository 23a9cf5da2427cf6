"""The Python routing clients (clients/python/, docs/app-routing.md) on one server: a router
database and two node databases; a shard moved by hand behind a client's back (the map
changed, the shard's schema now on the other node) is found again through SF001. Under real
moves: reliability/t_app_routing.sh. Usage: test_routing.py sqlalchemy|django (run.sh)."""
import os
import sys

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from snowflake_routing import ShardMap, shard_of  # noqa: E402

kind = sys.argv[1]
server = f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={os.environ['PGUSER']}"
router, nodes = f"rt_{kind}", {"n1": f"n1_{kind}", "n2": f"n2_{kind}", "n3": f"n3_{kind}"}


def sql(db, *statements):
    """Runs each statement (autocommit); the last one's rows."""
    with psycopg.connect(f"{server} dbname={db}", autocommit=True) as conn:
        for statement in statements:
            cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else None


def check(name, ok):
    if not ok:
        print(f"FAIL: {kind}: {name}")
        sys.exit(1)
    print(f"ok: {kind}: {name}")


for db in [router, *nodes.values()]:
    sql("postgres", f"CREATE DATABASE {db}")
for node, db in nodes.items():
    sql(db, "CREATE EXTENSION snowflake_id",
        "CREATE SCHEMA tpl", "CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text NOT NULL)")
sql(nodes["n1"], "SELECT create_shard('s_1', 1, template => 'tpl')", "SELECT create_shard('s_2', 2, template => 'tpl')")
sql(nodes["n2"], "SELECT create_shard('s_3', 3, template => 'tpl')")
sql(router, "SET client_min_messages = warning", "CREATE EXTENSION snowflake_id_router CASCADE", f"CREATE ROLE app_reader_{kind} LOGIN",
    *[f"SELECT add_node('{n}', '{server} dbname={db}')" for n, db in nodes.items() if n != "n3"],
    "SELECT assign_shards(1, 2, 'n1')", "SELECT assign_shards(3, 1, 'n2')",
    "SELECT assign_shards(5, 20, 'n2')")    # (assigned, but no schema anywhere: as most of a real map)
shard_map = ShardMap(f"{server} dbname={router} user=app_reader_{kind}")
check("a role with no other right reads the map",
      {s: n for s, n in shard_map.nodes.items() if s < 5} == {1: "n1", 2: "n1", 3: "n2"} and len(shard_map.nodes) == 23)

if kind == "sqlalchemy":
    from sqlalchemy import BigInteger, FetchedValue, Text
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

    from routing_sqlalchemy import ShardRouter

    class Base(DeclarativeBase):
        pass

    class Post(Base):
        __tablename__ = "posts"
        id: Mapped[int] = mapped_column(BigInteger, primary_key=True, server_default=FetchedValue())
        body: Mapped[str] = mapped_column(Text)

    app = ShardRouter(shard_map)
    stats = app.stats

    def insert(shard, body):
        def work(s):
            post = Post(body=body)
            s.add(post)
            s.flush()
            return post.id
        return app.unit(shard, work)

    def read(post_id):
        return app.unit(shard_of(post_id), lambda s: s.get(Post, post_id).body)

    def everything():
        return [tuple(r) for r in app.fan_out("SELECT id, body FROM posts ORDER BY id")]
else:
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
        body = models.TextField()

        class Meta:
            app_label = "routing"
            db_table = "posts"

    stats = routing_django.stats

    def insert(shard, body):
        return routing_django.unit(shard, lambda: Post.objects.create(body=body).pk)

    def read(post_id):
        return routing_django.unit(shard_of(post_id), lambda: Post.objects.get(pk=post_id).body)

    def everything():
        return routing_django.fan_out("SELECT id, body FROM posts ORDER BY id")

ids = {s: insert(s, f"first on {s}") for s in (1, 2, 3)}
check("each insert's ID is of its shard", all(shard_of(i) == s for s, i in ids.items()))
check("reads by ID reach each shard's node", all(read(i) == f"first on {s}" for s, i in ids.items()))
check("the insert landed in the shard's schema",
      sql(nodes["n1"], "SELECT count(*) FROM s_1.posts")[0][0] == 1)

# Shard 2 moves to n2 behind the client's back: its schema there (rows and sequence carried
# by hand), gone from n1, and the map changed. The client's map still names n1.
rows = sql(nodes["n1"], "SELECT id, body FROM s_2.posts")
last = sql(nodes["n1"], "SELECT last_value FROM s_2.table_id_seq")[0][0]
sql(nodes["n2"], "SELECT create_shard('s_2', 2, template => 'tpl')",
    *[f"INSERT INTO s_2.posts VALUES ({i}, '{b}')" for i, b in rows], f"SELECT setval('s_2.table_id_seq', {last})")
sql(nodes["n1"], "SELECT drop_shard('s_2', cascade => true)")
sql(router, "UPDATE snowflake_id_router.shard SET node = 'n2' WHERE shard = 2")
check("the client's map is stale", shard_map.nodes[2] == "n1")
check("a read of the moved shard is answered (SF001 seen, map reloaded)",
      read(ids[2]) == "first on 2" and stats["SF001"] == 1 and shard_map.nodes[2] == "n2")
new = insert(2, "second on 2")
check("an insert on the moved shard lands on its new node",
      sql(nodes["n2"], f"SELECT body FROM s_2.posts WHERE id = {new}") == [("second on 2",)] and new > ids[2])
all_rows = everything()
check("fan-out: every row of every shard, in ID order",
      [r[0] for r in all_rows] == sorted([*ids.values(), new]) and len(all_rows) == 4)
# A node added, and a shard assigned to it, since the client read the map: found by a reload.
sql(nodes["n3"], "SELECT create_shard('s_4', 4, template => 'tpl')")
sql(router, f"SELECT add_node('n3', '{server} dbname={nodes['n3']}')", "SELECT assign_shards(4, 1, 'n3')")
on_n3 = insert(4, "on a new node")
check("a shard on a node new to the map is reached", read(on_n3) == "on a new node" and shard_map.nodes[4] == "n3")
print(f"{kind}: routing by shard ok (SF001 {stats['SF001']}, map loads {shard_map.loads})")
