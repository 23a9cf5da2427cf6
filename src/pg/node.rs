//! The node side of snowflake_id_router's protocol, and the router's own connections: what
//! a router or a node does with libpq inside a backend (docs/cluster-design.md).

/// A dynamic background worker that runs a router operation without its caller's session.
pub mod background;
/// One table's rows from another node into a local table: a remote COPY fed into COPY FROM.
pub mod copy_in;
/// A move's initial copy: the slot made on the source and every table copied at its snapshot.
pub mod copy_rows;
/// Which statements alter_shards runs: one schema change, read by PostgreSQL's parser.
pub mod ddl_statement;
/// Whether a database's schemas of the extensions can be changed by roles other than
/// superusers: checked before the router calls anything there.
pub mod home;
/// libpq inside a backend: interruptible waits, connections closed on every path.
pub mod libpq;
/// The router's connections: a registry of this backend's, bound to the role that opened
/// them and closed with the (sub)transaction.
pub mod remote;
