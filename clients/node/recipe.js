// Recipe of docs/applications.md: node-postgres. A bigint or snowflake column arrives as a string (exact);
// JSON built in SQL carries snowflake columns as strings, so JSON.parse keeps every digit.
const { Client } = require('pg');

async function demo(client) {
  await client.query(`CREATE SEQUENCE IF NOT EXISTS js_item_seq`);
  await client.query(`CREATE TABLE IF NOT EXISTS js_item (
      id snowflake PRIMARY KEY DEFAULT next_id(6, 'js_item_seq'),
      body text)`);
  const inserted = await client.query(
    `INSERT INTO js_item (body) SELECT 'item ' || g FROM generate_series(1, 5000) g RETURNING id`);
  const ids = inserted.rows.map((r) => r.id);          // strings: '4000000000000979520'
  const api = await client.query(`SELECT json_agg(t ORDER BY id) AS items FROM js_item t`);
  const items = api.rows[0].items;                     // parsed by JSON.parse: ids still strings
  return { ids, items };
}

module.exports = { demo, Client };
