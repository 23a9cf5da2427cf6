'use strict';
// Applications that route by shard themselves (docs/app-routing.md), with node-postgres: the
// shard map read from the router (snowflake_id_router.app_map()), one pg.Pool per node (not
// per shard), the shard of an ID, units of work on a shard run by the retry rules, and the
// fan-out over every shard. The rules are clients/python/snowflake_routing.py's.
const pg = require('pg');

const NOT_SERVED = 'SF001';                      // use_shard: this node does not serve the shard
const TRY_AGAIN = new Set(['40001', '40P01']);   // a move's fence, a deadlock: the same work again, later
const ROUTER_MAP = 'SELECT shard, node, connstr, map_version FROM snowflake_id_router.app_map()';
const NODE_MAP = 'SELECT shard, node, connstr, map_version FROM app_map()';   // every node's copy

/** The logical shard of an ID (id_shard(id) on the server): a string (node-postgres' bigint), BigInt or number. */
function shardOf(id) {
  return Number((BigInt(id) >> 10n) & 8191n);
}

/** A shard the map assigns to no node. */
class UnassignedShardError extends Error {}

/** A libpq connect string's keyword = value pairs; a value may be single-quoted, with \' and \\ inside. */
function parseConninfo(s) {
  const kw = {}, pair = /\s*([^=\s]+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|((?:[^\s'\\]|\\.)*))\s*/y;
  for (let at = 0; at < s.trim().length; at = pair.lastIndex) {
    const m = pair.exec(s.trim());
    if (!m) throw new Error(`cannot read the connect string from "${s.trim().slice(at)}"`);
    kw[m[1]] = (m[2] ?? m[3]).replace(/\\(.)/g, '$1');
  }
  return kw;
}

/**
 * node-postgres' connectionString for a connect string (libpq's keyword = value, as app_map()
 * gives: node-postgres reads URLs only) with the application's credentials in place of any it
 * names (a URL's user is node-postgres' choice over the config's own).
 */
function connectionString(connstr, { user, password }) {
  const { dbname = '', ...kw } = parseConninfo(connstr);
  if (user !== undefined) kw.user = user;
  if (password !== undefined) kw.password = password;
  return `postgresql:///${encodeURIComponent(dbname)}?${new URLSearchParams(kw)}`;
}

/** The rows of a map query on one server (a connection of its own, closed after). */
async function readMap(connectionString, query) {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return (await client.query(query)).rows;
  } finally {
    await client.end();
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const byId = (idOf) => (a, b) => {
  const x = BigInt(idOf(a)), y = BigInt(idOf(b));
  return x < y ? -1 : x > y ? 1 : 0;
};

class ShardRouter {
  /**
   * router: the router's connect string (libpq's keyword = value); nodes: connect strings of
   * a few nodes, to read the map from with no router (every node keeps the map the router
   * last pushed it; the highest version any gives is taken); one of the two at least. On
   * SF001 the map is read from the router while it answers, else from those nodes and the
   * map's own, so that once it has a map an application needs no router. user, password: the
   * application's, on the router and on every node; pool: each node's pg.Pool options (max...);
   * tries, firstPause, longestPause (ms): the retry rules' bounds (40 tries, about 15 s).
   * ShardRouter.connect(options) makes one and reads the map.
   */
  constructor({ router, nodes = [], user, password, pool = {}, tries = 40, firstPause = 5, longestPause = 500 }) {
    Object.assign(this, { credentials: { user, password }, poolOptions: pool, tries, firstPause, longestPause });
    if (!router && !nodes.length) throw new Error("give the router's connect string or some nodes'");
    this.routerString = router ? connectionString(router, this.credentials) : null;
    this.bootstrap = nodes.map((connstr) => connectionString(connstr, this.credentials));
    this.version = null;
    this.nodeOf = new Map();      // shard -> node
    this.connstrs = new Map();    // node -> its connect string, as the map gives it
    this.pools = new Map();       // node -> pg.Pool
    this.loading = null;          // the map's read under way, shared by every caller
    this.servedBefore = new Set(); // the shards the last fan-out found (fanOut)
    this.loads = 0;
    this.stats = { [NOT_SERVED]: 0, '40001': 0, '40P01': 0 };   // what the runner retried, by SQLSTATE
  }

  static async connect(options) {
    const router = new ShardRouter(options);
    await router.load();
    return router;
  }

  /** Reads the map again, unless it was read since the caller saw seenVersion (one read for all the units told at once). */
  load(seenVersion) {
    if (seenVersion !== undefined && seenVersion !== this.version) return Promise.resolve();
    this.loading ??= this.readMap().finally(() => { this.loading = null; });
    return this.loading;
  }

  async readMap() {
    const rows = await this.newestMap();
    if (rows === null) { this.loads++; return; }        // none newer than the map held
    const nodeOf = new Map(rows.map((r) => [r.shard, r.node]));
    const connstrs = new Map(rows.map((r) => [r.node, r.connstr]));
    for (const [node, connstr] of connstrs) {
      if (this.connstrs.get(node) !== connstr) {    // a new node, or alter_node
        this.endPool(node);
        this.pools.set(node, new pg.Pool({ ...this.poolOptions, connectionString: connectionString(connstr, this.credentials) }));
      }
    }
    for (const node of this.pools.keys()) if (!connstrs.has(node)) this.endPool(node);   // removed
    Object.assign(this, { nodeOf, connstrs, version: rows.length ? rows[0].map_version : '0' });
    this.loads++;
  }

  /**
   * The newest map to be had, or null when none is newer than the one held: the router's
   * while it answers; else the highest version among the nodes' copies (a node that missed a
   * push gives an older one).
   */
  async newestMap() {
    if (this.routerString) {
      try {
        return await readMap(this.routerString, ROUTER_MAP);
      } catch (error) {
        if (!this.connstrs.size && !this.bootstrap.length) throw error;   // no map yet, and no node known
      }
    }
    let best = null;
    const failures = [];
    const known = [...this.connstrs.values()].map((c) => connectionString(c, this.credentials));
    for (const connstr of new Set([...this.bootstrap, ...known])) {
      try {
        const rows = await readMap(connstr, NODE_MAP);
        if (rows.length && (best === null || BigInt(rows[0].map_version) > BigInt(best[0].map_version))) best = rows;
      } catch (error) {
        failures.push(error);                               // a node down: the others answer
      }
    }
    if (best === null && this.version === null) {
      throw new Error(`no node gave a shard map (${failures.length} could not be reached)`, { cause: failures[0] });
    }
    return best !== null && (this.version === null || BigInt(best[0].map_version) > BigInt(this.version)) ? best : null;
  }

  endPool(node) {
    // pg.Pool's end waits for its clients in use to be released, then closes them.
    this.pools.get(node)?.end().catch(() => {});
    this.pools.delete(node);
  }

  /**
   * Runs work(client) as a unit of work on a shard: BEGIN; SELECT use_shard(shard); the work's
   * statements; COMMIT, on the node the map names. SF001 reloads the map and runs it again
   * where the map now says; 40001 and 40P01 run it again after a pause; the pause doubles
   * (with jitter, up to longestPause) whenever there is nowhere new to try. Any other error, or
   * the last try's, is the caller's. The work must be whole: all its effects in the
   * transaction, which is rolled back when it fails; it neither commits nor releases.
   */
  async withShard(shard, work) {
    if (!Number.isInteger(shard) || shard < 0 || shard > 8191) throw new RangeError(`no shard ${shard}`);
    let pause = this.firstPause;
    for (let tried = 1; ; tried++) {
      const version = this.version;
      if (!this.nodeOf.has(shard)) await this.load(version);    // assigned since the map was read?
      const node = this.nodeOf.get(shard);
      if (node === undefined) throw new UnassignedShardError(`shard ${shard} is assigned to no node`);
      try {
        return await this.attempt(this.pools.get(node), shard, work);
      } catch (error) {
        const state = error?.code;
        if (tried === this.tries || (state !== NOT_SERVED && !TRY_AGAIN.has(state))) throw error;
        this.stats[state]++;
        if (state === NOT_SERVED) {
          await this.load(version);
          if (this.nodeOf.get(shard) !== node) continue;          // moved: straight to its node
        }
        await sleep(pause / 2 + Math.random() * pause / 2);
        pause = Math.min(pause * 2, this.longestPause);
      }
    }
  }

  /** Runs work on the shard of an ID. */
  byId(id, work) {
    return this.withShard(shardOf(id), work);
  }

  /** One try: a transaction on the node's pool. */
  async attempt(pool, shard, work) {
    const client = await pool.connect();
    try {
      await client.query(`BEGIN; SELECT use_shard(${shard})`);   // one round trip (shard: an integer)
      const result = await work(client);
      // A statement's error that the work caught leaves the transaction aborted, and COMMIT
      // then answers ROLLBACK: the work's effects are gone, which the caller must hear.
      if ((await client.query('COMMIT')).command !== 'COMMIT') {
        throw new Error(`the unit of work on shard ${shard} was rolled back: a statement in it failed`);
      }
      client.release();
      return result;
    } catch (error) {
      try {
        await client.query('ROLLBACK');
        client.release();
      } catch (broken) {
        client.release(broken);       // a broken connection leaves the pool
      }
      throw error;
    }
  }

  /**
   * The rows of a query (in ID order: idOf(row), row.id by default) over every shard that
   * holds tables, merged in ID order. Those are the shards the nodes serve (their
   * snowflake_id_shards), whichever node the map names: the map assigns shards that have no
   * schema anywhere, and may be behind a move. Each runs where the map names it, retried as
   * withShard does. A move's cutover lists its shard nowhere for a moment, so the shards the
   * previous fan-out found run too; one of those still served nowhere after the retries (SF001)
   * was dropped, and is left out.
   */
  async fanOut(sql, params = [], idOf = (row) => row.id) {
    const listed = new Set();
    for (const pool of [...this.pools.values()]) {
      for (const { shard } of (await pool.query('SELECT shard FROM snowflake_id_shards')).rows) listed.add(shard);
    }
    const served = new Set(listed), rows = [];
    for (const shard of [...new Set([...listed, ...this.servedBefore])].sort((a, b) => a - b)) {
      try {
        rows.push(...await this.withShard(shard, async (client) => (await client.query(sql, params)).rows));
        served.add(shard);
      } catch (error) {
        if (listed.has(shard) || (error?.code !== NOT_SERVED && !(error instanceof UnassignedShardError))) throw error;
      }
    }
    this.servedBefore = served;
    return rows.sort(byId(idOf));
  }

  /** Closes every node's pool. */
  async end() {
    await Promise.all([...this.pools.values()].map((pool) => pool.end()));
    this.pools.clear();
  }
}

module.exports = { ShardRouter, shardOf, parseConninfo, connectionString, UnassignedShardError, NOT_SERVED, TRY_AGAIN };
