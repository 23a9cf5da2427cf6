//! The Rust routing client (src/routing.rs, docs/app-routing.md) on one server (PGHOST, PGPORT,
//! PGUSER from clients/run.sh): a router database and three node databases; a shard moved by
//! hand behind the client's back (the map changed, the shard's schema now on the other node)
//! is found again through SF001, a 40001 is retried, other errors reach the caller at once.
//! Under real moves: reliability/t_app_node_rust.sh. clients/test_routing.py does the same in
//! Python, clients/node/test_routing.js in Node.

use snowflake_id_client_recipe::routing::{shard_of, Error, ShardRouter};
use std::process::exit;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use tokio_postgres::{NoTls, SimpleQueryMessage};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn server() -> String {
    format!(
        "host={} port={} user={}",
        env("PGHOST"),
        env("PGPORT"),
        env("PGUSER")
    )
}

/// Runs each statement (autocommit) on a database; the first column of the last one's rows.
async fn sql(db: &str, statements: &[&str]) -> Vec<String> {
    let (client, connection) = tokio_postgres::connect(&format!("{} dbname={db}", server()), NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let mut out = Vec::new();
    for statement in statements {
        out = client
            .simple_query(statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e:?}"))
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or("").to_string()),
                _ => None,
            })
            .collect();
    }
    drop(client);
    driver.await.unwrap().unwrap();
    out
}

struct Checks(usize);

impl Checks {
    fn check(&mut self, name: &str, ok: bool) {
        if !ok {
            println!("FAIL: rust: {name}");
            exit(1);
        }
        self.0 += 1;
        println!("ok: rust: {name}");
    }
}

async fn insert(app: &ShardRouter, shard: i32, body: &str) -> i64 {
    let body = body.to_string();
    app.with_shard(shard, |tx| {
        let body = body.clone();
        Box::pin(async move {
            let row = tx
                .query_one(
                    "INSERT INTO posts (body) VALUES ($1) RETURNING id",
                    &[&body],
                )
                .await?;
            Ok(row.get(0))
        })
    })
    .await
    .unwrap()
}

async fn read(app: &ShardRouter, id: i64) -> Option<String> {
    app.by_id(id, |tx| {
        Box::pin(async move {
            let row = tx
                .query_opt("SELECT body FROM posts WHERE id = $1", &[&id])
                .await?;
            Ok(row.map(|r| r.get(0)))
        })
    })
    .await
    .unwrap()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut c = Checks(0);
    c.check(
        "shard_of: bits 10..22 of the ID",
        shard_of(i64::MAX) == 8191 && shard_of((5 << 10) | 1023) == 5,
    );
    let (router, n1, n2, n3) = ("rt_rs", "n1_rs", "n2_rs", "n3_rs");
    for db in [router, n1, n2, n3] {
        sql("postgres", &[&format!("CREATE DATABASE {db}")]).await;
    }
    // The application's role: nothing on the router; on the nodes the shards' tables, those
    // made later too (default privileges of the role that makes them).
    sql("postgres", &["CREATE ROLE app_rs LOGIN"]).await;
    for db in [n1, n2, n3] {
        sql(
            db,
            &[
                "CREATE EXTENSION snowflake_id",
                "CREATE SCHEMA tpl",
                "CREATE TABLE tpl.posts (id bigint PRIMARY KEY, body text NOT NULL)",
                "ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO app_rs",
                "ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE ON TABLES TO app_rs",
                "ALTER DEFAULT PRIVILEGES GRANT USAGE ON SEQUENCES TO app_rs",
            ],
        )
        .await;
    }
    sql(
        n1,
        &[
            "SELECT create_shard('s_1', 1, template => 'tpl')",
            "SELECT create_shard('s_2', 2, template => 'tpl')",
        ],
    )
    .await;
    sql(n2, &["SELECT create_shard('s_3', 3, template => 'tpl')"]).await;
    let srv = server();
    sql(
        router,
        &[
            "SET client_min_messages = warning",
            "CREATE EXTENSION snowflake_id_router CASCADE",
            &format!("SELECT add_node('n1', '{srv} dbname={n1}')"),
            &format!("SELECT add_node('n2', '{srv} dbname={n2}')"),
            "SELECT assign_shards(1, 2, 'n1')",
            "SELECT assign_shards(3, 1, 'n2')",
            "SELECT assign_shards(5, 20, 'n2')", // (assigned, but no schema anywhere: as most of a real map)
        ],
    )
    .await;

    let app = ShardRouter::connect(&format!("{srv} dbname={router}"), Some("app_rs"), None, 2)
        .await
        .unwrap();
    c.check(
        "a role with no other right reads the map",
        [1, 2, 3].map(|s| app.node_of(s).unwrap_or_default()) == ["n1", "n1", "n2"]
            && app.node_of(24).is_some(),
    );
    c.check("one pool per node, not per shard", app.nodes().len() == 2);

    let mut ids = Vec::new();
    for s in [1, 2, 3] {
        ids.push(insert(&app, s, &format!("first on {s}")).await);
    }
    c.check(
        "each insert's ID is of its shard",
        ids.iter().zip([1, 2, 3]).all(|(id, s)| shard_of(*id) == s),
    );
    let mut bodies = Vec::new();
    for id in &ids {
        bodies.push(read(&app, *id).await.unwrap_or_default());
    }
    c.check(
        "reads by ID reach each shard's node",
        bodies == ["first on 1", "first on 2", "first on 3"],
    );
    c.check(
        "the insert landed in the shard's schema",
        sql(n1, &["SELECT count(*) FROM s_1.posts"]).await == ["1"],
    );

    // Shard 2 moves to n2 behind the client's back: its schema there (rows and sequence
    // carried by hand), gone from n1, and the map changed. The client's map still names n1.
    let last = sql(n1, &["SELECT last_value FROM s_2.table_id_seq"]).await;
    let rows = sql(
        n1,
        &["SELECT format('INSERT INTO s_2.posts VALUES (%s, %L)', id, body) FROM s_2.posts"],
    )
    .await;
    let mut carry = vec!["SELECT create_shard('s_2', 2, template => 'tpl')".to_string()];
    carry.extend(rows);
    carry.push(format!("SELECT setval('s_2.table_id_seq', {})", last[0]));
    sql(n2, &carry.iter().map(String::as_str).collect::<Vec<_>>()).await;
    sql(n1, &["SELECT drop_shard('s_2', cascade => true)"]).await;
    sql(
        router,
        &["UPDATE snowflake_id_router.shard SET node = 'n2' WHERE shard = 2"],
    )
    .await;
    c.check(
        "the client's map is stale",
        app.node_of(2).as_deref() == Some("n1"),
    );
    c.check(
        "a read of the moved shard is answered (SF001 seen, map reloaded)",
        read(&app, ids[1]).await.as_deref() == Some("first on 2")
            && app.stats.moved.load(Relaxed) == 1
            && app.node_of(2).as_deref() == Some("n2"),
    );
    let moved = insert(&app, 2, "second on 2").await;
    c.check(
        "an insert on the moved shard lands on its new node",
        sql(
            n2,
            &[&format!("SELECT body FROM s_2.posts WHERE id = {moved}")],
        )
        .await
            == ["second on 2"]
            && moved > ids[1],
    );
    let all: Vec<i64> = app
        .fan_out("SELECT id, body FROM posts ORDER BY id", vec![])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut want = [ids.clone(), vec![moved]].concat();
    want.sort();
    c.check(
        "fan-out: every row of every shard, in ID order",
        all == want,
    );

    // 40001 (a fence) is retried after a pause; any other error reaches the caller at once.
    let runs = AtomicU32::new(0);
    let fenced: i64 = app
        .with_shard(1, |tx| {
            let first = runs.fetch_add(1, Relaxed) == 0;
            Box::pin(async move {
                if first {
                    tx.batch_execute(
                        "DO $$ BEGIN RAISE EXCEPTION 'fenced' USING ERRCODE = '40001'; END $$",
                    )
                    .await?;
                }
                Ok(tx
                    .query_one(
                        "INSERT INTO posts (body) VALUES ('after a fence') RETURNING id",
                        &[],
                    )
                    .await?
                    .get(0))
            })
        })
        .await
        .unwrap();
    c.check(
        "40001: the unit runs again, once committed",
        runs.load(Relaxed) == 2
            && app.stats.conflicts.load(Relaxed) == 1
            && read(&app, fenced).await.as_deref() == Some("after a fence"),
    );
    let dup = app
        .with_shard(1, |tx| {
            Box::pin(async move {
                tx.execute("INSERT INTO posts VALUES ($1, 'twice')", &[&fenced])
                    .await
            })
        })
        .await;
    c.check(
        "another error (23505) reaches the caller, not retried",
        dup.as_ref().err().and_then(Error::code) == Some("23505")
            && app.stats.conflicts.load(Relaxed) == 1,
    );
    let unassigned = app.with_shard(4, |_| Box::pin(async { Ok(()) })).await;
    c.check(
        "a shard assigned to no node is refused",
        matches!(unassigned, Err(Error::Unassigned(4))),
    );

    // A node added, and a shard assigned to it, since the client read the map: found by a reload.
    sql(n3, &["SELECT create_shard('s_4', 4, template => 'tpl')"]).await;
    sql(
        router,
        &[
            &format!("SELECT add_node('n3', '{srv} dbname={n3}')"),
            "SELECT assign_shards(4, 1, 'n3')",
        ],
    )
    .await;
    let on_n3 = insert(&app, 4, "on a new node").await;
    c.check(
        "a shard on a node new to the map is reached",
        read(&app, on_n3).await.as_deref() == Some("on a new node")
            && app.node_of(4).as_deref() == Some("n3")
            && app.nodes().len() == 3,
    );

    // A shard in a move's cutover (here moved by hand from n2 to n3) is listed by no node while
    // the fan-out asks them: the shards the previous fan-out found run too, and are followed
    // through SF001 to where the shard went.
    app.fan_out("SELECT id FROM posts", vec![]).await.unwrap(); // (finds shard 3 on n2)
    let rows3 = sql(
        n2,
        &["SELECT format('INSERT INTO s_3.posts VALUES (%s, %L)', id, body) FROM s_3.posts"],
    )
    .await;
    sql(n2, &["SELECT drop_shard('s_3', cascade => true)"]).await;
    let mover = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mut make = vec!["SELECT create_shard('s_3', 3, template => 'tpl')"];
        make.extend(rows3.iter().map(String::as_str));
        sql(n3, &make).await;
        sql(
            router,
            &["UPDATE snowflake_id_router.shard SET node = 'n3' WHERE shard = 3"],
        )
        .await;
    };
    let (feed, ()) = tokio::join!(
        app.fan_out("SELECT id, body FROM posts ORDER BY id", vec![]),
        mover
    );
    c.check(
        "fan-out: a shard listed nowhere for a moment is found where it went",
        feed.unwrap().iter().any(|r| r.get::<_, i64>(0) == ids[2])
            && app.node_of(3).as_deref() == Some("n3"),
    );
    println!(
        "rust routing: {} passed, 0 failed (SF001 {}, 40001 {}, map loads {})",
        c.0,
        app.stats.moved.load(Relaxed),
        app.stats.conflicts.load(Relaxed),
        app.stats.loads.load(Relaxed)
    );
}
