//! The Rust recipe against a real server (PGHOST, PGPORT, PGUSER, PGDATABASE from
//! clients/run.sh): each ID handed back is its own row's, and all are distinct.

use snowflake_id_client_recipe::{insert_many, insert_one, DDL};
use std::collections::{HashMap, HashSet};
use std::process::exit;
use tokio_postgres::{Client, NoTls};

const N: usize = 2000;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn shard_of(id: i64) -> i64 {
    (id >> 10) & 8191
}

struct Checks(usize);

impl Checks {
    fn check(&mut self, name: &str, ok: bool) {
        if !ok {
            println!("FAIL: {name}");
            exit(1);
        }
        self.0 += 1;
        println!("ok: {name}");
    }
}

async fn table(client: &Client) -> HashMap<i64, String> {
    let rows = client
        .query("SELECT id, body FROM rs_item", &[])
        .await
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let config = format!(
        "host={} port={} user={} dbname={}",
        env("PGHOST"),
        env("PGPORT"),
        env("PGUSER"),
        env("PGDATABASE")
    );
    let (client, connection) = tokio_postgres::connect(&config, NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(DDL).await.unwrap();
    let mut c = Checks(0);

    let one = insert_one(&client, "one").await.unwrap();
    let rows = table(&client).await;
    c.check(
        "tokio-postgres: INSERT ... RETURNING id gives the row's own ID (shard 10)",
        rows.get(&one).map(String::as_str) == Some("one") && shard_of(one) == 10,
    );

    let bodies: Vec<String> = (0..N).map(|i| format!("many {i}")).collect();
    let many = insert_many(&client, &bodies).await.unwrap();
    let rows = table(&client).await;
    let ids: HashSet<i64> = many.iter().map(|(id, _)| *id).collect();
    c.check(
        &format!("tokio-postgres: a {N}-row INSERT ... RETURNING gives {N} distinct IDs, none the first row's"),
        many.len() == N && ids.len() == N && !ids.contains(&one),
    );
    c.check(
        "tokio-postgres: each ID is its own row's, and every row given came back",
        many.iter()
            .all(|(id, body)| rows.get(id) == Some(body) && shard_of(*id) == 10)
            && many.iter().map(|(_, b)| b).collect::<HashSet<_>>() == bodies.iter().collect(),
    );
    println!("rust clients: {} passed, 0 failed", c.0);
}
