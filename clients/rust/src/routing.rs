//! Applications that route by shard themselves (docs/app-routing.md), with tokio-postgres: the
//! shard map read from the router (`snowflake_id_router.app_map()`), one deadpool-postgres
//! pool per node (not per shard), the shard of an ID, units of work on a shard run by the
//! retry rules, and the fan-out over every shard. The rules are
//! clients/python/snowflake_routing.py's.

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod};
use std::collections::hash_map::Entry;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, NoTls, Row, Transaction};

/// use_shard: this node does not serve the shard (reload the map).
pub const NOT_SERVED: &str = "SF001";
/// A move's fence, a deadlock: the same work again, later.
pub const TRY_AGAIN: [&str; 2] = ["40001", "40P01"];

/// The logical shard of an ID (`id_shard(id)` on the server).
pub fn shard_of(id: i64) -> i32 {
    ((id >> 10) & 8191) as i32
}

/// What a unit of work returns: a future borrowing the unit's transaction.
pub type Work<'t, T> = Pin<Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 't>>;

#[derive(Debug)]
pub enum Error {
    /// The server's (the SQLSTATE in `code()`) or the connection's.
    Db(tokio_postgres::Error),
    /// A node's pool could not give a connection.
    Pool(PoolError),
    /// The map assigns the shard to no node.
    Unassigned(i32),
    /// The router's connect string or a node's could not be read.
    Config(String),
}

impl Error {
    /// The SQLSTATE, if the server sent one.
    pub fn code(&self) -> Option<&str> {
        let db = match self {
            Error::Db(e) | Error::Pool(PoolError::Backend(e)) => e,
            _ => return None,
        };
        db.code().map(|c| c.code())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Db(e) => write!(
                f,
                "{e}{}",
                e.as_db_error()
                    .map(|d| format!(": {}", d.message()))
                    .unwrap_or_default()
            ),
            Error::Pool(e) => write!(f, "a node's pool: {e}"),
            Error::Unassigned(shard) => write!(f, "shard {shard} is assigned to no node"),
            Error::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Db(e)
    }
}

impl From<PoolError> for Error {
    fn from(e: PoolError) -> Self {
        Error::Pool(e)
    }
}

const ROUTER_MAP: &str =
    "SELECT shard, node, connstr, map_version FROM snowflake_id_router.app_map()";
const NODE_MAP: &str = "SELECT shard, node, connstr, map_version FROM app_map()"; // every node's copy

/// The rows of a map query on one server (a connection of its own, closed after).
async fn read_map(config: &Config, query: &str) -> Result<Vec<Row>, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    let driver = tokio::spawn(connection);
    let rows = client.query(query, &[]).await;
    drop(client);
    let _ = driver.await;
    rows
}

/// One read of the map: each shard's node, each node's connect string and pool.
struct Map {
    version: i64,
    node_of: HashMap<i32, String>,
    nodes: HashMap<String, (String, Pool)>,
}

/// What the runner retried, and how often it read the map.
#[derive(Default, Debug)]
pub struct Stats {
    /// Units run again after SF001.
    pub moved: AtomicU64,
    /// Units run again after 40001 or 40P01.
    pub conflicts: AtomicU64,
    /// Reads of the map.
    pub loads: AtomicU64,
}

pub struct ShardRouter {
    router: Option<Config>,
    bootstrap: Vec<Config>, // nodes to read the map from when the router does not answer
    user: Option<String>,
    password: Option<String>,
    pool_size: usize,
    map: RwLock<Arc<Map>>,
    reading: tokio::sync::Mutex<()>, // one read of the map at a time, shared by those told at once
    served_before: Mutex<BTreeSet<i32>>, // the shards the last fan-out found (fan_out)
    pub stats: Stats,
    /// The retry rules' bounds: 40 tries, pauses from 5 ms doubling to 500 ms (about 15 s).
    pub tries: u32,
    pub first_pause: Duration,
    pub longest_pause: Duration,
}

impl ShardRouter {
    /// Reads the map from the router (its connect string, libpq's keyword = value or a URL).
    /// `user` and `password` are the application's, on the router and on every node (the map's
    /// connect strings hold none); `pool_size` is each node's pool's.
    pub async fn connect(
        router: &str,
        user: Option<&str>,
        password: Option<&str>,
        pool_size: usize,
    ) -> Result<Self, Error> {
        Self::start(Some(router), &[], user, password, pool_size).await
    }

    /// Reads the map from a few nodes (their connect strings), with no router: every node
    /// keeps the map the router last pushed it, and the highest version any gives is taken.
    pub async fn connect_nodes(
        nodes: &[&str],
        user: Option<&str>,
        password: Option<&str>,
        pool_size: usize,
    ) -> Result<Self, Error> {
        Self::start(None, nodes, user, password, pool_size).await
    }

    async fn start(
        router: Option<&str>,
        nodes: &[&str],
        user: Option<&str>,
        password: Option<&str>,
        pool_size: usize,
    ) -> Result<Self, Error> {
        if router.is_none() && nodes.is_empty() {
            return Err(Error::Config(
                "give the router's connect string or some nodes'".into(),
            ));
        }
        let mut this = ShardRouter {
            router: None,
            bootstrap: Vec::new(),
            user: user.map(String::from),
            password: password.map(String::from),
            pool_size,
            map: RwLock::new(Arc::new(Map {
                version: -1,
                node_of: HashMap::new(),
                nodes: HashMap::new(),
            })),
            reading: tokio::sync::Mutex::new(()),
            served_before: Mutex::new(BTreeSet::new()),
            stats: Stats::default(),
            tries: 40,
            first_pause: Duration::from_millis(5),
            longest_pause: Duration::from_millis(500),
        };
        this.router = router
            .map(|r| {
                this.config(r)
                    .map_err(|e| Error::Config(format!("the router's connect string: {e}")))
            })
            .transpose()?;
        this.bootstrap = nodes
            .iter()
            .map(|n| {
                this.config(n)
                    .map_err(|e| Error::Config(format!("connect string {n:?}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        this.load(None).await?;
        Ok(this)
    }

    /// A connect string's config with the application's credentials.
    fn config(&self, connstr: &str) -> Result<Config, tokio_postgres::Error> {
        let mut config = Config::from_str(connstr)?;
        if let Some(user) = &self.user {
            config.user(user);
        }
        if let Some(password) = &self.password {
            config.password(password);
        }
        Ok(config)
    }

    fn map(&self) -> Arc<Map> {
        self.map.read().unwrap().clone()
    }

    /// The map's version as last read.
    pub fn version(&self) -> i64 {
        self.map().version
    }

    /// The node the cached map names for a shard.
    pub fn node_of(&self, shard: i32) -> Option<String> {
        self.map().node_of.get(&shard).cloned()
    }

    /// The nodes of the cached map (one pool each).
    pub fn nodes(&self) -> Vec<String> {
        self.map().nodes.keys().cloned().collect()
    }

    /// Reads the map again, unless it was read since the caller saw `seen` (one read for all
    /// the units told at once).
    pub async fn load(&self, seen: Option<i64>) -> Result<(), Error> {
        let _one = self.reading.lock().await;
        let old = self.map();
        if seen.is_some_and(|v| v != old.version) {
            return Ok(());
        }
        let Some(rows) = self.newest_map(&old).await? else {
            self.stats.loads.fetch_add(1, Relaxed); // none newer than the map held
            return Ok(());
        };
        let mut map = Map {
            version: rows.first().map_or(0, |r| r.get(3)),
            node_of: HashMap::new(),
            nodes: HashMap::new(),
        };
        for row in &rows {
            let (shard, node, connstr): (i32, String, String) =
                (row.get(0), row.get(1), row.get(2));
            map.node_of.insert(shard, node.clone());
            if let Entry::Vacant(slot) = map.nodes.entry(node) {
                // The node's pool, kept while its connect string is the same (alter_node changes it).
                let pool = match old.nodes.get(slot.key()) {
                    Some((same, pool)) if *same == connstr => pool.clone(),
                    _ => self.pool(&connstr)?,
                };
                slot.insert((connstr, pool));
            }
        }
        *self.map.write().unwrap() = Arc::new(map); // a pool no map names closes once its last connection is back
        self.stats.loads.fetch_add(1, Relaxed);
        Ok(())
    }

    /// The newest map to be had, or None when none is newer than `old`: the router's while it
    /// answers; else the highest version among the nodes' copies (a node that missed a push
    /// gives an older one), from the nodes given and those of the map held.
    async fn newest_map(&self, old: &Map) -> Result<Option<Vec<Row>>, Error> {
        if let Some(router) = &self.router {
            match read_map(router, ROUTER_MAP).await {
                Ok(rows) => return Ok(Some(rows)),
                Err(e) if old.nodes.is_empty() && self.bootstrap.is_empty() => return Err(e.into()),
                Err(_) => {} // the router down: the nodes answer
            }
        }
        let mut known = self.bootstrap.clone();
        for (connstr, _) in old.nodes.values() {
            known.push(
                self.config(connstr)
                    .map_err(|e| Error::Config(format!("connect string {connstr:?}: {e}")))?,
            );
        }
        let (mut best, mut failed): (Option<Vec<Row>>, Option<tokio_postgres::Error>) =
            (None, None);
        for config in &known {
            match read_map(config, NODE_MAP).await {
                Ok(rows) => {
                    let v = rows.first().map(|r| r.get::<_, i64>(3));
                    if v.is_some()
                        && best
                            .as_ref()
                            .is_none_or(|b| v > b.first().map(|r| r.get::<_, i64>(3)))
                    {
                        best = Some(rows);
                    }
                }
                Err(e) => failed = Some(e), // a node down: the others answer
            }
        }
        match best {
            None if old.version < 0 => Err(match failed {
                Some(e) => e.into(),
                None => Error::Config("no node gave a shard map".into()),
            }),
            Some(rows) if rows[0].get::<_, i64>(3) > old.version => Ok(Some(rows)),
            _ => Ok(None),
        }
    }

    fn pool(&self, connstr: &str) -> Result<Pool, Error> {
        let config = self
            .config(connstr)
            .map_err(|e| Error::Config(format!("connect string {connstr:?}: {e}")))?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(self.pool_size)
            .build()
            .map_err(|e| Error::Config(format!("a pool for {connstr:?}: {e}")))
    }

    /// Runs `work(transaction)` as a unit of work on a shard: BEGIN; SELECT use_shard(shard);
    /// the work's statements; COMMIT, on the node the map names. SF001 reloads the map and runs
    /// it again where the map now says; 40001 and 40P01 run it again after a pause; the pause
    /// doubles (with jitter, up to `longest_pause`) whenever there is nowhere new to try. Any
    /// other error, or the last try's, is the caller's. The work must be whole: all its effects
    /// in the transaction, which is rolled back when it fails.
    pub async fn with_shard<T, F>(&self, shard: i32, mut work: F) -> Result<T, Error>
    where
        F: for<'t> FnMut(&'t Transaction<'t>) -> Work<'t, T>,
    {
        let mut pause = self.first_pause;
        let mut tried = 0;
        loop {
            tried += 1;
            let mut map = self.map();
            if !map.node_of.contains_key(&shard) {
                self.load(Some(map.version)).await?; // assigned since the map was read?
                map = self.map();
            }
            let node = map.node_of.get(&shard).ok_or(Error::Unassigned(shard))?;
            let error = match Self::attempt(&map.nodes[node].1, shard, &mut work).await {
                Ok(result) => return Ok(result),
                Err(error) => error,
            };
            let state = error.code();
            let moved = state == Some(NOT_SERVED);
            if tried >= self.tries || !(moved || state.is_some_and(|s| TRY_AGAIN.contains(&s))) {
                return Err(error);
            }
            if moved {
                self.stats.moved.fetch_add(1, Relaxed);
                self.load(Some(map.version)).await?;
                if self.node_of(shard).as_ref() != Some(node) {
                    continue; // moved: straight to its node
                }
            } else {
                self.stats.conflicts.fetch_add(1, Relaxed);
            }
            tokio::time::sleep(pause.mul_f64(0.5 + 0.5 * jitter())).await;
            pause = (pause * 2).min(self.longest_pause);
        }
    }

    /// Runs work on the shard of an ID.
    pub async fn by_id<T, F>(&self, id: i64, work: F) -> Result<T, Error>
    where
        F: for<'t> FnMut(&'t Transaction<'t>) -> Work<'t, T>,
    {
        self.with_shard(shard_of(id), work).await
    }

    /// One try: a transaction on the node's pool (dropped unfinished, it is rolled back).
    async fn attempt<T, F>(pool: &Pool, shard: i32, work: &mut F) -> Result<T, Error>
    where
        F: for<'t> FnMut(&'t Transaction<'t>) -> Work<'t, T>,
    {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        tx.batch_execute(&format!("SELECT use_shard({shard})"))
            .await?;
        let result = work(&tx).await?;
        tx.commit().await?;
        Ok(result)
    }

    /// The rows of a query (its first column the ID, in ID order) over every shard that holds
    /// tables, merged in ID order. Those are the shards the nodes serve (their
    /// snowflake_id_shards), whichever node the map names: the map assigns shards that have no
    /// schema anywhere, and may be behind a move. Each runs where the map names it, retried as
    /// `with_shard` does. A move's cutover lists its shard nowhere for a moment, so the shards
    /// the previous fan-out found run too; one of those still served nowhere after the retries
    /// (SF001) was dropped, and is left out.
    pub async fn fan_out(
        &self,
        sql: &str,
        params: Vec<Box<dyn ToSql + Send + Sync>>,
    ) -> Result<Vec<Row>, Error> {
        let (sql, params): (Arc<str>, Arc<[Box<dyn ToSql + Send + Sync>]>) =
            (sql.into(), params.into());
        let mut listed = BTreeSet::new();
        for (_, pool) in self.map().nodes.values() {
            for row in pool
                .get()
                .await?
                .query("SELECT shard FROM snowflake_id_shards", &[])
                .await?
            {
                listed.insert(row.get::<_, i32>(0));
            }
        }
        let before = self.served_before.lock().unwrap().clone();
        let (mut served, mut rows) = (listed.clone(), Vec::new());
        for shard in listed.union(&before) {
            let run = self.with_shard(*shard, |tx| {
                let (sql, params) = (sql.clone(), params.clone());
                Box::pin(async move {
                    let params: Vec<&(dyn ToSql + Sync)> =
                        params.iter().map(|p| p.as_ref() as _).collect();
                    tx.query(&*sql, &params).await
                })
            });
            match run.await {
                Ok(found) => {
                    rows.extend(found);
                    served.insert(*shard);
                }
                Err(e) if !listed.contains(shard) && matches!(e.code(), Some(NOT_SERVED)) => {}
                Err(Error::Unassigned(_)) if !listed.contains(shard) => {}
                Err(e) => return Err(e),
            }
        }
        *self.served_before.lock().unwrap() = served;
        rows.sort_by_key(|r| r.get::<_, i64>(0));
        Ok(rows)
    }
}

/// A number in [0, 1) for the pauses' jitter (std's per-process random hash keys: no crate).
fn jitter() -> f64 {
    (RandomState::new().hash_one(std::time::Instant::now()) >> 11) as f64 / (1u64 << 53) as f64
}
