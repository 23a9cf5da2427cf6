// The Node part of bench/app_routing.sh: one session's single-row insert latency on a random
// shard of node_a's first 16, through node-postgres straight to the node (schema-qualified, in
// autocommit, and in BEGIN ... COMMIT), through the routing client of clients/node/routing.js
// (withShard: BEGIN; SELECT use_shard(n) in one round trip, the unqualified INSERT, COMMIT),
// and through the router (insert_post, PL/Proxy). Medians over interleaved rounds.
// Usage: node app_routing_node.js ROUTER_CONNSTR NODE_A_CONNSTR
const path = require('node:path');
const routing = path.join(__dirname, '..', 'clients', 'node', 'routing.js');
const { ShardRouter, connectionString } = require(routing);
const pg = require(require.resolve('pg', { paths: [path.dirname(routing)] }));

const [routerConnstr, nodeConnstr, out] = process.argv.slice(2);   // out: where to write the medians (JSON)
const N = 1000, ROUNDS = 3;
let seed = 1;
const shard = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 16;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

(async () => {
  const direct = new pg.Client({ connectionString: connectionString(nodeConnstr, {}) });
  const routed = new pg.Client({ connectionString: connectionString(routerConnstr, {}) });
  await direct.connect();
  await routed.connect();
  const app = await ShardRouter.connect({ router: routerConnstr, pool: { max: 1 } });
  const insert = 'INSERT INTO posts (user_id, body) VALUES ($1, $2) RETURNING id';
  const variants = {
    'pg direct': (s) => direct.query(`INSERT INTO shard_${s}.posts (user_id, body) VALUES ($1, $2) RETURNING id`, [1, 'bench']),
    'pg direct, BEGIN/COMMIT': async (s) => {
      await direct.query('BEGIN');
      await direct.query(`INSERT INTO shard_${s}.posts (user_id, body) VALUES ($1, $2) RETURNING id`, [1, 'bench']);
      await direct.query('COMMIT');
    },
    'routing.js withShard': (s) => app.withShard(s, (c) => c.query(insert, [1, 'bench'])),
    'pg via router': (s) => routed.query('SELECT insert_post($1, 1, $2)', [s, 'bench']),
  };
  const times = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, run] of Object.entries(variants)) {
      for (let i = 0; i < N; i++) {
        const s = shard(), t0 = process.hrtime.bigint();
        await run(s);
        times[name].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
  }
  const base = median(times['pg direct']);
  console.log(`Node, one session, single-row insert, median latency of ${N * ROUNDS} (ratio to pg direct):`);
  for (const [name, ts] of Object.entries(times)) {
    console.log(`  ${name.padEnd(24)} ${median(ts).toFixed(3)} ms (${(median(ts) / base).toFixed(2)}x)`);
  }
  if (out) {
    const medians = Object.fromEntries(Object.entries(times).map(([name, ts]) =>
      [name, { latency_ms: Number(median(ts).toFixed(4)), ratio_to_direct: Number((median(ts) / base).toFixed(3)) }]));
    require('fs').writeFileSync(out, JSON.stringify(medians, null, 1));
  }
  await Promise.all([direct.end(), routed.end(), app.end()]);
})().catch((e) => { console.error(e); process.exit(1); });
