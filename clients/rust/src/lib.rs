//! The Rust recipe: tokio-postgres, the ID made by the column's `DEFAULT next_id(...)` and
//! handed back by the INSERT.

pub mod routing;

use tokio_postgres::{Client, Error};

pub const DDL: &str = "
    CREATE SEQUENCE rs_item_seq;
    CREATE TABLE rs_item (
        id   bigint PRIMARY KEY DEFAULT next_id(10, 'rs_item_seq'),
        body text NOT NULL UNIQUE)";

/// One row: `INSERT ... RETURNING id`.
pub async fn insert_one(client: &Client, body: &str) -> Result<i64, Error> {
    let row = client
        .query_one(
            "INSERT INTO rs_item (body) VALUES ($1) RETURNING id",
            &[&body],
        )
        .await?;
    Ok(row.get(0))
}

/// Many rows in one statement. RETURNING's row order is not promised, so each ID comes
/// back beside its row's `body`.
pub async fn insert_many(client: &Client, bodies: &[String]) -> Result<Vec<(i64, String)>, Error> {
    let rows = client
        .query(
            "INSERT INTO rs_item (body) SELECT unnest($1::text[]) RETURNING id, body",
            &[&bodies],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}
