//! A fast hasher for the memos' small integer keys (shapes, op fields, step sizes): perfcast
//! hashes its own keys, so it needs no flooding resistance (SipHash's), only speed and a
//! spread of the high bits hash tables index by.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate mixing of each 64-bit word (the golden-ratio constant of Fibonacci
/// hashing); byte slices are read 8 bytes at a time.
#[derive(Default, Clone, Copy)]
pub struct Mix(u64);

/// What a `HashMap` of [`Mix`]-hashed keys is built with.
pub type MixState = BuildHasherDefault<Mix>;

impl Hasher for Mix {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.write_u64(u64::from_le_bytes(b));
        }
        for b in words.remainder() {
            self.write_u64(*b as u64);
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(x as u64);
    }
    fn write_u16(&mut self, x: u16) {
        self.write_u64(x as u64);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn distinct_keys_hash_apart_and_bytes_read_as_words() {
        let h = |k: &dyn Fn(&mut Mix)| {
            let mut m = Mix::default();
            k(&mut m);
            m.finish()
        };
        assert_ne!(h(&|m| m.write_u64(1)), h(&|m| m.write_u64(2)));
        // Eight bytes are one word, little-endian.
        assert_eq!(h(&|m| m.write(&7u64.to_le_bytes())), h(&|m| m.write_u64(7)));
        let s = MixState::default();
        let keys: std::collections::HashSet<u64> = (0..1000u64)
            .map(|i| s.hash_one((i, i % 7, [i as u16; 3])))
            .collect();
        assert_eq!(keys.len(), 1000);
    }
}
