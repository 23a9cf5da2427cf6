//! The SQL surface: the functions written in Rust, one module per part of the manual, and
//! the SQL written as SQL (`sql/*.sql`), loaded by the modules that need it.

/// IDs in applications (docs/applications.md): text form, masks, JSON, the `snowflake`
/// type, `convert_column`.
pub mod applications;
/// Instagram's layout (README.md): `next_id`, the decoders, `make_id`; the shard installer.
mod instagram;
/// Other people's IDs (docs/other-ids.md): named layouts, UUID/ULID/ObjectID times.
mod other_ids;
