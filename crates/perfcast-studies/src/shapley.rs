//! Shapley values (Shapley 1953): the order-independent attribution of a total change to
//! factors, the average over all orders of each factor's marginal contribution.
//!
//! The studies attribute a speed-up, which is a product: with `v(S) = ln(T_base / T(S))`, the
//! time with the factors in `S` switched to the target system, the values `φ_i` sum to
//! `v(all) = ln(speed-up)` (efficiency axiom), so the factors `exp(φ_i)` multiply to the
//! speed-up exactly.

/// Shapley values of the game `v` over `n` players; `v[mask]` is the value of the coalition
/// whose members are the set bits of `mask` (`v.len() == 1 << n`).
pub fn shapley(n: usize, v: &[f64]) -> Vec<f64> {
    assert_eq!(v.len(), 1 << n, "one value per coalition");
    // w(s) = s! (n - s - 1)! / n!
    let fact = |k: usize| (1..=k).map(|x| x as f64).product::<f64>();
    let nf = fact(n);
    let w: Vec<f64> = (0..n).map(|s| fact(s) * fact(n - s - 1) / nf).collect();
    (0..n)
        .map(|i| {
            let bit = 1usize << i;
            (0..v.len())
                .filter(|m| m & bit == 0)
                .map(|m| w[(m as u32).count_ones() as usize] * (v[m | bit] - v[m]))
                .sum()
        })
        .collect()
}

/// Multiplicative factors from times: `times[mask]` is the time with the factors of `mask`
/// taken from the target. Returns `(factors, total)` with `product(factors) == total ==
/// times[0] / times[all]`.
pub fn speedup_factors(n: usize, times: &[f64]) -> (Vec<f64>, f64) {
    let v: Vec<f64> = times.iter().map(|t| (times[0] / t).ln()).collect();
    let phi = shapley(n, &v);
    let total = times[0] / times[(1 << n) - 1];
    (phi.iter().map(|p| p.exp()).collect(), total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn additive_game_gives_each_its_own_value() {
        // v(S) = sum of a_i over S.
        let a = [1.0, 2.0, -0.5];
        let v: Vec<f64> = (0..8)
            .map(|m: usize| (0..3).filter(|i| m & (1 << i) != 0).map(|i| a[i]).sum())
            .collect();
        let phi = shapley(3, &v);
        for i in 0..3 {
            assert!((phi[i] - a[i]).abs() < 1e-12);
        }
    }

    #[test]
    fn interaction_is_split_evenly_and_factors_multiply_to_total() {
        // Time halves only when both factors are on (a pure interaction).
        let times = [1.0, 1.0, 1.0, 0.5];
        let (f, total) = speedup_factors(2, &times);
        assert!((total - 2.0).abs() < 1e-12);
        assert!((f[0] - 2f64.sqrt()).abs() < 1e-12 && (f[1] - 2f64.sqrt()).abs() < 1e-12);
        // An arbitrary 4-factor game: the product is the total.
        let times: Vec<f64> = (0..16)
            .map(|m: usize| 10.0 / (1.0 + m as f64 * 0.37 + (m % 3) as f64))
            .collect();
        let (f, total) = speedup_factors(4, &times);
        let prod: f64 = f.iter().product();
        assert!((prod / total - 1.0).abs() < 1e-12);
    }
}
