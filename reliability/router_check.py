"""Checks what the router clients saw against what the nodes hold (reliability/t_router_moves.sh).

Usage: router_check.py ROWS MAP MOVES CLIENT_LOG...
  ROWS   one row per line, from every node: node shard id body
  MAP    shard node (the router's shard_map)
  MOVES  shard t_start t_end (move_shard calls that succeeded)
Fails (exit 1) unless: every acknowledged insert is present exactly once, on the node the
map names, holding the body of its last acknowledged write; no ID appears twice over all
nodes; every ID of a moved shard inserted after its move is above every ID acknowledged
before the move ended. Prints figures, including the longest write pause on a moved shard.
"""
import collections
import statistics
import sys

rows_path, map_path, moves_path, logs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
failures = []

held = collections.defaultdict(list)  # id -> [(node, shard, body)]
for line in open(rows_path):
    node, shard, pid, body = line.rstrip("\n").split(" ", 3)
    held[int(pid)].append((node, int(shard), body))
shard_node = dict(line.split() for line in open(map_path))
moves = [(int(s), float(a), float(b)) for s, a, b in (line.split() for line in open(moves_path))]

inserts = {}  # id -> (shard, t_first, t_ack)
last_body = {}  # id -> body of the last acknowledged write
ops = []  # (shard or None, t_first, t_ack)
for path in logs:
    for line in open(path):
        kind, pid, shard, body, t0, t1, _tries = line.split()
        pid, t0, t1 = int(pid), float(t0), float(t1)
        if kind == "I":
            if pid in inserts:
                failures.append(f"the router returned ID {pid} for two inserts")
            inserts[pid] = (int(shard), t0, t1)
        last_body[pid] = body
        ops.append((pid, t0, t1))

dups = [pid for pid, copies in held.items() if len(copies) > 1]
if dups:
    failures.append(f"{len(dups)} IDs held more than once over all nodes, e.g. {dups[0]}: {held[dups[0]]}")
for pid, (shard, _t0, _t1) in inserts.items():
    copies = held.get(pid, [])
    if not copies:
        failures.append(f"acknowledged insert {pid} (shard {shard}) is missing")
        continue
    node, held_shard, body = copies[0]
    if held_shard != shard or node != shard_node.get(str(shard)):
        failures.append(f"ID {pid} of shard {shard} is on {node} (schema of shard {held_shard}), the map names {shard_node.get(str(shard))}")
    if body != last_body[pid]:
        failures.append(f"ID {pid} holds {body!r}, the last acknowledged write was {last_body[pid]!r}")

pauses = []
for shard, start, end in moves:
    before = [pid for pid, (s, _t0, t1) in inserts.items() if s == shard and t1 < end]
    after = [pid for pid, (s, t0, _t1) in inserts.items() if s == shard and t0 > end]
    if not before or not after:
        failures.append(f"moved shard {shard}: {len(before)} inserts before the move ended, {len(after)} after: too few to check")
    elif min(after) <= max(before):
        failures.append(f"moved shard {shard}: an ID made after the move ({min(after)}) is not above one made before ({max(before)})")
    # The longest a write to this shard took (first try to acknowledgement) around the move.
    span = [t1 - t0 for pid, t0, t1 in ops
            if (inserts.get(pid, (None,))[0] == shard or (pid >> 10) & 8191 == shard) and t1 >= start and t0 <= end]
    pauses.append(max(span) if span else 0.0)

print(f"router check: {len(inserts)} acknowledged inserts, {len(ops) - len(inserts)} updates, "
      f"{len(held)} IDs on the nodes, {len(dups)} duplicates, {len(moves)} moves")
if pauses:
    print(f"router check: longest write on a moving shard per move (s): {', '.join(f'{p:.3f}' for p in pauses)}; "
          f"max {max(pauses):.3f}, median {statistics.median(pauses):.3f}")
for f in failures[:20]:
    print("FAIL:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
