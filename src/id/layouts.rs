//! 64-bit ID layouts as data: each is an epoch, a time unit, the width of the time field and
//! the fields below it, most significant first. Instagram's is one of them, and its numbers
//! (8191 shards, 1024 IDs per millisecond, the 2046 horizon) come from its row here. No
//! PostgreSQL here.
//!
//! ```text
//!  layout     epoch (Unix ms)   unit   time | fields below it
//!  instagram  1314220021721     1 ms   41   | shard 13 | seq 10
//!  twitter    1288834974657     1 ms   41   | datacenter 5 | worker 5 | sequence 12
//!  discord    1420070400000     1 ms   41   | worker 5 | process 5 | increment 12
//!  sonyflake  1409529600000     10 ms  39   | sequence 8 | machine 16
//!  pgedge     1672531200000     1 ms   41   | node 10 | count 12
//!  mastodon   0                 1 ms   48   | sequence 16
//!  tsid       1577836800000     1 ms   42   | node_counter 22
//! ```
//!
//! A layout fills 63 or 64 bits of a bigint. With 63 the sign bit is unused; with 64 it is
//! the time field's top bit, which a non-negative bigint cannot set. Either way every valid
//! ID is a non-negative bigint, every non-negative bigint decodes, and the largest time a
//! layout holds is [`Layout::max_time`], its *horizon*. Fields are taken with masks, never
//! sign-extending shifts, and every shift is on 64 bits.
//!
//! Generation (`next_id` with a layout) needs a layout shaped `time | node | counter` in
//! milliseconds, the counter being the lowest field: [`Layout::shape`] gives the generator
//! that view ([`Shape`]), and the rule (`rule.rs`) is written against it, so that
//! Instagram's layout and Twitter's run the same code with different numbers.

/// One field below the time, named as its owners name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub bits: u32,
}

/// A named 64-bit layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub name: &'static str,
    /// The time field's zero, in Unix milliseconds (UTC).
    pub epoch_unix_ms: i64,
    /// Milliseconds per unit of the time field.
    pub unit_ms: i64,
    pub time_bits: u32,
    /// The fields below the time, most significant first.
    pub fields: &'static [Field],
    /// Whether `next_id` generates IDs in this layout (see [`Layout::shape`]).
    pub generates: bool,
}

/// The most fields any layout has below its time.
pub const MAX_FIELDS: usize = 3;

/// What can be wrong with a layout name, an ID, or a value for a layout. Each names what is
/// valid; `pg::error` gives each its SQLSTATE and message, one message per condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// A name no layout has: `name` is the name as a message shows it (at most a name's
    /// length of it, escaped: `text_arg::shown`).
    UnknownLayout {
        name: String,
    },
    NegativeId(i64),
    FieldOutOfRange {
        layout: &'static str,
        field: &'static str,
        value: i64,
        max: i64,
    },
    /// A time (Unix ms; i64::MAX/MIN for ±infinity) before the epoch or past the horizon.
    TimeOutOfRange {
        unix_ms: i64,
        epoch_unix_ms: i64,
        horizon_unix_ms: i64,
    },
    NotGenerated {
        layout: &'static str,
    },
    /// An epoch that is infinite or not a whole millisecond.
    BadEpoch,
    /// A generator's epoch later than the clock: its IDs would claim the epoch's time.
    FutureEpoch {
        epoch_unix_ms: i64,
        clock_unix_ms: i64,
    },
    /// The decoded time lies outside PostgreSQL's timestamp range (a custom epoch far out).
    TimeOutsideTimestamp {
        layout: &'static str,
    },
}

/// An ID taken apart: its time (in the layout's units since its epoch) and its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    pub time: i64,
    pub values: [i64; MAX_FIELDS],
}

impl Layout {
    /// Bits below the time: where the time field starts.
    pub const fn time_shift(&self) -> u32 {
        let mut bits = 0;
        let mut i = 0;
        while i < self.fields.len() {
            bits += self.fields[i].bits;
            i += 1;
        }
        bits
    }

    /// 63 (the sign bit unused) or 64 (the sign bit is the time's top bit).
    pub const fn total_bits(&self) -> u32 {
        self.time_bits + self.time_shift()
    }

    /// The largest time a non-negative ID holds, in units since the epoch.
    pub const fn max_time(&self) -> i64 {
        let usable = if self.total_bits() == 64 {
            self.time_bits - 1
        } else {
            self.time_bits
        };
        (1_i64 << usable) - 1
    }

    /// Where field `i` starts.
    pub const fn field_shift(&self, i: usize) -> u32 {
        let mut shift = 0;
        let mut j = self.fields.len();
        while j > i + 1 {
            j -= 1;
            shift += self.fields[j].bits;
        }
        shift
    }

    pub const fn field_max(&self, i: usize) -> i64 {
        (1_i64 << self.fields[i].bits) - 1
    }

    /// Takes a non-negative ID apart.
    #[inline]
    pub fn decode(&self, id: i64) -> Result<Decoded, LayoutError> {
        if id < 0 {
            return Err(LayoutError::NegativeId(id));
        }
        let mut values = [0; MAX_FIELDS];
        for (i, v) in values.iter_mut().enumerate().take(self.fields.len()) {
            *v = (id >> self.field_shift(i)) & self.field_max(i);
        }
        Ok(Decoded {
            time: id >> self.time_shift(),
            values,
        })
    }

    /// Builds an ID from a time (units since the epoch) and one value per field, all checked
    /// in that order.
    pub fn compose(&self, time: i64, values: &[i64]) -> Result<i64, LayoutError> {
        assert_eq!(values.len(), self.fields.len(), "one value per field");
        if !(0..=self.max_time()).contains(&time) {
            let unix_ms = time
                .saturating_mul(self.unit_ms)
                .saturating_add(self.epoch_unix_ms);
            return Err(self.time_out_of_range(unix_ms));
        }
        let mut id = time << self.time_shift();
        for (i, &value) in values.iter().enumerate() {
            let max = self.field_max(i);
            if !(0..=max).contains(&value) {
                return Err(self.out_of_range(self.fields[i].name, value, max));
            }
            id |= value << self.field_shift(i);
        }
        Ok(id)
    }

    /// A Unix millisecond as whole units since the epoch (rounded down), refused outside the
    /// layout's range.
    pub fn time_of(&self, unix_ms: i64) -> Result<i64, LayoutError> {
        match unix_ms.checked_sub(self.epoch_unix_ms) {
            Some(ms) if (0..=self.max_time().saturating_mul(self.unit_ms)).contains(&ms) => {
                Ok(ms / self.unit_ms)
            }
            _ => Err(self.time_out_of_range(unix_ms)),
        }
    }

    /// A decoded time as Unix milliseconds, from `epoch_unix_ms` (the layout's own epoch, or a
    /// deployment's). Exact: a time is a whole number of units.
    #[inline]
    pub fn unix_ms(&self, time: i64, epoch_unix_ms: i64) -> Option<i64> {
        time.checked_mul(self.unit_ms)?.checked_add(epoch_unix_ms)
    }

    /// The generator's view of this layout: `time | node | counter` in milliseconds, the node
    /// being every field but the last. `None` for layouts `next_id` does not generate.
    pub const fn shape(&self) -> Option<Shape> {
        if !self.generates || self.unit_ms != 1 || self.fields.is_empty() {
            return None;
        }
        let seq_bits = self.fields[self.fields.len() - 1].bits;
        Some(Shape {
            node_bits: self.time_shift() - seq_bits,
            seq_bits,
            max_ms: self.max_time(),
        })
    }

    /// The generator's view, or the error naming the layouts that generate.
    pub fn generated(&self) -> Result<Shape, LayoutError> {
        self.shape()
            .ok_or(LayoutError::NotGenerated { layout: self.name })
    }

    /// `node` if the generator's view of this layout (`shape`) holds it, else the error naming
    /// the node as this layout does: its one field's name (Instagram's `shard`), or `node`
    /// when it spans several (Twitter's datacenter and worker). Inlined whole, so that for a
    /// constant layout the error is built from constants.
    #[inline(always)]
    pub fn check_node(&self, shape: &Shape, node: i32) -> Result<i32, LayoutError> {
        if (0..=shape.max_node()).contains(&node) {
            Ok(node)
        } else {
            let field = match self.fields {
                [one, _] => one.name,
                _ => "node",
            };
            Err(self.out_of_range(field, node as i64, shape.max_node() as i64))
        }
    }

    #[inline(always)]
    fn out_of_range(&self, field: &'static str, value: i64, max: i64) -> LayoutError {
        LayoutError::FieldOutOfRange {
            layout: self.name,
            field,
            value,
            max,
        }
    }

    fn time_out_of_range(&self, unix_ms: i64) -> LayoutError {
        LayoutError::TimeOutOfRange {
            unix_ms,
            epoch_unix_ms: self.epoch_unix_ms,
            horizon_unix_ms: self.epoch_unix_ms + self.max_time() * self.unit_ms,
        }
    }
}

/// A layout as the generator sees it: `time | node | counter`, the time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub node_bits: u32,
    pub seq_bits: u32,
    /// The last millisecond (since the epoch) a non-negative ID holds: the horizon.
    pub max_ms: i64,
}

impl Shape {
    pub const fn node_shift(&self) -> u32 {
        self.seq_bits
    }
    pub const fn time_shift(&self) -> u32 {
        self.seq_bits + self.node_bits
    }
    pub const fn max_node(&self) -> i32 {
        (1 << self.node_bits) - 1
    }
    pub const fn max_seq(&self) -> i32 {
        (1 << self.seq_bits) - 1
    }
}

const fn f(name: &'static str, bits: u32) -> Field {
    Field { name, bits }
}

/// A layout's row: name, epoch (Unix ms), unit (ms), time bits, fields, generated or not.
const fn layout(
    name: &'static str,
    epoch_unix_ms: i64,
    unit_ms: i64,
    time_bits: u32,
    fields: &'static [Field],
    generates: bool,
) -> Layout {
    Layout {
        name,
        epoch_unix_ms,
        unit_ms,
        time_bits,
        fields,
        generates,
    }
}

const GENERATED: bool = true;
const DECODED: bool = false;

/// Instagram, "Sharding & IDs at Instagram" (2012): 41 bits of ms since 2011-08-24
/// 21:07:01.721 UTC, a 13-bit logical shard, a 10-bit per-shard counter.
#[rustfmt::skip]
pub const INSTAGRAM: Layout = layout("instagram", 1_314_220_021_721, 1, 41, &[f("shard", 13), f("seq", 10)], GENERATED);

/// Twitter's snowflake (twitter-archive/snowflake, IdWorker.scala: `twepoch =
/// 1288834974657L`, datacenterIdBits 5, workerIdBits 5, sequenceBits 12).
#[rustfmt::skip]
pub const TWITTER: Layout = layout("twitter", 1_288_834_974_657, 1, 41, &[f("datacenter", 5), f("worker", 5), f("sequence", 12)], GENERATED);

/// Discord (developer docs, "Snowflakes"): Twitter's widths from 2015-01-01 UTC, internal
/// worker ID, internal process ID, increment.
#[rustfmt::skip]
pub const DISCORD: Layout = layout("discord", 1_420_070_400_000, 1, 41, &[f("worker", 5), f("process", 5), f("increment", 12)], GENERATED);

/// Sony's Sonyflake (sony/sonyflake, sonyflake.go): 39 bits of 10 ms units since
/// 2014-09-01 00:00:00 UTC, an 8-bit sequence, a 16-bit machine ID, in that order.
#[rustfmt::skip]
pub const SONYFLAKE: Layout = layout("sonyflake", 1_409_529_600_000, 10, 39, &[f("sequence", 8), f("machine", 16)], DECODED);

/// pgEdge's snowflake extension (pgEdge/snowflake, snowflake.c: SNOWFLAKE_EPOCH_OFFSET
/// 1672531200 s, MSEC_SHIFT 22, NODE_SHIFT 12 with a 10-bit mask, COUNT_SHIFT 0 with a
/// 12-bit mask).
#[rustfmt::skip]
pub const PGEDGE: Layout = layout("pgedge", 1_672_531_200_000, 1, 41, &[f("node", 10), f("count", 12)], GENERATED);

/// Mastodon (lib/mastodon/snowflake.rb): 48 bits of Unix ms, then 16 bits of "sequence
/// data" (a hashed per-table sequence: not a counter, not a node).
#[rustfmt::skip]
pub const MASTODON: Layout = layout("mastodon", 0, 1, 48, &[f("sequence", 16)], DECODED);

/// TSID (f4b6a3/tsid-creator): 42 bits of ms since 2020-01-01 UTC, then 22 bits whose split
/// between node and counter is each deployment's choice (10 + 12 by default).
#[rustfmt::skip]
pub const TSID: Layout = layout("tsid", 1_577_836_800_000, 1, 42, &[f("node_counter", 22)], DECODED);

/// Every named layout, in the order docs/other-ids.md lists them.
pub const LAYOUTS: [&Layout; 7] = [
    &INSTAGRAM, &TWITTER, &DISCORD, &SONYFLAKE, &PGEDGE, &MASTODON, &TSID,
];

/// Instagram's layout as the generator sees it: shards are its nodes.
pub const INSTAGRAM_SHAPE: Shape = match INSTAGRAM.shape() {
    Some(shape) => shape,
    None => panic!("Instagram's layout generates"),
};

// Every layout fills 63 or 64 bits and has at most MAX_FIELDS fields.
const _: () = {
    let mut i = 0;
    while i < LAYOUTS.len() {
        let bits = LAYOUTS[i].total_bits();
        assert!(bits == 63 || bits == 64);
        assert!(LAYOUTS[i].fields.len() <= MAX_FIELDS);
        assert!(LAYOUTS[i].unit_ms >= 1);
        i += 1;
    }
};

/// The valid layout names, for messages: "instagram, twitter, ...".
pub fn names() -> String {
    LAYOUTS.map(|l| l.name).join(", ")
}

/// The layouts `next_id` generates, for messages.
pub fn generated_names() -> String {
    LAYOUTS
        .iter()
        .filter(|l| l.shape().is_some())
        .map(|l| l.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The layout called `name` (ASCII case-insensitive), from its bytes in any
/// ASCII-compatible encoding; `None` when no layout is called that (the caller names it).
#[inline]
pub fn by_name(name: &[u8]) -> Option<&'static Layout> {
    LAYOUTS
        .iter()
        .copied()
        .find(|l| l.name.as_bytes().eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests;
