"""snowflake_id benchmarks: ratios against baselines measured in the same session.

Run by scripts/bench against a throwaway server (PGHOST/PGPORT set). Every figure that is
compared is measured interleaved with its baseline, repeated, and reported as a median with
its spread (min-max). Writes bench/results.json and bench/chart.svg.
"""

import json
import os
import re
import statistics
import subprocess
import tempfile
import time

ROUNDS = int(os.environ.get("BENCH_ROUNDS", 5))
HOT_ROUNDS = 3 * ROUNDS
HERE = os.path.dirname(os.path.abspath(__file__))
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
PGBENCH = os.path.join(PGBIN, "pgbench")


def psql(sql, db="postgres"):
    out = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", db], input=sql,
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def timed_session(statements):
    """Runs statements in ONE psql session with \\timing; returns the ms of each."""
    script = "\\timing on\n" + "".join(s.rstrip(";") + ";\n" for s in statements)
    out = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"], input=script,
                         check=True, capture_output=True, text=True).stdout
    times = [float(t) for t in re.findall(r"^Time: ([0-9.]+) ms", out, re.M)]
    assert len(times) == len(statements), out
    return times


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


SETUP = """
CREATE EXTENSION IF NOT EXISTS snowflake_id;
CREATE SEQUENCE IF NOT EXISTS plain;
CREATE SCHEMA IF NOT EXISTS insta5;
CREATE SEQUENCE IF NOT EXISTS insta5.table_id_seq;
-- Instagram's 2011 PL/pgSQL, with shard_id widened to bigint so the shift cannot overflow.
CREATE OR REPLACE FUNCTION insta5.next_id(OUT result bigint) AS $$
DECLARE our_epoch bigint := 1314220021721; seq_id bigint; now_millis bigint; shard_id bigint := 5;
BEGIN
    SELECT nextval('insta5.table_id_seq') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END; $$ LANGUAGE PLPGSQL;
DROP TABLE IF EXISTS ids;
CREATE TABLE ids AS SELECT make_id(timestamptz '2024-01-01' + g * interval '37 ms', g % 8192, g % 1024) AS id
  FROM generate_series(1, 1000000) g;
VACUUM ANALYZE ids;
"""

# Baselines for the "Choosing an ID scheme" table: what people write in SQL for each scheme.
# Flickr's ticket servers are two PostgreSQL servers, one `INCREMENT 2 START 1`, the other
# `START 2`: locally a nextval() (plus, in production, a round trip to a ticket server).
SCHEMES_SETUP = """
CREATE SEQUENCE IF NOT EXISTS flickr_odd INCREMENT 2 START 1;
CREATE SEQUENCE IF NOT EXISTS tsid_seq;
-- UUID v7 in SQL: a v4 with its first 48 bits replaced by Unix ms and the version set to 7.
CREATE OR REPLACE FUNCTION uuidv7_sql() RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
           PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
           FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
-- ULID in PL/pgSQL: 48-bit Unix ms and 80 random bits, Crockford base32.
CREATE OR REPLACE FUNCTION ulid_sql() RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  enc CONSTANT text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  t bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
  r bytea := substring(uuid_send(gen_random_uuid()) FROM 7 FOR 10);
  s text := '';
BEGIN
  FOR i IN REVERSE 9..0 LOOP s := s || substr(enc, ((t >> (5 * i)) & 31)::int + 1, 1); END LOOP;
  FOR i IN 0..15 LOOP
    s := s || substr(enc, get_bit(r, 5 * i) * 16 + get_bit(r, 5 * i + 1) * 8 + get_bit(r, 5 * i + 2) * 4
                          + get_bit(r, 5 * i + 3) * 2 + get_bit(r, 5 * i + 4) + 1, 1);
  END LOOP;
  RETURN s;
END $$;
-- TSID in SQL: ms since 2020-01-01 << 22 | node 5 << 12 | a counter (nextval % 4096).
CREATE OR REPLACE FUNCTION tsid_sql() RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT ((floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1577836800000) << 22)
         | (5 << 12) | (nextval('tsid_seq') % 4096)
$$;
-- The baselines make what they claim: their times decode (with this extension) to now.
DO $$ BEGIN
  IF abs(extract(epoch FROM uuid_timestamp(uuidv7_sql()) - clock_timestamp())) > 1
     OR abs(extract(epoch FROM ulid_timestamp(ulid_sql()) - clock_timestamp())) > 1
     OR abs(extract(epoch FROM id_timestamp(tsid_sql(), 'tsid') - clock_timestamp())) > 1 THEN
    RAISE EXCEPTION 'a baseline generator does not make its scheme';
  END IF;
END $$;
DROP TABLE IF EXISTS wide;
CREATE TABLE wide AS SELECT uuidv7_sql() AS u, lpad(to_hex(1350336377 + g), 8, '0') || '0123456789abcdef' AS oid
  FROM generate_series(1, 1000000) g;
VACUUM ANALYZE wide;
"""

CALLS = "SELECT count({f}) FROM generate_series(1, 1000000)"
CALLS4 = "SELECT count({f}) FROM generate_series(1, 1000000) g"


def per_call(schemes=True, uuidv7=False):
    """1M calls per statement, interleaved rounds. next_id gets fresh sequences per run, so
    that each run starts at the clock: 1M IDs use ~977 ms of ID time (~244 ms in Twitter's
    layout), within max_lead, so no run waits for the clock and the figure is the per-call
    cost. The "4 sequences" rows take the sequences in rotation, call after call (what a
    statement writing to several tables does), against their own empty baseline with the
    same rotation. With `schemes`, also the baselines of the "Choosing an ID scheme" table;
    with `uuidv7`, PostgreSQL 18's built-in uuidv7()."""
    four = "'{{{0}0,{0}1,{0}2,{0}3}}'::regclass[]"
    psql("".join(f"CREATE SEQUENCE IF NOT EXISTS plain{i};" for i in range(4)))
    calls = {
        "empty generate_series": "SELECT count(*) FROM generate_series(1, 1000000)",
        "nextval()": CALLS.format(f="nextval('plain')"),
        "next_id()": CALLS.format(f="next_id(5, 'fresh{r}')"),
        "Instagram PL/pgSQL": CALLS.format(f="insta5.next_id()"),
        "gen_random_uuid()": CALLS.format(f="gen_random_uuid()"),
        "empty, 4 sequences in rotation": CALLS4.format(f=f"({four.format('plain')})[g % 4 + 1]"),
        "nextval(), 4 sequences in rotation": CALLS4.format(f=f"nextval(({four.format('plain')})[g % 4 + 1])"),
        "next_id(), 4 sequences in rotation": CALLS4.format(f="next_id(5, (" + four.format("fresh{r}_") + ")[g % 4 + 1])"),
    }
    if uuidv7:
        calls["uuidv7()"] = CALLS.format(f="uuidv7()")
    if schemes:
        calls.update({
            "next_id() twitter": CALLS.format(f="next_id(5, 'fresh_tw{r}', 'twitter', '2026-01-01+00')"),
            "Flickr ticket (nextval INCREMENT 2)": CALLS.format(f="nextval('flickr_odd')"),
            "UUID v7 in SQL": CALLS.format(f="uuidv7_sql()"),
            "ULID in PL/pgSQL": CALLS.format(f="ulid_sql()"),
            "TSID in SQL": CALLS.format(f="tsid_sql()"),
        })
    # The hot path's rows run twice per round, forward then in reverse order at the end of the
    # round (on sequences of their own), and each takes the mean of its two: a machine that
    # speeds up or slows down during the round then shifts a row and its baselines alike.
    # They are cheap, so they also get HOT_ROUNDS rounds in all (the first ROUNDS with every
    # row, the rest with theirs only): their ratios are the bar's, a few percent apart.
    hot = [n for n in calls if "next_id()" in n or "nextval()" in n or n.startswith("empty")]
    times = {n: [] for n in calls}
    for r in range(max(ROUNDS, HOT_ROUNDS)):
        for tag in (str(r), f"{r}b"):
            psql(f"DROP SEQUENCE IF EXISTS fresh{tag}; CREATE SEQUENCE fresh{tag};"
                 f"DROP SEQUENCE IF EXISTS fresh_tw{tag}; CREATE SEQUENCE fresh_tw{tag};"
                 + "".join(f"DROP SEQUENCE IF EXISTS fresh{tag}_{i}; CREATE SEQUENCE fresh{tag}_{i};" for i in range(4)))
        rows = list(calls) if r < ROUNDS else hot
        stmts = [calls[n].replace("{r}", str(r)) for n in rows]
        stmts += [calls[n].replace("{r}", f"{r}b") for n in reversed(hot)]
        measured = timed_session(stmts)
        forward, backward = dict(zip(rows, measured)), dict(zip(reversed(hot), measured[len(rows):]))
        for name in rows:
            times[name].append((forward[name] + backward[name]) / 2 if name in backward else forward[name])
    return {n: summary(v) for n, v in times.items()}


# The decoders taking a layout, each beside the SQL arithmetic people write for it.
LAYOUT_DECODERS = {
    "id_timestamp(id, 'discord')": "SELECT count(id_timestamp(id, 'discord')) FROM ids",
    "SQL arithmetic discord timestamp": "SELECT count(to_timestamp(((id >> 22) + 1420070400000) / 1000.0)) FROM ids",
    "id_decode(id, 'discord')": "SELECT count(d) FROM ids, id_decode(id, 'discord') d",
    "SQL arithmetic discord decode": "SELECT count(d) FROM ids, LATERAL (SELECT to_timestamp(((id >> 22) + 1420070400000) / 1000.0) AS ts, "
                                     "jsonb_build_object('worker', (id >> 17) & 31, 'process', (id >> 12) & 31, 'increment', id & 4095) AS fields) d",
    "uuid_timestamp(v7)": "SELECT count(uuid_timestamp(u)) FROM wide",
    "SQL arithmetic uuid v7": "SELECT count(to_timestamp(('x' || substr(replace(u::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)) FROM wide",
    "objectid_timestamp()": "SELECT count(objectid_timestamp(oid)) FROM wide",
    "SQL arithmetic objectid": "SELECT count(to_timestamp(('x' || substr(oid, 1, 8))::bit(32)::bigint)) FROM wide",
}


def decoders(rounds=3 * ROUNDS, layouts=True):
    """Each round runs the scans back to back; a ratio is taken within a round (the decoder
    against its SQL arithmetic, moments apart), and the median over the rounds."""
    pairs = {
        "id_timestamp()": "SELECT count(id_timestamp(id)) FROM ids",
        "SQL arithmetic timestamp": "SELECT count(to_timestamp(((id >> 23) + 1314220021721) / 1000.0)) FROM ids",
        "id_shard()": "SELECT count(id_shard(id)) FROM ids",
        "SQL arithmetic shard": "SELECT count((id >> 10) & 8191) FROM ids",
        "scan only": "SELECT count(id) FROM ids",
        **(LAYOUT_DECODERS if layouts else {}),
    }
    times = {n: [] for n in pairs}
    timed_session(["SELECT count(*) FROM ids"])  # warm the cache
    for _ in range(rounds):
        for name, t in zip(pairs, timed_session(list(pairs.values()))):
            times[name].append(t)
    return {n: summary(v) for n, v in times.items()}


def apps(rounds=3 * ROUNDS):
    """The application functions per call, against next_id and id::text, 1M calls each on
    realistic IDs (4 x 10^18 up), interleaved in rounds; and json_agg of 1M IDs as bigint
    (JSON numbers) vs as snowflake (strings, through the cast to json)."""
    key = "'000102030405060708090a0b0c0d0e0f'"
    gs = "generate_series(4000000000000000000, 4000000000000999999) g"
    stmts = {
        "empty generate_series": f"SELECT count(g) FROM {gs}",
        "g::text": f"SELECT count(g::text) FROM {gs}",
        "id_to_text()": f"SELECT count(id_to_text(g)) FROM {gs}",
        "id_from_text()": "SELECT count(id_from_text(t)) FROM id_texts",
        "scan id_texts": "SELECT count(t) FROM id_texts",
        "id_mask(id, key)": f"SELECT count(id_mask(g, {key})) FROM {gs}",
        "next_id()": "SELECT count(next_id(5, 'apps{r}')) FROM generate_series(1, 1000000)",
        "empty generate_series (int)": "SELECT count(*) FROM generate_series(1, 1000000)",
        "json_agg bigint": "SELECT length(json_agg(id)::text) FROM ids",
        "json_agg snowflake": "SELECT length(json_agg(id::snowflake)::text) FROM ids",
    }
    psql(f"DROP TABLE IF EXISTS id_texts; CREATE TABLE id_texts AS SELECT id_to_text(g) AS t FROM {gs}; VACUUM ANALYZE id_texts")
    times = {n: [] for n in stmts}
    for r in range(rounds):
        psql(f"DROP SEQUENCE IF EXISTS apps{r}; CREATE SEQUENCE apps{r}")
        for name, t in zip(stmts, timed_session([q.replace("{r}", str(r)) for q in stmts.values()])):
            times[name].append(t)
    return {n: summary(v) for n, v in times.items()}


def apps_ratios(a):
    """Per call, net of each statement's empty baseline, within rounds."""
    net = {"g::text": "empty generate_series", "id_to_text()": "empty generate_series",
           "id_mask(id, key)": "empty generate_series", "id_from_text()": "scan id_texts",
           "next_id()": "empty generate_series (int)"}
    per = {n: [a[n]["runs"][i] - a[b]["runs"][i] for i in range(len(a[n]["runs"]))] for n, b in net.items()}
    ratio = lambda x, y: statistics.median(p / q for p, q in zip(per[x], per[y]))
    return {
        "per call, ns (median net)": {n: statistics.median(v) for n, v in per.items()},  # ms per 1M calls = ns per call
        "id_to_text / id::text (per call)": ratio("id_to_text()", "g::text"),
        "id_to_text / next_id (per call)": ratio("id_to_text()", "next_id()"),
        "id_mask / next_id (per call)": ratio("id_mask(id, key)", "next_id()"),
        "id_mask / id::text (per call)": ratio("id_mask(id, key)", "g::text"),
        "id_from_text / id_to_text (per call)": ratio("id_from_text()", "id_to_text()"),
        "json_agg snowflake / bigint (1M IDs)": statistics.median(
            s / b for s, b in zip(a["json_agg snowflake"]["runs"], a["json_agg bigint"]["runs"])),
    }


def round_ratios(times, a, b, base=None):
    """a/b within each round (each net of `base` in that round, if given)."""
    net = (lambda n, i: times[n]["runs"][i] - times[base]["runs"][i]) if base else (lambda n, i: times[n]["runs"][i])
    return [net(a, i) / net(b, i) for i in range(len(times[a]["runs"]))]


def paired(times, a, b, base=None):
    """Median over rounds of a/b measured in the same round (net of `base` if given)."""
    return statistics.median(round_ratios(times, a, b, base))


def saturation(seconds=10):
    """One session issuing 1M-ID statements back to back on one sequence for `seconds`."""
    psql("DROP SEQUENCE IF EXISTS sat; CREATE SEQUENCE sat")
    stmt = "SELECT count(next_id(1, 'sat')) FROM generate_series(1, 1000000)"
    probe = "SELECT round(extract(epoch FROM id_timestamp(last_value) - clock_timestamp()) * 1000) FROM sat"
    script = "\\timing on\n" + (stmt + ";\n" + probe + ";\n") * 1
    samples, leads = [], []
    start = time.time()
    while time.time() - start < seconds:
        out = subprocess.run(["psql", "-X", "-q", "-At"], input=script, check=True,
                             capture_output=True, text=True).stdout
        ms = [float(t) for t in re.findall(r"^Time: ([0-9.]+) ms", out, re.M)][0]
        lead = float([line for line in out.splitlines() if re.fullmatch(r"-?[0-9.]+", line)][-1])
        samples.append(ms)
        leads.append(lead)
    total_ms = sum(samples)
    # Statements that began and ended with the lead at its bound: the sustained rate.
    steady = [ms for ms, before, after in zip(samples[1:], leads, leads[1:]) if before >= 990 and after >= 990]
    return {
        "statements": len(samples),
        "ids_per_second_overall": 1_000_000 * len(samples) / (total_ms / 1000),
        "ids_per_second_at_the_lead_bound": (1_000_000 * len(steady) / (sum(steady) / 1000)) if steady else None,
        "ceiling_ids_per_second": 1_024_000,
        "lead_ms_after_each_statement": leads,
        "max_lead_ms": max(leads),
        "max_lead_setting_ms": 1000,
    }


def pgbench(script_text, clients, seconds, extra=(), env=None):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script_text)
    out = subprocess.run([PGBENCH, "-n", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds),
                          *extra, "-f", f.name, "postgres"], check=True, capture_output=True, text=True,
                         env=env).stdout
    os.unlink(f.name)
    tps = float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out).group(1))
    failed = re.search(r"number of failed transactions: ([0-9]+)", out)
    assert failed is None or failed.group(1) == "0", out
    return tps


def concurrency(seconds=3):
    for i in range(8):
        psql(f"DROP SEQUENCE IF EXISTS c{i}; CREATE SEQUENCE c{i}")
    psql("DROP SEQUENCE IF EXISTS one; CREATE SEQUENCE one")
    scripts = {
        "next_id, one shard": "SELECT count(next_id(1, 'one')) FROM generate_series(1, 1000);",
        "next_id, a shard per session": "SELECT count(next_id(:client_id, ('c' || :client_id)::regclass)) FROM generate_series(1, 1000);",
        "nextval, one sequence": "SELECT count(nextval('one')) FROM generate_series(1, 1000);",
    }
    result = {}
    for clients in (1, 2, 4, 8):
        for name, text in scripts.items():
            result.setdefault(name, {})[clients] = pgbench(text, clients, seconds) * 1000
    return result


def insert_instructions(counts=(1000, 3000), rows=1):
    """Instructions and L1 instruction-cache misses per single-row INSERT in the backend,
    counted by valgrind's callgrind: a single-user backend (no client, no network) on a
    cluster of its own runs `counts[0]` and then `counts[1]` INSERTs into one table, and the
    marginal cost between the two is one INSERT's, with its transaction (with `rows` > 1, an
    INSERT ... SELECT of that many rows, and the count is per row). Unlike throughput,
    a count does not wander with the machine: the same build and input count the same."""
    if subprocess.run(["sh", "-c", "command -v valgrind"], capture_output=True).returncode:
        return None
    tables = {"bigserial": "id bigserial PRIMARY KEY",
              "DEFAULT next_id(seq)": "id bigint PRIMARY KEY DEFAULT next_id('t_shard_seq')",
              "DEFAULT next_id": "id bigint PRIMARY KEY DEFAULT next_id(5, 't_seq')"}
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        data = os.path.join(d, "data")
        as_postgres = ["sudo", "-u", "postgres"] if os.geteuid() == 0 else []
        subprocess.run(as_postgres + [os.path.join(PGBIN, "initdb"), "-D", data, "-A", "trust", "-U", "postgres",
                                      "--no-sync"], check=True, capture_output=True)

        def single_user(script, wrapper=()):
            path = os.path.join(d, "script.sql")
            with open(path, "w") as f:
                f.write(script)
            with open(path) as f:
                subprocess.run(as_postgres + list(wrapper) + [
                    os.path.join(PGBIN, "postgres"), "--single", "-D", data, "-c", "checkpoint_timeout=1h",
                    "-c", "max_wal_size=10GB", "postgres"], stdin=f, check=True, capture_output=True)

        single_user("CREATE EXTENSION snowflake_id;\nCREATE SEQUENCE t_seq;\nCREATE SEQUENCE t_shard_seq;\n"
                    "SELECT setval('t_shard_seq', make_id(now(), 5));\n"
                    + "".join(f"CREATE TABLE t{i} ({column}, body text);\n" for i, column in enumerate(tables.values())))
        result = {}
        for i, name in enumerate(tables):
            totals = []
            for n in counts:
                out = os.path.join(d, f"callgrind.{i}.{n}")
                statement = (f"INSERT INTO t{i} (body) VALUES ('x');\n" if rows == 1 else
                             f"INSERT INTO t{i} (body) SELECT 'x' FROM generate_series(1, {rows});\n")
                single_user("SET synchronous_commit = off;\n" + statement * n,
                            ["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={out}"])
                text = open(out).read()
                events = re.search(r"^events: (.*)$", text, re.M).group(1).split()
                total = [int(v) for v in re.search(r"^(?:summary|totals): (.*)$", text, re.M).group(1).split()]
                totals.append(dict(zip(events, total)))
            per = {e: (totals[1][e] - totals[0][e]) / (counts[1] - counts[0]) / rows for e in ("Ir", "I1mr")}
            result[name] = {"instructions": round(per["Ir"]), "l1i_misses": round(per["I1mr"], 1)}
    return result


def inserts(seconds=6, clients=4, rounds=2 * ROUNDS, uuidv7=False, rows=1):
    """INSERTs of `rows` rows (one: VALUES; more: INSERT ... SELECT from generate_series)
    into the tables, mixed in ONE pgbench run: each transaction
    picks a table at random, so all three share the same moments of the machine. Run to run,
    even `SELECT 1` moves by +-15% on a small VM, far more than the few percent to compare;
    within a run the three see the same noise. From pgbench's per-transaction log, each
    table's mean latency; its throughput is then `clients / mean latency`, what it would
    sustain alone. synchronous_commit=off, so that the figure is the cost of making the key
    rather than the disk's fsync jitter."""
    env = dict(os.environ, PGOPTIONS="-c synchronous_commit=off")
    psql("""
    DROP TABLE IF EXISTS t_next_id, t_bigserial, t_uuid;
    DROP SEQUENCE IF EXISTS t_seq;
    CREATE SEQUENCE t_seq;
    CREATE TABLE t_next_id (id bigint PRIMARY KEY DEFAULT next_id(5, 't_seq'), body text);
    DROP TABLE IF EXISTS t_next_id_seq;
    DROP SEQUENCE IF EXISTS t_shard_seq;
    CREATE SEQUENCE t_shard_seq;
    SELECT setval('t_shard_seq', make_id(now(), 5));
    CREATE TABLE t_next_id_seq (id bigint PRIMARY KEY DEFAULT next_id('t_shard_seq'), body text);
    CREATE TABLE t_bigserial (id bigserial PRIMARY KEY, body text);
    DROP TABLE IF EXISTS t_bigserial_again;
    CREATE TABLE t_bigserial_again (id bigserial PRIMARY KEY, body text);
    CREATE TABLE t_uuid (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), body text);
    DROP TABLE IF EXISTS t_uuidv7;
    """)
    # "bigserial, again" is the A/A control: a second bigserial table, the spread a ratio
    # shows between identical tables.
    names = {"DEFAULT next_id": "t_next_id", "DEFAULT next_id(seq)": "t_next_id_seq", "bigserial": "t_bigserial",
             "bigserial, again": "t_bigserial_again", "uuid DEFAULT gen_random_uuid()": "t_uuid"}
    if uuidv7:  # PostgreSQL 18's built-in, time-ordered
        psql("CREATE TABLE t_uuidv7 (id uuid PRIMARY KEY DEFAULT uuidv7(), body text)")
        names["uuid DEFAULT uuidv7()"] = "t_uuidv7"
    tps = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as d:
        for i, table in enumerate(names.values()):
            with open(os.path.join(d, f"{i}.sql"), "w") as f:
                f.write(f"INSERT INTO {table} (body) VALUES ('x');\n" if rows == 1 else
                        f"INSERT INTO {table} (body) SELECT 'x' FROM generate_series(1, {rows});\n")
        for r in range(rounds):
            logdir = os.path.join(d, f"log{r}")
            os.mkdir(logdir)
            scripts = [a for i in range(len(names)) for a in ("-f", os.path.join(d, f"{i}.sql"))]
            subprocess.run([PGBENCH, "-n", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds),
                            "-l", *scripts, "postgres"], check=True, capture_output=True, text=True,
                           env=env, cwd=logdir)
            latencies = {i: [] for i in range(len(names))}
            for log in os.listdir(logdir):  # client, xact, latency us, script, epoch s, us
                for line in open(os.path.join(logdir, log)):
                    fields = line.split()
                    latencies[int(fields[3])].append(int(fields[2]))
            for i, name in enumerate(names):
                tps[name].append(clients / (statistics.mean(latencies[i]) / 1e6))

    def over_bigserial(name):  # within each run
        return [a / b for a, b in zip(tps[name], tps["bigserial"])]

    sizes = {}
    for name, table in names.items() if rows == 1 else ():
        psql(f"TRUNCATE {table}; INSERT INTO {table} (body) SELECT 'x' FROM generate_series(1, 1000000); VACUUM ANALYZE {table}")
        sizes[name] = {"table_bytes": int(psql(f"SELECT pg_table_size('{table}')")),
                       "index_bytes": int(psql(f"SELECT pg_indexes_size('{table}')"))}
    return {"tps": {n: summary(v) for n, v in tps.items()},
            "next_id_over_bigserial_per_run": summary(over_bigserial("DEFAULT next_id")),
            "next_id_seq_over_bigserial_per_run": summary(over_bigserial("DEFAULT next_id(seq)")),
            "bigserial_again_over_bigserial_per_run": summary(over_bigserial("bigserial, again")),
            "sizes_after_1M_rows": sizes, "clients": clients, "seconds": seconds, "rows_per_statement": rows,
            "synchronous_commit": "off", "method": "the tables mixed in one pgbench run per round"}


def chart(everything, path):
    """Horizontal bars: cost per call relative to nextval() in the same round (median,
    min-max), per PostgreSQL version; 1.0 is nextval(). The ID schemes' baselines are shown
    for the first version measured."""
    rows = []
    for n, (major, results) in enumerate(everything.items()):
        pc = results["per_call"]
        base = "empty generate_series"
        series = [("next_id()", "next_id()", "nextval()", base),
                  ("next_id(), 4 sequences", "next_id(), 4 sequences in rotation",
                   "nextval(), 4 sequences in rotation", "empty, 4 sequences in rotation"),
                  ("gen_random_uuid()", "gen_random_uuid()", "nextval()", base),
                  ("uuidv7()", "uuidv7()", "nextval()", base)]
        if n == 0:
            series += [(x, x, "nextval()", base) for x in
                       ["Flickr ticket (nextval INCREMENT 2)", "next_id() twitter", "TSID in SQL",
                        "UUID v7 in SQL", "Instagram PL/pgSQL", "ULID in PL/pgSQL"]]
        for label, a, b, empty in series:
            if a in pc:
                ratios = round_ratios(pc, a, b, empty)
                rows.append((f"PG {major}: {label}", statistics.median(ratios), min(ratios), max(ratios), label))
    width, left, bar_h, gap = 820, 300, 20, 8
    scale = (width - left - 80) / max(r[3] for r in rows)
    height = 60 + len(rows) * (bar_h + gap)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">Cost per call vs nextval() in the same round (1M calls, median of {ROUNDS}, min-max)</text>']
    x1 = left + scale
    svg.append(f'<line x1="{x1:.1f}" x2="{x1:.1f}" y1="32" y2="{height - 8}" stroke="#c33" stroke-dasharray="4 3"/>')
    for i, (name, med, lo, hi, label) in enumerate(rows):
        y = 40 + i * (bar_h + gap)
        colour = "#2b7bb9" if label.startswith("next_id") else "#9aa5b1"
        svg.append(f'<text x="{left - 8}" y="{y + bar_h * 0.75}" text-anchor="end">{name}</text>')
        svg.append(f'<rect x="{left}" y="{y}" width="{med * scale:.1f}" height="{bar_h}" fill="{colour}"/>')
        svg.append(f'<line x1="{left + lo * scale:.1f}" x2="{left + hi * scale:.1f}" y1="{y + bar_h / 2}" y2="{y + bar_h / 2}" stroke="black"/>')
        svg.append(f'<text x="{left + max(hi, med) * scale + 6:.1f}" y="{y + bar_h * 0.75}">{med:.2f}x</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def hot_path_only():
    """`bench.py hot-path`: next_id(shard, seq) against nextval() only, the figures that must
    not move when the generator changes (run it on the old build, then the new one)."""
    psql(SETUP.split("DROP TABLE IF EXISTS ids;")[0])  # no decoder table needed
    pc = per_call(schemes=False)
    ratios = round_ratios(pc, "next_id()", "nextval()", "empty generate_series")
    print(f"next_id / nextval per call (net): median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}; "
          f"next_id {pc['next_id()']['median']:.0f} ms, nextval {pc['nextval()']['median']:.0f} ms, "
          f"empty {pc['empty generate_series']['median']:.0f} ms per 1M")


def print_apps(r):
    for k, v in r.items():
        print(f"{k:60s} {v:6.3f}" if isinstance(v, float) else f"{k}: " + ", ".join(f"{n} {x:.0f}" for n, x in v.items()))


def server_major():
    return int(psql("SHOW server_version_num")) // 10000


def save(major, update):
    """results.json holds one entry per PostgreSQL version; `update(entry)` changes this
    run's version's entry. Returns every version's results."""
    path = os.path.join(HERE, "results.json")
    everything = json.load(open(path)) if os.path.exists(path) else {}
    if "postgres" in everything:  # the single-version layout of 0.1.0's benchmark
        everything = {}
    update(everything.setdefault(str(major), {}))
    everything = dict(sorted(everything.items(), key=lambda kv: int(kv[0])))
    with open(path, "w") as f:
        json.dump(everything, f, indent=2)
    return everything


def main_apps():
    """`python3 bench/bench.py apps`: only the application functions, merged into results.json."""
    psql(SETUP)
    a = apps()
    r = apps_ratios(a)
    save(server_major(), lambda e: e.update(apps=a, apps_ratios=r))
    print_apps(r)


def main():
    started = time.time()
    psql(SETUP)
    psql(SCHEMES_SETUP)
    major = server_major()
    v7 = major >= 18
    results = {"postgres": psql("SHOW server_version"), "rounds": ROUNDS}
    results["per_call"] = per_call(uuidv7=v7)
    results["decoders"] = decoders()
    results["saturation"] = saturation()
    results["concurrency_ids_per_second"] = concurrency()
    results["inserts"] = inserts(uuidv7=v7)
    results["inserts_100_rows"] = inserts(uuidv7=v7, rows=100)
    results["insert_instructions"] = insert_instructions()
    results["insert_instructions_100_rows"] = insert_instructions(counts=(100, 300), rows=100)
    results["apps"] = apps()
    results["apps_ratios"] = apps_ratios(results["apps"])
    pc = results["per_call"]
    base = "empty generate_series"
    dec = results["decoders"]
    ins = results["inserts"]
    # Each ratio is the median over rounds of the ratio within a round: the machine's noise
    # (a small VM: even `SELECT 1` moves by +-15% from second to second) cancels in a round.
    results["ratios"] = {
        "next_id / nextval (whole statement)": paired(pc, "next_id()", "nextval()"),
        "next_id / nextval (per call, net of the empty baseline)": paired(pc, "next_id()", "nextval()", base),
        "next_id / nextval, 4 sequences in rotation (per call, net)": paired(
            pc, "next_id(), 4 sequences in rotation", "nextval(), 4 sequences in rotation", "empty, 4 sequences in rotation"),
        "PL/pgSQL / next_id (per call, net)": paired(pc, "Instagram PL/pgSQL", "next_id()", base),
        "gen_random_uuid / next_id (per call, net)": paired(pc, "gen_random_uuid()", "next_id()", base),
        "id_timestamp / SQL arithmetic (whole statement)": paired(dec, "id_timestamp()", "SQL arithmetic timestamp"),
        "id_shard / SQL arithmetic (whole statement)": paired(dec, "id_shard()", "SQL arithmetic shard"),
        "id_shard / SQL arithmetic (net of the scan)": paired(dec, "id_shard()", "SQL arithmetic shard", "scan only"),
        "id_timestamp(id, 'discord') / SQL arithmetic (whole statement)": paired(dec, "id_timestamp(id, 'discord')", "SQL arithmetic discord timestamp"),
        "id_decode(id, 'discord') / SQL arithmetic (whole statement)": paired(dec, "id_decode(id, 'discord')", "SQL arithmetic discord decode"),
        "uuid_timestamp(v7) / SQL arithmetic (whole statement)": paired(dec, "uuid_timestamp(v7)", "SQL arithmetic uuid v7"),
        "objectid_timestamp / SQL arithmetic (whole statement)": paired(dec, "objectid_timestamp()", "SQL arithmetic objectid"),
        "next_id twitter / next_id instagram (per call, net)": paired(pc, "next_id() twitter", "next_id()", base),
        "saturated shard / layout ceiling (at the lead bound)": (results["saturation"]["ids_per_second_at_the_lead_bound"] or 0) / 1_024_000,
        "INSERT tps next_id / bigserial": ins["next_id_over_bigserial_per_run"]["median"],
        "INSERT tps next_id(seq) / bigserial": ins["next_id_seq_over_bigserial_per_run"]["median"],
        "INSERT tps bigserial (A/A control) / bigserial": ins["bigserial_again_over_bigserial_per_run"]["median"],
        "INSERT 100 rows tps next_id / bigserial": results["inserts_100_rows"]["next_id_over_bigserial_per_run"]["median"],
        "INSERT 100 rows tps next_id(seq) / bigserial": results["inserts_100_rows"]["next_id_seq_over_bigserial_per_run"]["median"],
        "INSERT 100 rows tps bigserial (A/A control) / bigserial": results["inserts_100_rows"]["bigserial_again_over_bigserial_per_run"]["median"],
        "index size next_id / bigserial": ins["sizes_after_1M_rows"]["DEFAULT next_id"]["index_bytes"] / ins["sizes_after_1M_rows"]["bigserial"]["index_bytes"],
    }
    if v7:
        results["ratios"]["uuidv7 / next_id (per call, net)"] = paired(pc, "uuidv7()", "next_id()", base)
        results["ratios"]["INSERT tps next_id / uuidv7"] = statistics.median(
            a / b for a, b in zip(ins["tps"]["DEFAULT next_id"]["runs"], ins["tps"]["uuid DEFAULT uuidv7()"]["runs"]))
    # Cost per call of each scheme's generator, net of the empty generate_series, in ns.
    results["ns_per_call_net"] = {n: statistics.median(
        [pc[n]["runs"][i] - pc[base]["runs"][i] for i in range(ROUNDS)]) for n in pc if n != base}
    results["measurement_seconds"] = time.time() - started
    if "BENCH_STARTED" in os.environ:  # set by scripts/bench: set-up and build included
        results["command_seconds"] = time.time() - float(os.environ["BENCH_STARTED"])
    # One file for every version: this run replaces its own version's entry.
    everything = save(major, lambda e: (e.clear(), e.update(results)))
    chart(everything, os.path.join(HERE, "chart.svg"))
    for k, v in results["ratios"].items():
        print(f"{k:66s} {v:6.3f}")
    for k, v in results["ns_per_call_net"].items():
        print(f"{k:40s} {v:8.0f} ns per call (net)")
    print_apps(results["apps_ratios"])
    print(f"saturation: overall {results['saturation']['ids_per_second_overall']:.0f} IDs/s, max lead {results['saturation']['max_lead_ms']} ms")
    for name, per in results["concurrency_ids_per_second"].items():
        print(f"{name:32s} " + "  ".join(f"{c}: {v:,.0f}/s" for c, v in per.items()))
    print(f"measurement {results['measurement_seconds']:.0f} s"
          + (f", whole command {results['command_seconds']:.0f} s" if "command_seconds" in results else ""))


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["hot-path"]:
        hot_path_only()
    elif sys.argv[1:] == ["apps"]:
        main_apps()
    elif sys.argv[1:] == ["instructions"]:
        print(json.dumps({"single-row": insert_instructions(),
                          "100 rows, per row": insert_instructions(counts=(100, 300), rows=100)}, indent=2))
    else:
        main()
