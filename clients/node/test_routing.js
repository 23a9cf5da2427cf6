// The Node routing client (routing.js, docs/app-routing.md) on one server (PGHOST, PGPORT,
// PGUSER from clients/run.sh): a router database and three node databases; a shard moved by
// hand behind the client's back (the map changed, the shard's schema now on the other node) is
// found again through SF001, a 40001 is retried, other errors reach the caller at once. Under
// real moves: reliability/t_app_node_rust.sh. clients/test_routing.py does the same in Python.
const assert = require('node:assert');
const pg = require('pg');
const { ShardRouter, shardOf, parseConninfo, connectionString } = require('./routing.js');

const { PGHOST, PGPORT } = process.env;
const server = `host=${PGHOST} port=${PGPORT}`;
const router = 'rt_js', nodes = { n1: 'n1_js', n2: 'n2_js', n3: 'n3_js' };

/** Runs each statement (autocommit) on a database; the last one's rows. */
async function sql(db, ...statements) {
  const client = new pg.Client({ host: PGHOST, port: PGPORT, database: db });
  await client.connect();
  try {
    let result;
    for (const statement of statements) result = await client.query(statement);
    return result.rows;
  } finally {
    await client.end();
  }
}

let passed = 0;
const ok = (name, cond) => { assert.ok(cond, name); passed++; console.log(`ok: node: ${name}`); };
const rejects = async (promise) => { try { await promise; } catch (e) { return e; } return null; };

(async () => {
  ok('shardOf: bits 10..22 of the ID, from a string or BigInt', shardOf('9223372036854775807') === 8191 && shardOf(5n << 10n | 1023n) === 5);
  ok('connect strings: quoted values, the application\'s user in place of the map\'s',
     parseConninfo("host=/tmp/s dbname='a b' x='it\\'s'").x === "it's" &&
     connectionString('host=/tmp/s port=5 dbname=d user=postgres', { user: 'app' }) === 'postgresql:///d?host=%2Ftmp%2Fs&port=5&user=app');

  for (const db of [router, ...Object.values(nodes)]) await sql('postgres', `CREATE DATABASE ${db}`);
  // The application's role: nothing on the router; on the nodes the shards' tables, those made
  // later too (default privileges of the role that makes them).
  await sql('postgres', 'CREATE ROLE app_js LOGIN');
  for (const db of Object.values(nodes)) {
    await sql(db, 'CREATE EXTENSION snowflake_id', 'CREATE SCHEMA tpl',
      'CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text NOT NULL)',
      'ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO app_js',
      'ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE ON TABLES TO app_js',
      'ALTER DEFAULT PRIVILEGES GRANT USAGE ON SEQUENCES TO app_js');
  }
  await sql(nodes.n1, "SELECT create_shard('s_1', 1, template => 'tpl')", "SELECT create_shard('s_2', 2, template => 'tpl')");
  await sql(nodes.n2, "SELECT create_shard('s_3', 3, template => 'tpl')");
  await sql(router, 'SET client_min_messages = warning', 'CREATE EXTENSION snowflake_id_router CASCADE',
    `SELECT add_node('n1', '${server} dbname=${nodes.n1}')`, `SELECT add_node('n2', '${server} dbname=${nodes.n2}')`,
    "SELECT assign_shards(1, 2, 'n1')", "SELECT assign_shards(3, 1, 'n2')",
    "SELECT assign_shards(5, 20, 'n2')");   // (assigned, but no schema anywhere: as most of a real map)

  const app = await ShardRouter.connect({ router: `${server} dbname=${router}`, user: 'app_js', pool: { max: 2 } });
  ok('a role with no other right reads the map', app.nodeOf.size === 23 &&
     [1, 2, 3].map((s) => app.nodeOf.get(s)).join() === 'n1,n1,n2');
  ok('one pool per node, not per shard', app.pools.size === 2);

  const insert = (shard, body) => app.withShard(shard, async (c) =>
    (await c.query('INSERT INTO posts (body) VALUES ($1) RETURNING id', [body])).rows[0].id);
  const read = (id) => app.byId(id, async (c) => (await c.query('SELECT body FROM posts WHERE id = $1', [id])).rows[0]?.body);

  const ids = {};
  for (const s of [1, 2, 3]) ids[s] = await insert(s, `first on ${s}`);
  ok("each insert's ID is of its shard", [1, 2, 3].every((s) => shardOf(ids[s]) === s));
  ok("reads by ID reach each shard's node", (await Promise.all([1, 2, 3].map((s) => read(ids[s])))).every((b, i) => b === `first on ${i + 1}`));
  ok("the insert landed in the shard's schema", (await sql(nodes.n1, 'SELECT count(*)::int AS n FROM s_1.posts'))[0].n === 1);

  // Shard 2 moves to n2 behind the client's back: its schema there (rows and sequence carried
  // by hand), gone from n1, and the map changed. The client's map still names n1.
  const rows = await sql(nodes.n1, 'SELECT id, body FROM s_2.posts');
  const [{ last_value: last }] = await sql(nodes.n1, 'SELECT last_value FROM s_2.table_id_seq');
  await sql(nodes.n2, "SELECT create_shard('s_2', 2, template => 'tpl')",
    ...rows.map((r) => `INSERT INTO s_2.posts VALUES (${r.id}, '${r.body}')`), `SELECT setval('s_2.table_id_seq', ${last})`);
  await sql(nodes.n1, "SELECT drop_shard('s_2', cascade => true)");
  await sql(router, "UPDATE snowflake_id_router.shard SET node = 'n2' WHERE shard = 2");
  ok("the client's map is stale", app.nodeOf.get(2) === 'n1');
  ok('a read of the moved shard is answered (SF001 seen, map reloaded)',
     await read(ids[2]) === 'first on 2' && app.stats.SF001 === 1 && app.nodeOf.get(2) === 'n2');
  const moved = await insert(2, 'second on 2');
  ok('an insert on the moved shard lands on its new node',
     (await sql(nodes.n2, `SELECT body FROM s_2.posts WHERE id = ${moved}`))[0]?.body === 'second on 2' && BigInt(moved) > BigInt(ids[2]));
  const all = await app.fanOut('SELECT id, body FROM posts ORDER BY id');
  const want = [...Object.values(ids), moved].map(BigInt).sort((a, b) => (a < b ? -1 : 1)).map(String);
  ok('fan-out: every row of every shard, in ID order', all.map((r) => r.id).join() === want.join());

  // 40001 (a fence) is retried after a pause; any other error reaches the caller at once, and
  // a unit whose statement failed (the work caught it) is not reported committed.
  let runs = 0;
  const fenced = await app.withShard(1, async (c) => {
    if (++runs === 1) await c.query("DO $$ BEGIN RAISE EXCEPTION 'fenced' USING ERRCODE = '40001'; END $$");
    return (await c.query('INSERT INTO posts (body) VALUES ($1) RETURNING id', ['after a fence'])).rows[0].id;
  });
  ok('40001: the unit runs again, once committed', runs === 2 && app.stats['40001'] === 1 && await read(fenced) === 'after a fence');
  const dup = await rejects(app.withShard(1, (c) => c.query('INSERT INTO posts VALUES ($1, $2)', [fenced, 'twice'])));
  ok('another error (23505) reaches the caller, not retried', dup?.code === '23505' && app.stats['40001'] === 1);
  const swallowed = await rejects(app.withShard(1, async (c) => {
    await c.query('INSERT INTO posts (body) VALUES ($1)', ['lost']);
    await c.query('SELECT 1/0').catch(() => {});
  }));
  ok('a unit whose statement failed is not reported committed', /rolled back/.test(swallowed?.message) &&
     (await sql(nodes.n1, "SELECT count(*)::int AS n FROM s_1.posts WHERE body = 'lost'"))[0].n === 0);
  ok('a shard assigned to no node is refused', (await rejects(app.withShard(4, async () => 1)))?.constructor.name === 'UnassignedShardError');

  // A node added, and a shard assigned to it, since the client read the map: found by a reload.
  await sql(nodes.n3, "SELECT create_shard('s_4', 4, template => 'tpl')");
  await sql(router, `SELECT add_node('n3', '${server} dbname=${nodes.n3}')`, "SELECT assign_shards(4, 1, 'n3')");
  const onN3 = await insert(4, 'on a new node');
  ok('a shard on a node new to the map is reached', await read(onN3) === 'on a new node' && app.nodeOf.get(4) === 'n3' && app.pools.size === 3);

  // A shard in a move's cutover (here moved by hand from n2 to n3) is listed by no node while
  // the fan-out asks them: the shards the previous fan-out found run too, and are followed
  // through SF001 to where the shard went.
  await app.fanOut('SELECT id FROM posts');                 // (finds shard 3 on n2)
  const rows3 = await sql(nodes.n2, 'SELECT id, body FROM s_3.posts');
  await sql(nodes.n2, "SELECT drop_shard('s_3', cascade => true)");
  const feed = app.fanOut('SELECT id, body FROM posts ORDER BY id');
  await new Promise((resolve) => setTimeout(resolve, 300));
  await sql(nodes.n3, "SELECT create_shard('s_3', 3, template => 'tpl')",
    ...rows3.map((r) => `INSERT INTO s_3.posts VALUES (${r.id}, '${r.body}')`));
  await sql(router, "UPDATE snowflake_id_router.shard SET node = 'n3' WHERE shard = 3");
  ok('fan-out: a shard listed nowhere for a moment is found where it went',
     (await feed).some((r) => r.id === ids[3]) && app.nodeOf.get(3) === 'n3');
  await app.end();
  console.log(`node routing: ${passed} passed, 0 failed (SF001 ${app.stats.SF001}, 40001 ${app.stats['40001']}, map loads ${app.loads})`);
})().catch((e) => { console.error(e); process.exit(1); });
