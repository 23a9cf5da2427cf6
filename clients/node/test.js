// The node-postgres recipe against a real server (PGHOST/PGPORT/PGUSER/PGDATABASE from run.sh).
const assert = require('node:assert');
const { demo, Client } = require('./recipe.js');

(async () => {
  const client = new Client();
  await client.connect();
  let passed = 0;
  const ok = (name, cond) => { assert.ok(cond, name); passed++; console.log(`ok: ${name}`); };

  const { ids, items } = await demo(client);
  ok('RETURNING id gives strings', ids.length === 5000 && ids.every((i) => typeof i === 'string'));
  const fromSql = (await client.query(`SELECT id::text AS id FROM js_item ORDER BY id`)).rows.map((r) => r.id);
  ok('json_agg round trip returns every ID exactly', items.length === 5000 &&
     items.every((it, n) => typeof it.id === 'string' && it.id === fromSql[n]));
  ok('and they are the IDs RETURNING gave', new Set(ids).size === 5000 && ids.every((i) => fromSql.includes(i)));
  ok('IDs are past 2^53', items.every((it) => BigInt(it.id) > 2n ** 53n));
  const one = (await client.query(`SELECT row_to_json(t) AS r, to_jsonb(t) AS b FROM js_item t ORDER BY id DESC LIMIT 1`)).rows[0];
  ok('row_to_json and to_jsonb too', one.r.id === fromSql[4999] && one.b.id === fromSql[4999]);
  const byParam = await client.query(`SELECT body FROM js_item WHERE id = $1`, [fromSql[17]]);
  ok('a string ID as a query parameter finds its row', byParam.rows.length === 1 && byParam.rows[0].body === 'item 18');

  // The problem it solves: the same IDs as bigint in json_agg lose digits in JSON.parse.
  const plain = (await client.query(`SELECT json_agg(id::bigint ORDER BY id) AS a FROM js_item`)).rows[0].a;
  const lost = plain.filter((v, n) => String(BigInt(v)) !== fromSql[n]).length;
  ok(`bigint in JSON loses precision (${lost} of 5000 changed): the type is needed`, lost > 0);

  await client.end();
  console.log(`node clients: ${passed} passed, 0 failed`);
})().catch((e) => { console.error(e); process.exit(1); });
