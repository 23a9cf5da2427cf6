//! snowflake_id: Instagram-style 64-bit, time-sortable IDs minted inside PostgreSQL.
//!
//! The crate in three wings, each using only the ones below it:
//!
//! - `sql`: the SQL surface. Each function converts types and hands the work down; the SQL
//!   written as SQL (`sql/*.sql`: shards, the `snowflake` type, `convert_column`) is loaded
//!   there too.
//! - `pg`: PostgreSQL's internals. The generator (clock + rule + the sequence's tuple as
//!   durable state, read and written as `sequence.c` does), what a backend remembers per
//!   sequence, the C structs mirrored, fmgr, time, and the one error type with its SQLSTATEs.
//! - `id`: plain Rust, no PostgreSQL: the layouts (Instagram's among them) and how IDs are
//!   taken apart and put together in them, the next-ID rule, the text form, the mask, the
//!   times inside UUIDs, ULIDs and ObjectIDs. Unit- and property-tested by `cargo test`.
//!
//! docs/development.md maps every file.

mod id;
mod pg;
mod sql;

::pgrx::pg_module_magic!(name, version);

#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    pg::generator::init();
    pg::mask_key_file::init();
    pg::node::remote::init();
    // Every snowflake_id.* setting is now defined: any other is a typo or a setting of an
    // older release (0.2.0's snowflake_id.mask_key held the key itself). PostgreSQL warns
    // about each and removes its placeholder, whose value any role could read.
    // SAFETY: called from _PG_init, after the definitions, as the GUC API requires.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"snowflake_id".as_ptr()) };
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
