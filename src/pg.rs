//! The PostgreSQL wing: everything that touches PostgreSQL's internals, below the SQL
//! surface. Each unsafe module states at its top the invariants it keeps and the PostgreSQL
//! source it mirrors.

/// Queries on other roles' tables, run as their owner under restricted-operation rules.
pub mod as_owner;
/// Whether a stored expression calls only PostgreSQL's own IMMUTABLE functions (what a move
/// onto PostgreSQL 15 may have its superuser apply worker run).
pub mod builtin_only;
/// Everything that can go wrong, and the one place it becomes a PostgreSQL error.
pub mod error;
/// The version-1 calling convention, for functions written as C writes them.
pub mod fmgr;
/// `next_id`: the clock, the rule and the sequence's tuple, put together.
pub mod generator;
/// A query run with query cancels held off (a move from its seal to its flip).
pub mod hold_cancel;
/// The server's mask key, read from the file `snowflake_id.mask_key_file` names.
pub mod mask_key_file;
/// PostgreSQL's C structs and macros the generator needs, mirrored; the unguarded calls.
mod mirror;
/// The node side of snowflake_id_router's protocol and the router's connections: libpq in a
/// backend, the connection registry, a move's copy, alter_shards' statement.
pub mod node;
/// Locks only the extension's owner can take: advisory locks in a key space of their own.
pub mod own_lock;
/// A table's rows counted by a sequential scan, without the planner or anything its owner
/// defined.
pub mod row_count;
/// What a backend remembers per sequence between calls, as `sequence.c`'s `SeqTableData`.
mod sequence_cache;
/// The checks `nextval()` makes, made when what the cache remembers no longer holds.
mod sequence_checks;
/// A sequence opened as `nextval()` opens it, and its tuple as the generator's durable
/// state, WAL-logged ahead.
mod sequence_state;
/// `create_shard`'s reading of a template: its tables locked, then read at a snapshot taken
/// after the locks, once per statement.
pub mod template_read;
/// Text arguments read in place, as PostgreSQL's bytes, and shown safely in messages.
pub mod text_arg;
/// PostgreSQL's epoch and clock, and `timestamptz` to and from Unix milliseconds.
pub mod time;
/// Whether the caller's transaction can outlive the statement running now (a transaction
/// block), for the router's SECURITY DEFINER functions.
pub mod xact;
