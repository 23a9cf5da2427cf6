//! One application writing straight to the nodes, routing by shard itself through the Rust
//! client (src/routing.rs), for reliability/t_app_node_rust.sh; reliability/app_router_client.py
//! and app_node_client.js are the Python and Node ones, all three alike.
//!
//! Inserts posts on random shards, updates its own earlier posts and reads them back by ID,
//! and every 50 rounds reads all its posts with the client's fan-out (each must be there once,
//! with its last acknowledged body, in ID order), until the deadline or LOG.stop. Each write it
//! saw acknowledged is logged as reliability/router_check.py reads them:
//! `I <id> <shard> <body> <t0> <t_ack> 1` or `U <id> - <body> <t0> <t_ack> 1`. A read must
//! return the body of the post's last acknowledged write. Any error that reaches the
//! application (the client retries SF001, 40001 and 40P01 itself) ends it with exit 1, naming
//! it. Prints one line of counts (JSON) at the end. While LOG.pause exists it waits, its counts
//! so far written to LOG.paused (reliability/t_app_node_rust.sh's runs without the router).
//! Usage: app_writer SOURCE USER CLIENT_NO SECONDS SHARDS LOG
//! SOURCE: the router's connect string, or nodes:CONNSTR|CONNSTR... to read the map from those nodes

use snowflake_id_client_recipe::routing::{shard_of, ShardRouter};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::exit;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now() -> String {
    format!(
        "{:.6}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    )
}

/// Repeatable per client (the seed): 0..n.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, source, user, client, seconds, shards, log_path] = &args[..] else {
        panic!("usage: app_writer SOURCE USER CLIENT_NO SECONDS SHARDS LOG")
    };
    let user_id: i64 = client.parse().unwrap();
    let shards: Vec<i32> = shards.split(',').map(|s| s.parse().unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs_f64(seconds.parse().unwrap());
    let stop = format!("{log_path}.stop");
    let mut rng = Rng(user_id as u64);
    let app = match source.strip_prefix("nodes:") {
        Some(nodes) => {
            let nodes: Vec<&str> = nodes.split('|').collect();
            ShardRouter::connect_nodes(&nodes, Some(user), None, 2).await
        }
        None => ShardRouter::connect(source, Some(user), None, 2).await,
    }
    .unwrap();
    let summary = |app: &ShardRouter, counts: [u64; 4]| {
        let s = &app.stats;
        format!(
            r#"{{"kind": "rust", "client": {client}, "inserts": {}, "updates": {}, "reads": {}, "fan_outs": {}, "retried": {{"SF001": {}, "40001": {}}}, "map_loads": {}}}"#,
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            s.moved.load(Relaxed),
            s.conflicts.load(Relaxed),
            s.loads.load(Relaxed)
        )
    };
    let (pause, paused) = (format!("{log_path}.pause"), format!("{log_path}.paused"));
    let mut log = std::fs::File::create(log_path).unwrap();
    let mut last: BTreeMap<i64, String> = BTreeMap::new(); // id -> body of its last acknowledged write
    let (mut inserts, mut updates, mut reads, mut fan_outs) = (0u64, 0u64, 0u64, 0u64);
    let fail = |what: String| -> ! {
        eprintln!("rust client {client}: error reached the application: {what}");
        exit(1)
    };
    let mut n = 0;
    while Instant::now() < deadline && !Path::new(&stop).exists() {
        if Path::new(&pause).exists() {
            if !Path::new(&paused).exists() {
                let tmp = format!("{paused}.tmp");
                std::fs::write(&tmp, summary(&app, [inserts, updates, reads, fan_outs])).unwrap();
                std::fs::rename(&tmp, &paused).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        n += 1;
        let (body, t0) = (format!("r{client}n{n}"), now());
        let post = if !last.is_empty() && rng.below(10) < 3 {
            let post = *last.keys().nth(rng.below(last.len())).unwrap();
            let b = body.clone();
            let updated = app
                .by_id(post, |tx| {
                    let b = b.clone();
                    Box::pin(async move {
                        tx.execute("UPDATE posts SET body = $2 WHERE id = $1", &[&post, &b])
                            .await
                    })
                })
                .await
                .unwrap_or_else(|e| fail(format!("update of {post}: {e}")));
            if updated != 1 {
                fail(format!("update of {post} found no row"));
            }
            writeln!(log, "U {post} - {body} {t0} {} 1", now()).unwrap();
            updates += 1;
            post
        } else {
            let shard = shards[rng.below(shards.len())];
            let b = body.clone();
            let post: i64 = app
                .with_shard(shard, |tx| {
                    let b = b.clone();
                    Box::pin(async move {
                        let row = tx
                            .query_one(
                                "INSERT INTO posts (user_id, body) VALUES ($1, $2) RETURNING id",
                                &[&user_id, &b],
                            )
                            .await?;
                        Ok(row.get(0))
                    })
                })
                .await
                .unwrap_or_else(|e| fail(format!("insert on shard {shard}: {e}")));
            if shard_of(post) != shard {
                fail(format!(
                    "ID {post} made for shard {shard} is of shard {}",
                    shard_of(post)
                ));
            }
            writeln!(log, "I {post} {shard} {body} {t0} {} 1", now()).unwrap();
            inserts += 1;
            post
        };
        last.insert(post, body);
        log.flush().unwrap();
        let post = *last.keys().nth(rng.below(last.len())).unwrap();
        let got: Option<String> = app
            .by_id(post, |tx| {
                Box::pin(async move {
                    Ok(tx
                        .query_opt("SELECT body FROM posts WHERE id = $1", &[&post])
                        .await?
                        .map(|r| r.get(0)))
                })
            })
            .await
            .unwrap_or_else(|e| fail(format!("read of {post}: {e}")));
        if got.as_ref() != last.get(&post) {
            fail(format!(
                "read of {post} (shard {}) gave {got:?}, its last write was {:?}",
                shard_of(post),
                last[&post]
            ));
        }
        reads += 1;
        if n % 50 == 0 {
            // every post of this client's, from every shard, in ID order
            let rows = app
                .fan_out(
                    "SELECT id, body FROM posts WHERE user_id = $1 ORDER BY id",
                    vec![Box::new(user_id)],
                )
                .await
                .unwrap_or_else(|e| fail(format!("fan-out: {e}")));
            let got: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            if got.iter().map(|(i, b)| (i, b)).ne(last.iter()) {
                fail(format!(
                    "fan-out gave {} posts, {} acknowledged, or another order",
                    got.len(),
                    last.len()
                ));
            }
            fan_outs += 1;
        }
    }
    println!("{}", summary(&app, [inserts, updates, reads, fan_outs]));
}
