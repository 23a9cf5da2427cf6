//! Everything that can go wrong, and the one place it becomes a PostgreSQL error.
//!
//! Each variant maps to one SQLSTATE; each message says what was wrong and what is valid.
//! `error!` (XX000) is left for what cannot happen.

use crate::id::key_file::KeyFileError;
use crate::id::layouts;
use crate::id::layouts::LayoutError;
use crate::id::mask::KeyError;
use crate::id::text_form::TextError;
use crate::id::utc::utc;
use crate::id::wide_ids::WideIdError;
use crate::pg::node::copy_rows::CopyError;
use crate::pg::node::ddl_statement::DdlError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

#[derive(Debug)]
pub enum IdError {
    Layout(LayoutError),
    /// The sequence has issued IDs up to the horizon (Unix ms) of its layout and epoch.
    Exhausted {
        sequence: String,
        horizon_unix_ms: i64,
    },
    NotASequence {
        relation: String,
    },
    PermissionDenied {
        sequence: String,
    },
    /// Another session's temporary sequence: its pages are in that backend's memory.
    OtherSessionsTemporary {
        sequence: String,
    },
    /// `next_id(seq)` on a sequence that holds no ID to take the shard from.
    NoShardHeld {
        sequence: String,
        newest: i64,
    },
    /// The sequence's MINVALUE/MAXVALUE cannot hold the ID (e.g. `AS integer`).
    SequenceTooSmall {
        sequence: String,
        id: i64,
        min: i64,
        max: i64,
    },
    /// A sequence stopped at its newest value `value` (a range of two values ending there), as
    /// a move's seal leaves the copy it moved away from.
    SequenceStopped {
        sequence: String,
        value: i64,
    },
    /// A UUID, ULID or ObjectID; `character` is the offending one as a message shows it
    /// (`text_arg::char_at`), when the error names one.
    Wide {
        error: WideIdError,
        character: String,
    },
    /// Text that is not an ID's 13-character text form: `text` and the offending `character`
    /// as a message shows them (`text_arg::shown`).
    BadText {
        text: String,
        character: String,
        error: TextError,
    },
    BadMaskKey(KeyError),
    /// `id_mask(id)` without a key while `snowflake_id.mask_key_file` is unset.
    MaskKeyUnset,
    /// The file `snowflake_id.mask_key_file` names (`path` as a message shows it) holds no key.
    MaskKeyFile {
        path: String,
        error: KeyFileError,
    },
    /// A statement alter_shards will not run on every shard's schema.
    Ddl(DdlError),
    /// What a move's initial copy refuses or finds gone.
    Copy(CopyError),
}

impl From<LayoutError> for IdError {
    fn from(e: LayoutError) -> Self {
        IdError::Layout(e)
    }
}

impl From<DdlError> for IdError {
    fn from(e: DdlError) -> Self {
        IdError::Ddl(e)
    }
}

impl From<CopyError> for IdError {
    fn from(e: CopyError) -> Self {
        IdError::Copy(e)
    }
}

impl From<WideIdError> for IdError {
    fn from(error: WideIdError) -> Self {
        IdError::Wide {
            error,
            character: String::new(),
        }
    }
}

const MAKE_A_KEY: &str = "A random key: SELECT replace(gen_random_uuid()::text, '-', '')";
const MAKE_A_KEY_FILE: &str =
    "A random key, in a file only the server's user can read: umask 077; openssl rand -hex 16 > FILE";

impl IdError {
    fn parts(&self) -> (PgSqlErrorCode, String, Option<String>, Option<String>) {
        use PgSqlErrorCode::*;
        match self {
            IdError::Layout(e) => layout_parts(e),
            IdError::Exhausted { sequence, horizon_unix_ms } => (
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "sequence \"{sequence}\" has no snowflake IDs left: the next one would be past the horizon {}",
                    utc(*horizon_unix_ms)
                ),
                None,
                None,
            ),
            IdError::NotASequence { relation } => (
                ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{relation}\" is not a sequence"),
                None,
                None,
            ),
            IdError::PermissionDenied { sequence } => (
                ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("permission denied for sequence {sequence}"),
                None,
                None,
            ),
            IdError::OtherSessionsTemporary { sequence } => (
                ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("cannot use sequence \"{sequence}\": it is a temporary sequence of another session"),
                None,
                None,
            ),
            IdError::SequenceTooSmall { sequence, id, min, max } => (
                ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                format!("sequence \"{sequence}\" cannot hold snowflake IDs: its range is {min} to {max}"),
                Some(format!("The next ID would be {id}.")),
                Some(format!("ALTER SEQUENCE {sequence} AS bigint MINVALUE 1 MAXVALUE 9223372036854775807")),
            ),
            IdError::SequenceStopped { sequence, value } => (
                ERRCODE_T_R_SERIALIZATION_FAILURE,
                format!("sequence \"{sequence}\" issues no more IDs here: it is stopped at {value}, as a move of its shard to another node leaves it"),
                None,
                Some("Retry the transaction: the router sends it to the shard's new node.".into()),
            ),
            IdError::Wide { error, character } => wide_parts(error, character),
            IdError::Ddl(e) => ddl_parts(e),
            IdError::Copy(e) => copy_parts(e),
            IdError::BadText { text, character, error } => {
                let why = match error {
                    TextError::Length { chars } => format!("it has {chars} characters, the text form has 13"),
                    TextError::BadChar { position } => format!(
                        "character \"{character}\" at position {position} is not base32: valid are 0-9 and A-Z less U (I and L read as 1, O as 0)"
                    ),
                    TextError::TooLarge { ch } => format!(
                        "first character \"{ch}\" is above 7: IDs 0 to 9223372036854775807 read 0000000000000 to 7ZZZZZZZZZZZZ"
                    ),
                };
                (
                    ERRCODE_INVALID_TEXT_REPRESENTATION,
                    format!("invalid snowflake ID text \"{text}\": {why}"),
                    None,
                    None,
                )
            }
            IdError::BadMaskKey(e) => (
                ERRCODE_INVALID_PARAMETER_VALUE,
                match e {
                    KeyError::Length { chars } => format!("mask key has {chars} characters: a key is 32 hexadecimal digits (16 bytes)"),
                    KeyError::NotHex { position } => format!(
                        "mask key character at position {position} is not a hexadecimal digit: a key is 32 hexadecimal digits (16 bytes)"
                    ),
                },
                None,
                Some(MAKE_A_KEY.into()),
            ),
            IdError::NoShardHeld { sequence, newest } => (
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("sequence \"{sequence}\" holds no snowflake ID to take the shard from: its value {newest} is a plain counter"),
                Some("next_id(seq) continues the shard of the newest ID in the sequence.".into()),
                Some("Make it a shard's sequence with create_shard(schema, shard), or set its shard once with setval(seq, make_id(now(), shard)), or pass the shard: next_id(shard, seq).".into()),
            ),
            IdError::MaskKeyUnset => (
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "no mask key: snowflake_id.mask_key_file is not set".into(),
                None,
                Some(format!(
                    "Pass the key as the second argument, or have a superuser write a key file and name it in snowflake_id.mask_key_file. {MAKE_A_KEY_FILE}"
                )),
            ),
            IdError::MaskKeyFile { path, error } => {
                let (code, why) = match error {
                    KeyFileError::Unreadable(e) => (
                        if e.kind() == std::io::ErrorKind::NotFound { ERRCODE_UNDEFINED_FILE } else { ERRCODE_IO_ERROR },
                        format!("could not read it: {e}"),
                    ),
                    KeyFileError::NotAFile => (ERRCODE_CONFIG_FILE_ERROR, "it is not a regular file".into()),
                    KeyFileError::OpenToOthers { mode } => (
                        ERRCODE_CONFIG_FILE_ERROR,
                        format!("its permissions are {mode:04o}: users other than the server's may read or change it (chmod 600)"),
                    ),
                    KeyFileError::TooLong => (
                        ERRCODE_CONFIG_FILE_ERROR,
                        "it holds more than a key: 32 hexadecimal digits (16 bytes) and nothing else".into(),
                    ),
                    KeyFileError::Key(KeyError::Length { chars }) => (
                        ERRCODE_CONFIG_FILE_ERROR,
                        format!("it holds {chars} characters: a key is 32 hexadecimal digits (16 bytes)"),
                    ),
                    KeyFileError::Key(KeyError::NotHex { position }) => (
                        ERRCODE_CONFIG_FILE_ERROR,
                        format!("its character at position {position} is not a hexadecimal digit: a key is 32 hexadecimal digits (16 bytes)"),
                    ),
                };
                (code, format!("mask key file \"{path}\": {why}"), None, Some(MAKE_A_KEY_FILE.into()))
            }
        }
    }

    /// The error's SQLSTATE, message and hint, for where PostgreSQL raises it (a GUC check
    /// hook).
    pub fn for_check_hook(&self) -> (PgSqlErrorCode, String, Option<String>) {
        let (code, message, _, hint) = self.parts();
        (code, message, hint)
    }

    /// Raises this error in PostgreSQL; does not return.
    pub fn report(self) -> ! {
        let (code, message, detail, hint) = self.parts();
        let mut report = ErrorReport::new(code, message, "snowflake_id");
        if let Some(detail) = detail {
            report = report.set_detail(detail);
        }
        if let Some(hint) = hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ERROR does not return")
    }
}

type Parts = (PgSqlErrorCode, String, Option<String>, Option<String>);

fn layout_parts(e: &LayoutError) -> Parts {
    use PgSqlErrorCode::*;
    match e {
        LayoutError::UnknownLayout { name } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("unknown ID layout \"{name}\": valid layouts are {}", layouts::names()),
            None,
            None,
        ),
        LayoutError::NegativeId(id) => (
            ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("snowflake ID {id} is negative: valid IDs are 0 to 9223372036854775807"),
            None,
            None,
        ),
        LayoutError::FieldOutOfRange { layout, field, value, max } => (
            ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{field} {value} is out of range for the {layout} layout: valid values are 0 to {max}"),
            None,
            None,
        ),
        LayoutError::TimeOutOfRange { unix_ms, epoch_unix_ms, horizon_unix_ms } => (
            ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!(
                "time {} is {}: IDs hold times from {} (the epoch) to {} (the horizon)",
                utc(*unix_ms),
                if unix_ms < epoch_unix_ms { "before the snowflake ID epoch" } else { "past the snowflake ID horizon" },
                utc(*epoch_unix_ms),
                utc(*horizon_unix_ms)
            ),
            None,
            None,
        ),
        LayoutError::NotGenerated { layout } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("next_id does not generate the {layout} layout: it generates {}", layouts::generated_names()),
            Some("Layouts whose fields below the time are a node and a counter, in milliseconds, are generated.".into()),
            None,
        ),
        LayoutError::BadEpoch => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            "an ID epoch must be a finite timestamp on a whole millisecond".into(),
            None,
            None,
        ),
        LayoutError::FutureEpoch { epoch_unix_ms, clock_unix_ms } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "epoch {} is later than the clock ({}): IDs made now would claim the epoch's time",
                utc(*epoch_unix_ms),
                utc(*clock_unix_ms)
            ),
            Some("A new deployment's epoch is a time already past, e.g. the start of the current year.".into()),
            None,
        ),
        LayoutError::TimeOutsideTimestamp { layout } => (
            ERRCODE_DATETIME_FIELD_OVERFLOW, // 22008, datetime_value_out_of_range
            format!("the time of this {layout} ID from the given epoch is outside PostgreSQL's timestamp range"),
            None,
            None,
        ),
    }
}

fn ddl_parts(e: &DdlError) -> Parts {
    use PgSqlErrorCode::*;
    match e {
        DdlError::NotOneStatement { count } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("alter_shards runs exactly one statement, and this text holds {count}"),
            None,
            Some("Call alter_shards once for each statement: each call is a change of its own, recorded and resumed on its own.".into()),
        ),
        DdlError::OutsideTransaction { what } => (
            ERRCODE_ACTIVE_SQL_TRANSACTION,
            format!("alter_shards cannot run {what}: each node applies a change in one transaction"),
            None,
            Some(format!(
                "Without CONCURRENTLY each node builds it in its one transaction (writes to the tables wait meanwhile); or run {what} on each shard by hand."
            )),
        ),
        DdlError::NotASchemaChange { tag } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("alter_shards runs schema changes, and {tag} is not one"),
            None,
            Some("It runs CREATE, ALTER, DROP, COMMENT, GRANT and the like on the objects of every shard's schema; queries, row changes, maintenance and server commands are each node's own.".into()),
        ),
        DdlError::RunsAQuery { tag } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("alter_shards does not run {tag}: it would run a query on every shard of every node"),
            None,
            Some("Make the object with a schema change (CREATE TABLE %I.t (...), CREATE VIEW ..., CREATE MATERIALIZED VIEW ... WITH NO DATA), then fill it shard by shard as your own work.".into()),
        ),
        DdlError::StrayPercent => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            "alter_shards: the statement holds a % other than %I (the schema) and %% (a percent sign)".into(),
            None,
            Some("Write a percent sign in a literal as %%, e.g. DEFAULT '100%%'.".into()),
        ),
        DdlError::NoPlaceholder => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            "alter_shards: the statement does not name the schema: write %I where it goes, e.g. ALTER TABLE %I.posts ...".into(),
            None,
            None,
        ),
        DdlError::PlaceholderNotAName { at } => (
            ERRCODE_SYNTAX_ERROR,
            format!("alter_shards: the %I at character {at} is not a name standing alone: it is inside a string constant, a dollar-quoted string, a quoted name or a comment, or joined to the text beside it"),
            None,
            Some("%I stands for a schema's name, quoted, and goes only where a name does (ALTER TABLE %I.posts): in a string a name holding a quote would end the string and write SQL of its own.".into()),
        ),
    }
}

fn copy_parts(e: &CopyError) -> Parts {
    use crate::pg::node::copy_rows::MAX_CONNSTR_BYTES;
    use PgSqlErrorCode::*;
    match e {
        CopyError::NulInConnstr => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            "connect string contains a NUL byte".into(),
            None,
            None,
        ),
        CopyError::ConnstrTooLong { bytes } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("connect string of {bytes} bytes is too long: at most {MAX_CONNSTR_BYTES}"),
            None,
            None,
        ),
        CopyError::BadSlotName => (
            ERRCODE_INVALID_NAME,
            "a move's slot name is made of lower-case letters, digits and _".into(),
            None,
            None,
        ),
        CopyError::WrongSource { reached, source } => (
            ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("the source's connect string reaches database {reached}, not the move's source {source}"),
            None,
            None,
        ),
        CopyError::TableGone { relid } => (
            ERRCODE_UNDEFINED_TABLE,
            format!("table {relid} of the move's copy no longer exists"),
            None,
            Some("repair_moves() (or the next move of these shards) undoes the move: move them again.".into()),
        ),
        CopyError::EndedEarly { what } => (
            ERRCODE_PROTOCOL_VIOLATION,
            format!("{what}: the local COPY ended before the source's data"),
            None,
            None,
        ),
    }
}

fn wide_parts(e: &WideIdError, character: &str) -> Parts {
    use PgSqlErrorCode::*;
    match e {
        WideIdError::UuidWithoutTime { version, rfc_variant: true } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            format!("a version {version} UUID holds no time: uuid_timestamp reads versions 1, 6 and 7"),
            None,
            None,
        ),
        WideIdError::UuidWithoutTime { .. } => (
            ERRCODE_INVALID_PARAMETER_VALUE,
            "this UUID is not of RFC 9562's variant (its variant bits are not 10), so it holds no time: uuid_timestamp reads versions 1, 6 and 7".into(),
            None,
            None,
        ),
        WideIdError::BadLength { kind, length, expected } => (
            ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid {kind}: {length} characters, a {kind} has {expected}"),
            None,
            None,
        ),
        WideIdError::BadCharacter { kind, position } => (
            ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!(
                "invalid {kind}: character '{character}' at position {position} is not {}",
                if *kind == "ULID" { "Crockford base32 (0-9 and A-Z without I, L, O, U, in either case)" } else { "hexadecimal" }
            ),
            None,
            None,
        ),
        WideIdError::UlidOverflow { character } => (
            ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("invalid ULID: first character {character:?} is past '7', so the text holds more than 128 bits"),
            None,
            None,
        ),
    }
}

/// Unwraps a result or raises its error.
pub trait OrReport<T> {
    fn or_report(self) -> T;
}

impl<T, E: Into<IdError>> OrReport<T> for Result<T, E> {
    fn or_report(self) -> T {
        self.unwrap_or_else(|e| e.into().report())
    }
}
