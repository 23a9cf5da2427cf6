//! What a backend remembers per sequence between calls, as `sequence.c`'s `SeqTableData`
//! does for `nextval()`: one entry per sequence the session has used, so the fast path
//! holds when a statement or transaction uses several sequences in turn (a transaction
//! writing to several tables; Instagram's thousands of shards).
//!
//! Each entry holds (1) the transaction in which the backend last took the sequence's
//! `RowExclusiveLock` (once per transaction, as `lock_and_open_sequence`), (2) the buffer
//! that last held the sequence's page (`ReadRecentBuffer` checks that it still does), and
//! (3) the outcome of the checks `nextval()` makes on every call, with what decides how
//! long it holds (see `Sequence::open`).
//!
//! The table lives for the backend (each backend is one thread: pgrx enforces it) and, like
//! `SeqTable`, only grows: an entry is ~80 bytes, allocated once so that it never moves. Callers
//! hold a [`Slot`], a pointer to their sequence's entry, and read or set one field at a
//! time, so that no reference into the table is alive while PostgreSQL runs.

use pgrx::pg_sys;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;

/// The outcome of `nextval()`'s checks on a sequence, and where and when they were made.
#[derive(Clone, Copy)]
pub struct Checked {
    pub userid: pg_sys::Oid,
    /// `SharedInvalidMessageCounter` read *before* the check (after locking the sequence):
    /// any catalog change committed by another session since the check began (a REVOKE,
    /// ALTER SEQUENCE, DROP), even one that committed while the check itself waited for a
    /// catalog lock, has moved it.
    pub invalidations: u64,
    /// Whether the checking transaction had written anything (it had an XID): then the check
    /// may rest on its own uncommitted catalog changes (a GRANT), which a rollback undoes
    /// without any invalidation message, so the check holds only where it was made.
    pub own_changes: bool,
    /// Where the check was made: transaction, subtransaction (a `ROLLBACK TO` starts a new
    /// one) and command.
    pub lxid: pg_sys::LocalTransactionId,
    pub subxid: pg_sys::SubTransactionId,
    pub cid: pg_sys::CommandId,
    /// What the check read from the relation and its catalog row. The file locator and
    /// whether changes are WAL-logged change only with the catalog (ALTER SEQUENCE ...
    /// RESTART, TRUNCATE ... RESTART IDENTITY give the sequence a new file), so they hold
    /// exactly as long as the check does; the fast path needs no relcache lookup.
    pub local_temp: bool,
    pub needs_wal: bool,
    pub locator: super::mirror::RelFileLocator,
    pub min: i64,
    pub max: i64,
}

impl Checked {
    /// No check made yet: its user, `InvalidOid`, is no session's.
    const NONE: Checked = Checked {
        userid: pg_sys::InvalidOid,
        invalidations: 0,
        own_changes: true,
        lxid: 0,
        subxid: 0,
        cid: 0,
        local_temp: false,
        needs_wal: true,
        // SAFETY: three OIDs; all zero is InvalidOid's.
        locator: unsafe { std::mem::zeroed() },
        min: 0,
        max: 0,
    };
}

/// One sequence's entry: allocated once and never freed (the table, like `SeqTable`, only
/// grows), so that a [`Slot`] pointing at it stays valid for the backend's life.
struct Entry {
    relid: pg_sys::Oid,
    /// The local transaction ID in which this backend took the sequence's lock (0: never).
    locked_in: pg_sys::LocalTransactionId,
    /// The buffer that last held the sequence's page (0: none yet).
    recent_buffer: pg_sys::Buffer,
    checked: Checked,
}

/// A multiplicative hash of the OID: OIDs are distinct small integers, and this table is
/// looked up on every call (std's SipHash costs more than the rest of the lookup).
#[derive(Default)]
struct OidHasher(u64);

impl Hasher for OidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64 ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The entries by OID, and the latest one used: a stream of calls on one sequence finds its
/// entry with one comparison, and the steady path's code stays a few instructions (the
/// index is off it, in `slot_of_other`).
struct Table {
    slots: HashMap<pg_sys::Oid, Slot, BuildHasherDefault<OidHasher>>,
    latest: Option<Slot>,
}

/// The backend's table. A `static` rather than a `thread_local!`: a backend is one thread,
/// and the lookup is on the hot path.
struct BackendLocal(UnsafeCell<Table>);
// SAFETY: PostgreSQL backends are single-threaded; only the backend's thread touches this.
unsafe impl Sync for BackendLocal {}

static TABLE: BackendLocal = BackendLocal(UnsafeCell::new(Table {
    slots: HashMap::with_hasher(BuildHasherDefault::new()),
    latest: None,
}));

/// The table. Only this backend's thread uses it, never re-entrantly: each use below is one
/// expression that makes no PostgreSQL call while the reference lives.
fn table() -> &'static mut Table {
    // SAFETY: as above.
    unsafe { &mut *TABLE.0.get() }
}

/// A sequence's entry. Its fields are read and written through the pointer one at a time,
/// each access one expression (no reference into an entry is held across anything else).
#[derive(Clone, Copy)]
pub struct Slot(NonNull<Entry>);

/// The entry of `relid`, made blank if the sequence is new.
#[inline(always)]
pub fn slot(relid: pg_sys::Oid) -> Slot {
    match table().latest {
        Some(slot) if slot.relid() == relid => slot,
        _ => slot_of_other(relid),
    }
}

/// `slot` for a sequence other than the latest one used. The table grows with the number
/// of sequences a session uses, which a caller chooses: both allocations are fallible and a
/// failure is PostgreSQL's 53200 (a failed Rust allocation would abort the backend).
#[inline(never)]
fn slot_of_other(relid: pg_sys::Oid) -> Slot {
    let table = table();
    if let Some(&slot) = table.slots.get(&relid) {
        table.latest = Some(slot);
        return slot;
    }
    if table.slots.try_reserve(1).is_err() {
        out_of_memory();
    }
    let layout = std::alloc::Layout::new::<Entry>();
    // SAFETY: Entry is not zero-sized; the pointer is checked, then written before use.
    let entry = unsafe { std::alloc::alloc(layout) } as *mut Entry;
    let Some(entry) = NonNull::new(entry) else {
        out_of_memory()
    };
    // SAFETY: freshly allocated for an Entry, never freed (see `Entry`).
    unsafe {
        entry.as_ptr().write(Entry {
            relid,
            locked_in: 0,
            recent_buffer: 0,
            checked: Checked::NONE,
        })
    };
    let slot = Slot(entry);
    table.slots.insert(relid, slot);
    table.latest = Some(slot);
    slot
}

#[cold]
fn out_of_memory() -> ! {
    pgrx::ereport!(
        ERROR,
        pgrx::PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        "out of memory",
        "Failed to remember one more sequence in this session."
    );
}

// SAFETY (every method): the entry is a leaked box, alive for the backend, and touched only
// by the backend's thread, one field per expression.
impl Slot {
    #[inline(always)]
    pub fn relid(self) -> pg_sys::Oid {
        unsafe { (*self.0.as_ptr()).relid }
    }

    #[inline(always)]
    pub fn locked_in(self) -> pg_sys::LocalTransactionId {
        unsafe { (*self.0.as_ptr()).locked_in }
    }

    #[inline(always)]
    pub fn set_locked_in(self, lxid: pg_sys::LocalTransactionId) {
        unsafe { (*self.0.as_ptr()).locked_in = lxid }
    }

    #[inline(always)]
    pub fn recent_buffer(self) -> pg_sys::Buffer {
        unsafe { (*self.0.as_ptr()).recent_buffer }
    }

    pub fn set_recent_buffer(self, buffer: pg_sys::Buffer) {
        unsafe { (*self.0.as_ptr()).recent_buffer = buffer }
    }

    /// The latest check (inlined, only the fields the caller reads are loaded); its user is
    /// `InvalidOid` before the first.
    #[inline(always)]
    pub fn checked(self) -> Checked {
        unsafe { (*self.0.as_ptr()).checked }
    }

    #[inline(always)]
    pub fn set_checked(self, checked: Checked) {
        unsafe { (*self.0.as_ptr()).checked = checked }
    }
}
