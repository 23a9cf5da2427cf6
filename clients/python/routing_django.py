"""Django routing by shard (docs/app-routing.md): one database alias per node, named as the
node, made from the router's map; a DATABASE_ROUTERS router that sends a model's queries to
the node of the unit's shard (of an instance's ID when it has one); and the unit of work, a
transaction on that alias whose first statement is use_shard(shard).

    settings.configure(DATABASES=databases(shard_map), DATABASE_ROUTERS=["routing_django.NodeRouter"], ...)
    django.setup(); use_map(shard_map)
    post = unit(shard, lambda: Post.objects.create(user_id=7, body="hi"))
    post = unit(shard_of(post_id), lambda: Post.objects.get(pk=post_id))
"""
import threading

from django.db import connections, transaction

import snowflake_routing
from snowflake_routing import Stats, begin_on_shard, run, shard_of

_unit = threading.local()      # the shard and node of the unit of work running in this thread
_map = None
stats = Stats()


def database(shard_map, node) -> dict:
    """The Django DATABASES entry of a node, from its connect string (credentials added)."""
    params = shard_map.dsn_params(node)
    names = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}
    entry = {names[k]: v for k, v in params.items() if k in names}
    entry.update(ENGINE="django.db.backends.postgresql", CONN_MAX_AGE=None,
                 OPTIONS={k: v for k, v in params.items() if k not in names})
    return entry


def databases(shard_map) -> dict:
    """DATABASES: one alias per node ("default" is left unusable: every query has a shard)."""
    return {"default": {}, **{node: database(shard_map, node) for node in shard_map.dsns}}


def use_map(shard_map):
    """Routes by shard_map, and follows its reloads: a node new to the map gets its alias."""
    global _map
    _map = shard_map

    def add_nodes(m):
        for node in m.dsns:
            if node not in connections.settings:
                connections.settings[node] = connections.configure_settings({"default": {}, node: database(m, node)})[node]
    shard_map.listeners.append(add_nodes)


class NodeRouter:
    """DATABASE_ROUTERS entry: the unit's node, after checking an instance is of the unit's shard."""

    def db_for_read(self, model, **hints):
        unit = getattr(_unit, "current", None)
        if unit is None:
            raise RuntimeError("a query on a shard runs inside routing_django.unit(shard, ...)")
        instance = hints.get("instance")
        if instance is not None and instance.pk is not None and shard_of(instance.pk) != unit[0]:
            raise ValueError(f"object {instance.pk} is of shard {shard_of(instance.pk)}, the unit's is {unit[0]}")
        return unit[1]

    db_for_write = db_for_read

    def allow_relation(self, obj1, obj2, **hints):
        return shard_of(obj1.pk) == shard_of(obj2.pk) if obj1.pk and obj2.pk else None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return False    # the shards' tables come from the template (create_shard), not migrations


def fan_out(sql: str, params=()):
    """Rows of sql (ID first, ORDER BY it) over every shard that holds tables, merged in ID
    order (snowflake_routing.fan_out)."""
    def served(node):
        with connections[node].cursor() as cursor:
            cursor.execute("SELECT shard FROM snowflake_id_shards")
            return [s for (s,) in cursor.fetchall()]

    def on_shard(node, shard):
        with transaction.atomic(using=node), connections[node].cursor() as cursor:
            cursor.execute("SELECT use_shard(%s)", [shard])
            cursor.execute(sql, params)
            return cursor.fetchall()
    return snowflake_routing.fan_out(_map, served, on_shard, stats)


def unit(shard: int, work):
    """work() as one unit of work on shard: a transaction on its node's alias, begun with
    use_shard, committed, retried by the rules (snowflake_routing.run)."""
    def attempt(node):
        _unit.current = (shard, node)
        try:
            with transaction.atomic(using=node):     # connects, and leaves autocommit
                if not begin_on_shard(connections[node].connection, shard):
                    with connections[node].cursor() as cursor:
                        cursor.execute("SELECT use_shard(%s)", [shard])
                return work()
        finally:
            _unit.current = None
    return run(_map, shard, attempt, stats)
