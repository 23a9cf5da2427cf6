//! Locks that prove something: ones only the extension's owner can take.
//!
//! A move's proof of life, its shard locks and the router's gates were advisory locks, and
//! any role connected to the database can take an advisory lock of any key
//! (`pg_advisory_lock(class, key)`): an application role holding one stopped a move, or kept
//! a dead mover's fence refusing writes. These are advisory locks too (the user lock method,
//! released on their own at the end of the session or transaction, shown in `pg_locks` as
//! `advisory`), in a key space no SQL function reaches: `pg_advisory_*` set the tag's fourth
//! field (`objsubid` in `pg_locks`) to 1 (one bigint key) or 2 (two integer keys); these set
//! it to [`OWN_KEYS`]. Only this library's functions take them, and those are closed to
//! PUBLIC (sql/node/remote.sql). Released by `pg_advisory_unlock_all()` like any advisory lock.

use pgrx::pg_sys;

/// `objsubid` of these locks in `pg_locks` (the lock tag's fourth field).
pub const OWN_KEYS: u16 = 3;

/// The lock tag of (class, key) in this database, in the owner's key space
/// (`SET_LOCKTAG_ADVISORY` with field4 = OWN_KEYS).
fn tag(class: i32, key: i32) -> pg_sys::LOCKTAG {
    pg_sys::LOCKTAG {
        // SAFETY: reads a backend global.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.into(),
        locktag_field2: class as u32,
        locktag_field3: key as u32,
        locktag_field4: OWN_KEYS,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

fn mode(shared: bool) -> pg_sys::LOCKMODE {
    (if shared {
        pg_sys::ShareLock
    } else {
        pg_sys::ExclusiveLock
    }) as pg_sys::LOCKMODE
}

/// Runs `f` with the current (sub)transaction's resource owner as the current one. A
/// transaction-level lock then belongs to the (sub)transaction that takes it, not to the
/// statement's portal, and passes to its parent's when a subtransaction commits: so a
/// SECURITY DEFINER function that must give its locks back before it returns can, from its
/// own level, whether it took one in a nested PL/pgSQL block (a wait under `lock_timeout`
/// inside `BEGIN ... EXCEPTION`) or directly. (`LockRelease` finds a hold only under the
/// owner that took it.) The current owner comes back on every path out, an error's unwinding
/// included, before PostgreSQL's abort runs.
fn as_transaction_owner<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(pg_sys::ResourceOwner);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: puts back the owner that was current on entry.
            unsafe { pg_sys::CurrentResourceOwner = self.0 }
        }
    }
    // SAFETY: backend globals, read and set in a transaction (SQL functions run in one).
    let _restore = Restore(unsafe { pg_sys::CurrentResourceOwner });
    unsafe { pg_sys::CurrentResourceOwner = pg_sys::CurTransactionResourceOwner };
    f()
}

/// Takes (class, key), for the session or the transaction, shared or exclusive. Without
/// `wait`, returns false at once if another session holds it in a conflicting mode; with
/// it, waits in the lock's queue (as `pg_advisory_lock` does) under the caller's
/// `lock_timeout` (55P03 then) and returns true. A transaction-level lock belongs to the
/// current (sub)transaction (`as_transaction_owner`).
pub fn acquire(class: i32, key: i32, session: bool, shared: bool, wait: bool) -> bool {
    let tag = tag(class, key);
    // SAFETY: a valid tag of the user lock method; an error (lock timeout, deadlock,
    // cancel) is PostgreSQL's, raised with the lock wait cleaned up by the abort.
    let got =
        as_transaction_owner(|| unsafe { pg_sys::LockAcquire(&tag, mode(shared), session, !wait) });
    got != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
}

/// Releases one hold of (class, key) taken by `acquire` with the same scope and mode, from
/// the same (sub)transaction level; whether this session held it there.
pub fn release(class: i32, key: i32, session: bool, shared: bool) -> bool {
    let tag = tag(class, key);
    // SAFETY: a valid tag of the user lock method; a lock not held gives a WARNING and false.
    as_transaction_owner(|| unsafe { pg_sys::LockRelease(&tag, mode(shared), session) })
}

/// Whether this session holds every (class, key) of `keys` exclusively (for the session or
/// the transaction), read from its own local lock table. `pg_locks` copies every lock of the
/// server: a mover holding a thousand shards' locks and their tables' read it once per DDL
/// command its event trigger saw (the seal's `ALTER SEQUENCE`s), seconds under a fence.
pub fn all_held(class: i32, keys: impl IntoIterator<Item = i32>) -> bool {
    keys.into_iter().all(|key| {
        let tag = tag(class, key);
        // SAFETY: a valid tag of the user lock method; reads this backend's own table only.
        unsafe {
            #[cfg(feature = "pg15")]
            let held = pg_sys::LockHeldByMe(&tag, mode(false));
            #[cfg(not(feature = "pg15"))]
            let held = pg_sys::LockHeldByMe(&tag, mode(false), false);
            held
        }
    })
}
