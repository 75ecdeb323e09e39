//! A small seeded random number generator: xoshiro256** (Blackman & Vigna 2018, "Scrambled
//! linear pseudorandom number generators"), seeded through SplitMix64 (Steele, Lea & Flood
//! 2014) as its authors recommend. Deterministic across platforms; not cryptographic.

/// xoshiro256** state.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with rate `rate` (> 0): inverse transform of a uniform in (0, 1].
    pub fn exponential(&mut self, rate: f64) -> f64 {
        -(1.0 - self.next_f64()).ln() / rate
    }

    /// Uniform integer in `lo..=hi` (`lo <= hi`), by rejection (no modulo bias).
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        let span = (hi - lo) as u64 + 1;
        let zone = u64::MAX - (u64::MAX % span);
        loop {
            let x = self.next_u64();
            if x < zone {
                return lo + (x % span) as u32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_sequence_and_seed_independence() {
        // The published algorithm (prng.di.unimi.it/xoshiro256starstar.c) from the state
        // {1, 2, 3, 4}, computed independently: 11520, 0, 1509978240, 1215971899390074240.
        let mut r = Rng { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(got, [11520, 0, 1509978240, 1215971899390074240]);
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(8);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn moments_of_the_distributions() {
        let mut r = Rng::new(42);
        let n = 200_000;
        let mean_u = (0..n).map(|_| r.next_f64()).sum::<f64>() / n as f64;
        assert!((mean_u - 0.5).abs() < 0.005, "{mean_u}");
        let mean_e = (0..n).map(|_| r.exponential(4.0)).sum::<f64>() / n as f64;
        assert!((mean_e - 0.25).abs() < 0.005, "{mean_e}");
        let mut counts = [0u32; 5];
        for _ in 0..n {
            counts[(r.range(10, 14) - 10) as usize] += 1;
        }
        for c in counts {
            assert!((c as f64 / n as f64 - 0.2).abs() < 0.01, "{counts:?}");
        }
        assert_eq!(r.range(3, 3), 3);
    }
}
