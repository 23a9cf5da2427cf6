"""The Python recipes against a real server (PGHOST/PGPORT/PGUSER/PGDATABASE set by run.sh)."""
import os
import sys

import psycopg

URL = f"postgresql+psycopg://{os.environ['PGUSER']}@/{os.environ['PGDATABASE']}?host={os.environ['PGHOST']}&port={os.environ['PGPORT']}"
passed = 0


def check(name, ok):
    global passed
    if not ok:
        print(f"FAIL: {name}")
        sys.exit(1)
    passed += 1
    print(f"ok: {name}")


def shard_of(i):
    return (i >> 10) & 8191


def sqlalchemy_recipe():
    import recipe_sqlalchemy as r
    one, many = r.demo(URL)
    ids = [one.id] + [m.id for m in many]
    check("SQLAlchemy: insert gets its ID back", isinstance(one.id, int) and one.id > 2**62 // 2)
    check("SQLAlchemy: bulk insert gets 2000 distinct IDs back", len(set(ids)) == 2001 and None not in ids)
    check("SQLAlchemy: IDs from next_id, shard 5", all(shard_of(i) == 5 for i in ids))
    with psycopg.connect() as c:
        db = dict(c.execute("SELECT id, body FROM sa_item").fetchall())
    check("SQLAlchemy: each object holds its own row's ID", all(db[m.id] == m.body for m in many) and db[one.id] == "one")


def django_recipe():
    import django
    from django.conf import settings
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ["PGDATABASE"],
                               "USER": os.environ["PGUSER"], "HOST": os.environ["PGHOST"], "PORT": os.environ["PGPORT"]}},
        INSTALLED_APPS=[], USE_TZ=True)
    django.setup()
    from django.db import connection
    from recipe_django import Item
    with connection.schema_editor() as editor:
        editor.execute("CREATE SEQUENCE dj_item_seq")
        editor.create_model(Item)
    with psycopg.connect() as c:
        ddl = c.execute("""SELECT a.attidentity, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a
                             JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                            WHERE a.attrelid = 'dj_item'::regclass AND a.attname = 'id'""").fetchone()
    check("Django: the column is DEFAULT next_id(...), no identity", ddl == ("", "next_id(5, 'dj_item_seq'::regclass)"))
    one = Item.objects.create(body="one")
    check("Django: create() gets its ID back", isinstance(one.pk, int) and shard_of(one.pk) == 5)
    many = Item.objects.bulk_create([Item(body=f"bulk {i}") for i in range(2000)])
    ids = [m.pk for m in many]
    check("Django: bulk_create gets 2000 distinct IDs back", None not in ids and len(set(ids)) == 2000)
    db = dict(Item.objects.values_list("id", "body"))
    check("Django: each object holds its own row's ID", all(db[m.pk] == m.body for m in many))
    check("Django: IDs from next_id, shard 5", all(shard_of(i) == 5 for i in ids))


def psycopg_json():
    with psycopg.connect() as c:
        c.execute("CREATE SEQUENCE py_seq")
        c.execute("CREATE TABLE py_item (id snowflake PRIMARY KEY DEFAULT next_id(4, 'py_seq'), body text)")
        ids = [r[0] for r in c.execute("INSERT INTO py_item (body) SELECT 'x' FROM generate_series(1, 100) RETURNING id::bigint")]
        agg = c.execute("SELECT json_agg(t ORDER BY id) FROM py_item t").fetchone()[0]
        check("psycopg: json_agg of a snowflake column holds the IDs as strings",
              [a["id"] for a in agg] == [str(i) for i in sorted(ids)])


sqlalchemy_recipe()
django_recipe()
psycopg_json()
print(f"python clients: {passed} passed, 0 failed")
