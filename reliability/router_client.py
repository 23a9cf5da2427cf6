"""One client session writing through the router (reliability/t_router_moves.sh, bench/router.py).

Inserts posts on random shards (insert_post, routed RUN ON shard) and updates its own earlier
posts (update_post, routed RUN ON id_shard(id)) until the deadline. A write refused with
40001 (a shard being moved, or a router session that had not yet seen the move) is retried;
other errors (a node down) are retried after a pause, or with STRICT end the client (exit 1)
naming the error. Every write the router acknowledged is logged, one line each:  I <id> <shard> <body> <t_first_try> <t_ack> <tries>
                   or:  U <id> - <body> <t_first_try> <t_ack> <tries>
Usage: router_client.py DSN CLIENT_NO SECONDS SHARDS(comma-separated) LOG [strict]
It stops early when the file LOG.stop exists (for tests whose work takes as long as it takes).
"""
import os
import random
import sys
import time

import psycopg2

dsn, client, seconds, shards, log_path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
strict = sys.argv[6:7] == ["strict"]
shards = [int(s) for s in shards.split(",")]
rng = random.Random(client)
deadline = time.time() + seconds
conn = None


def run(sql, args):
    """Runs one routed call until the router acknowledges it; returns (value, t_first, tries)."""
    global conn
    t_first, tries = time.time(), 0
    while True:
        tries += 1
        try:
            if conn is None:
                conn = psycopg2.connect(dsn)
                conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone()[0], t_first, tries
        except psycopg2.Error as e:
            if conn is not None and conn.closed:
                conn = None
            if e.pgcode == "40001":
                time.sleep(0.002)
            elif strict:
                print(f"client {client}: {sql} failed with {e.pgcode}: {e}", file=sys.stderr)
                sys.exit(1)
            else:
                time.sleep(0.05)
            if time.time() > deadline + 30:
                raise


mine = []
n = 0
with open(log_path, "w") as log:
    while time.time() < deadline and not os.path.exists(log_path + ".stop"):
        n += 1
        body = f"c{client}n{n}"
        if mine and rng.random() < 0.3:
            post = rng.choice(mine)
            ok, t0, tries = run("SELECT update_post(%s, %s)", (post, body))
            if not ok:
                print(f"client {client}: update_post({post}) found no row", file=sys.stderr)
                sys.exit(1)
            log.write(f"U {post} - {body} {t0:.6f} {time.time():.6f} {tries}\n")
        else:
            shard = rng.choice(shards)
            post, t0, tries = run("SELECT insert_post(%s, %s, %s)", (shard, client, body))
            log.write(f"I {post} {shard} {body} {t0:.6f} {time.time():.6f} {tries}\n")
            mine.append(post)
        log.flush()
