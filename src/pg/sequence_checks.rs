//! The checks `nextval()` makes before it issues a value, made here when what a backend
//! remembers of them (`sequence_cache`) no longer holds: the relation is a sequence, not
//! another session's temporary one, the user may use it, and its range; and the refusals
//! of read-only transactions and parallel mode. All of it is off the steady path, through
//! pgrx's guard.

use super::error::IdError;
use super::mirror::{self, SequenceOptions};
use super::sequence_cache::Checked;
use pgrx::pg_sys;
use std::ffi::CStr;

/// The checks nextval() makes on every call, and what they read of the relation (the
/// caller fills in where they were made).
#[cold]
#[inline(never)]
pub(super) fn check(relid: pg_sys::Oid, userid: pg_sys::Oid) -> Result<Checked, IdError> {
    let rel = Relation::open(relid);
    // SAFETY: rel is open, so rd_rel is valid.
    let (relkind, persistence, local_temp) = unsafe {
        let form = &*(*rel.0).rd_rel;
        (form.relkind, form.relpersistence, (*rel.0).rd_islocaltemp)
    };
    if relkind as u8 != pg_sys::RELKIND_SEQUENCE {
        return Err(IdError::NotASequence {
            relation: rel.name(),
        });
    }
    // RELATION_IS_OTHER_TEMP: its pages live in another backend's local buffers, and
    // ReadBuffer would raise this same error.
    if persistence as u8 == pg_sys::RELPERSISTENCE_TEMP && !local_temp {
        return Err(IdError::OtherSessionsTemporary {
            sequence: rel.name(),
        });
    }
    // SAFETY: catalog lookups on an open relation.
    let allowed = unsafe {
        pg_sys::pg_class_aclcheck(
            relid,
            userid,
            (pg_sys::ACL_USAGE | pg_sys::ACL_UPDATE) as pg_sys::AclMode,
        ) == pg_sys::AclResult::ACLCHECK_OK
    };
    if !allowed {
        return Err(IdError::PermissionDenied {
            sequence: rel.name(),
        });
    }
    let (min, max) = limits(relid);
    // SAFETY: rel is open.
    let (needs_wal, locator) = unsafe {
        (
            mirror::relation_needs_wal(rel.0),
            mirror::rel_locator(rel.0),
        )
    };
    Ok(Checked {
        userid,
        invalidations: 0,
        own_changes: true,
        lxid: 0,
        subxid: 0,
        cid: 0,
        local_temp,
        needs_wal,
        locator,
        min,
        max,
    })
}

/// Refuses a call in a read-only transaction (or on a standby), unless the sequence is
/// this session's temporary one, or in parallel mode: PostgreSQL's own errors (25006).
#[cold]
#[inline(never)]
pub(super) fn refuse_read_only_or_parallel(local_temp: bool) {
    // SAFETY: the Prevent* functions only run (through pgrx's guard) to raise their errors.
    unsafe {
        if pg_sys::XactReadOnly && !local_temp {
            pg_sys::PreventCommandIfReadOnly(c"next_id()".as_ptr());
        }
        pg_sys::PreventCommandIfParallelMode(c"next_id()".as_ptr());
    }
}

/// A relation opened through pgrx's guard (`try_relation_open` with NoLock: the caller
/// holds a lock), closed when dropped.
pub(super) struct Relation(pub(super) pg_sys::Relation);

impl Relation {
    #[inline(never)]
    pub(super) fn open(relid: pg_sys::Oid) -> Relation {
        // SAFETY: the caller holds a lock on relid; a missing relation is an ERROR.
        let rel = unsafe { pg_sys::try_relation_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE) };
        if rel.is_null() {
            pgrx::ereport!(
                ERROR,
                pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("sequence with OID {} does not exist", relid.to_u32())
            );
        }
        Relation(rel)
    }

    pub(super) fn name(&self) -> String {
        // SAFETY: rd_rel->relname is a NUL-terminated NameData while the relation is open.
        unsafe {
            CStr::from_ptr((*(*self.0).rd_rel).relname.data.as_ptr())
                .to_string_lossy()
                .into_owned()
        }
    }
}

impl Drop for Relation {
    fn drop(&mut self) {
        // SAFETY: opened in `open` with NoLock; the lock stays with the transaction.
        unsafe { pg_sys::relation_close(self.0, pg_sys::NoLock as pg_sys::LOCKMODE) }
    }
}

/// The sequence's MINVALUE and MAXVALUE, from `pg_sequence` (the syscache, as nextval()).
fn limits(relid: pg_sys::Oid) -> (i64, i64) {
    // SAFETY: SEQRELID lookup of a locked sequence; the tuple is released right after use.
    unsafe {
        let tuple =
            pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::SEQRELID as _, relid.into());
        if tuple.is_null() {
            pgrx::error!("cache lookup failed for sequence {}", relid.to_u32());
        }
        let options = &*(pg_sys::GETSTRUCT(tuple) as *const SequenceOptions);
        let limits = (options.seqmin, options.seqmax);
        pg_sys::ReleaseSysCache(tuple);
        limits
    }
}
