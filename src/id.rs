//! The pure wing: what IDs are, as plain arithmetic and parsing. Nothing here calls
//! PostgreSQL, so all of it is tested exhaustively by `cargo test` (property tests over
//! whole ranges).

/// The server's mask key file, read and checked (plain `std::fs`).
pub mod key_file;
/// The layouts by name, Instagram's among them: decode, compose, the generator's view, what
/// can be wrong.
pub mod layouts;
/// Mask: a keyed permutation of the non-negative 63-bit range (`id_mask`).
pub mod mask;
/// The next-ID rule: given the newest ID and the clock, the next ID or a wait.
pub mod rule;
/// The 13-character Crockford base32 text form (`id_to_text`).
pub mod text_form;
/// Unix milliseconds as PostgreSQL writes a UTC time, for messages.
pub mod utc;
/// The time inside UUIDs, ULIDs and ObjectIDs.
pub mod wide_ids;
