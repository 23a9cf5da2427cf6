//! Masked IDs: a keyed, reversible permutation of the non-negative 63-bit range.
//!
//! A public ID that is the raw snowflake ID tells anyone its creation time, its shard and, by
//! subtracting two of them, how many were made in between. `mask` maps an ID to an unrelated
//! looking value in the same range (0 to 2^63 - 1), and `unmask` maps it back, with a 128-bit
//! key.
//!
//! Construction: the standard alternating Feistel network of NIST SP 800-38G's FF1, on
//! bits: the 63 bits split into A (high 31) and B (low 32); each of 10 rounds replaces
//! `(A, B)` by `(B, A xor F(round, B))`, F truncated to A's width, so the halves swap widths
//! each round and after an even number of rounds the result is again 31 + 32 bits. Every
//! value in range maps to a value in range, exactly, with no cycle-walking. The round function
//! F is SipHash-2-4 (the `siphasher` crate), a keyed pseudo-random function, over the round
//! number and the half. A Feistel network with a PRF as round function is a permutation
//! whatever F is; with a good PRF and enough rounds (FF1 uses 10) it is a pseudo-random
//! permutation. Nothing here is a new cipher: only the network's bookkeeping is ours.
//!
//! What it is not: not a MAC (any 63-bit value unmasks to some ID: check that the ID exists),
//! not encryption of anything else, and the key is everything: whoever has it maps every
//! public ID back to its time, shard and count.

use siphasher::sip::SipHasher24;
use std::hash::Hasher;

const ROUNDS: u8 = 10;
const HIGH_BITS: u32 = 31;
const LOW_BITS: u32 = 32;

/// A mask key: 16 bytes, written as 32 hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key([u8; 16]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)") // never print a key
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// Not 32 characters long (all of them hexadecimal digits, so ASCII).
    Length { chars: usize },
    /// A character that is not a hexadecimal digit, at a 1-based position (those before it
    /// are digits, so ASCII: bytes count as characters).
    NotHex { position: usize },
}

impl Key {
    #[cfg(test)]
    pub const fn from_bytes(bytes: [u8; 16]) -> Key {
        Key(bytes)
    }

    /// Reads 32 hexadecimal digits (either case), from text in any ASCII-compatible
    /// encoding, in place. Errors never repeat the key's characters.
    pub fn parse(hex: &[u8]) -> Result<Key, KeyError> {
        if let Some(at) = hex.iter().position(|&c| hex_digit(c).is_none()) {
            return Err(KeyError::NotHex { position: at + 1 });
        }
        if hex.len() != 32 {
            return Err(KeyError::Length { chars: hex.len() });
        }
        let mut bytes = [0u8; 16];
        for (b, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            *b = hex_digit(pair[0]).unwrap_or(0) << 4 | hex_digit(pair[1]).unwrap_or(0);
        }
        Ok(Key(bytes))
    }

    /// The round function: SipHash-2-4 of (round, half), keyed.
    fn f(&self, round: u8, half: u64) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.0);
        let mut msg = [0u8; 9];
        msg[0] = round;
        msg[1..].copy_from_slice(&half.to_le_bytes());
        h.write(&msg);
        h.finish()
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

const fn ones(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// Width of the half that round `i` replaces (FF1's m): A's width on even rounds.
const fn width(round: u8) -> u32 {
    if round.is_multiple_of(2) {
        HIGH_BITS
    } else {
        LOW_BITS
    }
}

/// The masked form of a non-negative ID (the caller refuses negative ones).
pub fn mask(id: i64, key: &Key) -> i64 {
    debug_assert!(id >= 0);
    let x = id as u64;
    let (mut a, mut b) = (x >> LOW_BITS, x & ones(LOW_BITS));
    for round in 0..ROUNDS {
        let c = a ^ (key.f(round, b) & ones(width(round)));
        a = b;
        b = c;
    }
    (a << LOW_BITS | b) as i64
}

/// The ID a masked value stands for: `unmask(mask(id, k), k) == id`.
pub fn unmask(masked: i64, key: &Key) -> i64 {
    debug_assert!(masked >= 0);
    let x = masked as u64;
    let (mut a, mut b) = (x >> LOW_BITS, x & ones(LOW_BITS));
    for round in (0..ROUNDS).rev() {
        let prev_a = b ^ (key.f(round, a) & ones(width(round)));
        b = a;
        a = prev_a;
    }
    (a << LOW_BITS | b) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const K: Key = Key::from_bytes(*b"0123456789abcdef");

    fn any_key() -> impl Strategy<Value = Key> {
        any::<[u8; 16]>().prop_map(Key::from_bytes)
    }

    #[test]
    fn keys_are_32_hex_digits() {
        let k = Key::parse(b"000102030405060708090a0B0c0D0e0F").unwrap();
        assert_eq!(
            k,
            Key::from_bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
        );
        assert_eq!(Key::parse(b""), Err(KeyError::Length { chars: 0 }));
        assert_eq!(
            Key::parse("a".repeat(31).as_bytes()),
            Err(KeyError::Length { chars: 31 })
        );
        assert_eq!(
            Key::parse("a".repeat(50 << 20).as_bytes()),
            Err(KeyError::Length { chars: 50 << 20 })
        );
        // Any other character is named by its position, never by itself.
        assert_eq!(
            Key::parse("é".repeat(16).as_bytes()),
            Err(KeyError::NotHex { position: 1 })
        );
        assert_eq!(
            Key::parse(b"0123\xe9"),
            Err(KeyError::NotHex { position: 5 })
        );
        let bad = format!("{}g{}", "0".repeat(7), "0".repeat(24));
        assert_eq!(
            Key::parse(bad.as_bytes()),
            Err(KeyError::NotHex { position: 8 })
        );
        // A UUID's text: the dash is named before the length.
        assert_eq!(
            Key::parse(b"00010203-0405-0607-0809-0a0b0c0d0e0f"),
            Err(KeyError::NotHex { position: 9 })
        );
        assert_eq!(format!("{k:?}"), "Key(..)");
    }

    #[test]
    fn fixed_vectors() {
        // Pinned so that a change to the construction (which would break every stored public
        // ID) cannot pass unnoticed.
        assert_eq!(mask(0, &K), 2_775_513_815_297_481_765);
        assert_eq!(mask(i64::MAX, &K), 2_426_201_182_889_369_604);
        assert_eq!(
            mask(4_000_000_000_000_000_000, &K),
            4_250_716_139_278_875_820
        );
    }

    /// Bijection: millions of consecutive IDs (at the start of the range and around a
    /// realistic ID), all distinct, all in range, all mapping back.
    #[test]
    fn no_collision_among_millions_of_consecutive_ids() {
        for (start, n) in [
            (4_000_000_000_000_000_000_i64, 2_000_000),
            (0, 500_000),
            (i64::MAX - 500_000, 500_001),
        ] {
            let mut out: Vec<i64> = (start..=start + (n - 1)).map(|i| mask(i, &K)).collect();
            assert!(out.iter().all(|&m| m >= 0), "out of range from {start}");
            out.sort_unstable();
            out.dedup();
            assert_eq!(out.len() as i64, n, "collision from {start}");
        }
    }

    /// Every ID of a block of 2^18 consecutive IDs maps back.
    #[test]
    fn a_block_round_trips() {
        for id in 4_000_000_000_000_000_000..4_000_000_000_000_262_144_i64 {
            assert_eq!(unmask(mask(id, &K), &K), id);
        }
    }

    /// Consecutive IDs map to unrelated values: about half the bits differ, in both
    /// halves, the order is a coin toss, and the gap tells nothing.
    #[test]
    fn consecutive_ids_map_to_unrelated_values() {
        let n = 200_000_i64;
        let start = 4_000_000_000_000_000_000_i64;
        let (mut bits, mut up, mut near) = (0u64, 0i64, 0i64);
        let mut min_bits = 64;
        for id in start..start + n {
            let (a, b) = (mask(id, &K), mask(id + 1, &K));
            let d = (a ^ b).count_ones();
            bits += d as u64;
            min_bits = min_bits.min(d);
            up += i64::from(b > a);
            near += i64::from((a - b).unsigned_abs() < 1 << 40);
        }
        let mean = bits as f64 / n as f64;
        assert!(
            (31.0..32.0).contains(&mean),
            "mean differing bits {mean}, expected ~31.5"
        );
        assert!(
            (0.49..0.51).contains(&(up as f64 / n as f64)),
            "{up} of {n} increase"
        );
        assert!(
            near < 10,
            "{near} neighbours masked within 2^40 of each other"
        );
        assert!(min_bits >= 5, "a pair differs in only {min_bits} bits");
    }

    /// Strict avalanche: flipping any one of the 63 input bits flips each of the 63 output
    /// bits with probability one half (here 0.44-0.56 over 2,000 IDs, for each of the
    /// 63 x 63 pairs). A network with too few rounds leaves some output bits tied to some
    /// input bits and fails this.
    #[test]
    fn every_input_bit_flips_every_output_bit_half_the_time() {
        let n = 2000;
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            // splitmix64: a fixed, reproducible stream of IDs
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 1) as i64
        };
        let mut flips = vec![[0u32; 63]; 63];
        for _ in 0..n {
            let id = next();
            let m = mask(id, &K);
            for (i, row) in flips.iter_mut().enumerate() {
                let d = m ^ mask(id ^ (1 << i), &K);
                for (j, count) in row.iter_mut().enumerate() {
                    *count += ((d >> j) & 1) as u32;
                }
            }
        }
        for (i, row) in flips.iter().enumerate() {
            for (j, &count) in row.iter().enumerate() {
                let p = count as f64 / n as f64;
                assert!(
                    (0.44..=0.56).contains(&p),
                    "input bit {i} flips output bit {j} with p = {p}"
                );
            }
        }
    }

    /// Another key gives another permutation.
    #[test]
    fn the_key_matters() {
        let other = Key::from_bytes(*b"0123456789abcdeg");
        let same = (0..100_000_i64)
            .filter(|&i| mask(i, &K) == mask(i, &other))
            .count();
        assert_eq!(same, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Over the whole non-negative range, any key: in range, and back exactly.
        #[test]
        fn round_trips(id in 0..=i64::MAX, key in any_key()) {
            let m = mask(id, &key);
            prop_assert!(m >= 0);
            prop_assert_eq!(unmask(m, &key), id);
            prop_assert_eq!(mask(unmask(id, &key), &key), id);
        }

        /// One flipped input bit flips about half the output bits (avalanche), never few.
        #[test]
        fn one_bit_changes_everything(id in 0..=i64::MAX, bit in 0u32..63) {
            let d = (mask(id, &K) ^ mask(id ^ (1 << bit), &K)).count_ones();
            prop_assert!(d >= 4, "{} bits", d);
        }
    }
}
