// One application writing straight to the nodes, routing by shard itself through the Node
// client of clients/node/routing.js (reliability/t_app_node_rust.sh); reliability/app_router_client.py
// is the Python one, app_writer.rs (clients/rust/src/bin) the Rust one, all three alike.
//
// Inserts posts on random shards, updates its own earlier posts and reads them back by ID, and
// every 50 rounds reads all its posts with the client's fan-out (each must be there once, with
// its last acknowledged body, in ID order), until the deadline or LOG.stop. Each write it saw
// acknowledged is logged as reliability/router_check.py reads them:
// I <id> <shard> <body> <t0> <t_ack> 1  or  U <id> - <body> <t0> <t_ack> 1. A read must return
// the body of the post's last acknowledged write. Any error that reaches the application (the
// client retries SF001, 40001 and 40P01 itself) ends it with exit 1, naming it. Prints one line
// of counts (JSON) at the end. While LOG.pause exists it waits, its counts so far written to
// LOG.paused (reliability/t_app_no_router.sh).
// Usage: node app_node_client.js SOURCE USER CLIENT_NO SECONDS SHARDS LOG
// SOURCE: the router's connect string, or nodes:CONNSTR|CONNSTR... to read the map from those nodes
const fs = require('node:fs');
const path = require('node:path');
const { ShardRouter, shardOf } = require(path.join(__dirname, '..', 'clients', 'node', 'routing.js'));

const [source, user, client, seconds, shardList, logPath] = process.argv.slice(2);
const shards = shardList.split(',').map(Number);
const deadline = Date.now() + Number(seconds) * 1000;
let seed = Number(client);
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);   // repeatable per client
const pick = (list) => list[Math.floor(random() * list.length)];
const now = () => (Date.now() / 1000).toFixed(6);

(async () => {
  const app = await ShardRouter.connect({ ...(source.startsWith('nodes:')
    ? { nodes: source.slice('nodes:'.length).split('|') } : { router: source }), user, pool: { max: 2 } });
  const insert = (shard, body) => app.withShard(shard, async (c) =>
    (await c.query('INSERT INTO posts (user_id, body) VALUES ($1, $2) RETURNING id', [client, body])).rows[0].id);
  const update = (id, body) => app.byId(id, async (c) => {
    if ((await c.query('UPDATE posts SET body = $2 WHERE id = $1', [id, body])).rowCount !== 1) throw new Error(`update of ${id} found no row`);
  });
  const read = (id) => app.byId(id, async (c) => (await c.query('SELECT body FROM posts WHERE id = $1', [id])).rows[0]?.body);
  const mine = () => app.fanOut('SELECT id, body FROM posts WHERE user_id = $1 ORDER BY id', [client]);

  const last = new Map();   // id -> body of its last acknowledged write
  const counts = { inserts: 0, updates: 0, reads: 0, fan_outs: 0 };
  const summary = () => JSON.stringify({ kind: 'node', client: Number(client), ...counts,
    retried: { SF001: app.stats.SF001, '40001': app.stats['40001'], '40P01': app.stats['40P01'] }, map_loads: app.loads });
  const log = fs.openSync(logPath, 'w');
  try {
    for (let n = 1; Date.now() < deadline && !fs.existsSync(`${logPath}.stop`); n++) {
      while (fs.existsSync(`${logPath}.pause`)) {
        if (!fs.existsSync(`${logPath}.paused`)) {
          fs.writeFileSync(`${logPath}.paused.tmp`, summary());
          fs.renameSync(`${logPath}.paused.tmp`, `${logPath}.paused`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const body = `j${client}n${n}`, t0 = now();
      let post;
      if (last.size && random() < 0.3) {
        post = pick([...last.keys()]);
        await update(post, body);
        fs.writeSync(log, `U ${post} - ${body} ${t0} ${now()} 1\n`);
        counts.updates++;
      } else {
        const shard = pick(shards);
        post = await insert(shard, body);
        if (shardOf(post) !== shard) throw new Error(`ID ${post} made for shard ${shard} is of shard ${shardOf(post)}`);
        fs.writeSync(log, `I ${post} ${shard} ${body} ${t0} ${now()} 1\n`);
        counts.inserts++;
      }
      last.set(post, body);
      post = pick([...last.keys()]);
      const got = await read(post);
      if (got !== last.get(post)) throw new Error(`read of ${post} (shard ${shardOf(post)}) gave ${got}, its last write was ${last.get(post)}`);
      counts.reads++;
      if (n % 50 === 0) {     // every post of this client's, from every shard, in ID order
        const rows = (await mine()).map((r) => `${r.id} ${r.body}`).join();
        const want = [...last].sort(([a], [b]) => (BigInt(a) < BigInt(b) ? -1 : 1)).map(([id, b]) => `${id} ${b}`).join();
        if (rows !== want) throw new Error(`fan-out gave ${rows.split(',').length} posts, ${last.size} acknowledged, or another order`);
        counts.fan_outs++;
      }
    }
  } catch (error) {
    console.error(`node client ${client}: error reached the application: ${error.code ?? ''} ${error.message}`);
    process.exit(1);
  }
  fs.closeSync(log);
  await app.end();
  console.log(summary());
})().catch((error) => { console.error(`node client ${client}: ${error.stack}`); process.exit(1); });
