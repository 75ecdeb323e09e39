//! The plan `perfcast predict` uses for a model and a system given without `[plan]`: the
//! fastest plan a search finds (as `perfcast search` would, over the same `[search]` section
//! and stack), said so in the report. Without `search.global_batch` the search takes
//! [`DEFAULT_BATCH_TOKENS`] per step.

use crate::SearchError;
use perfcast_config::Config;
use perfcast_engine::training::TrainingPlan;

/// Tokens per optimizer step when neither `[plan]` nor `search.global_batch` gives a global
/// batch: 4M (2^22), Llama 2's batch for every size from 7B to 70B (Touvron et al. 2023,
/// arXiv:2307.09288, §2.2: "a global batch-size of 4M tokens"); GPT-3 used 0.5M to 3.2M
/// (Brown et al. 2020, Table 2.1).
pub const DEFAULT_BATCH_TOKENS: u64 = 1 << 22;

/// The global batch in sequences of `seq_len` tokens nearest [`DEFAULT_BATCH_TOKENS`]: a
/// power of two (so that every power-of-two data-parallel degree and micro-batch divides
/// it), at least 1.
pub fn default_global_batch(seq_len: u64) -> u64 {
    let sequences = (DEFAULT_BATCH_TOKENS / seq_len.max(1)).max(1);
    // The power of two at or below, or the one above when that is nearer.
    let below = 1u64 << (63 - sequences.leading_zeros());
    if sequences - below > below.saturating_mul(2) - sequences {
        below * 2
    } else {
        below
    }
}

/// A plan chosen for a configuration that gave none.
#[derive(Debug, Clone)]
pub struct DefaultPlan {
    /// The chosen plan.
    pub plan: TrainingPlan,
    /// Its device count.
    pub devices: u32,
    /// Whether the global batch is the default ([`default_global_batch`]) rather than the
    /// configuration's `search.global_batch`.
    pub default_batch: bool,
    /// Plans the search evaluated.
    pub evaluated: u64,
}

impl DefaultPlan {
    /// What the report says of it.
    pub fn note(&self, seq_len: u64) -> String {
        let batch = if self.default_batch {
            format!(
                "{} sequences of {seq_len} tokens, perfcast's default of about {}M tokens per step",
                self.plan.global_batch,
                DEFAULT_BATCH_TOKENS >> 20
            )
        } else {
            format!("{} sequences, search.global_batch", self.plan.global_batch)
        };
        format!(
            "no [plan]: this is the fastest of {} plans a search evaluated on {} devices \
             (global batch {batch}), as `perfcast search` finds it; give a [plan] to predict \
             your own",
            self.evaluated, self.devices
        )
    }
}

/// `cfg` with the plan a search chooses as its `[plan]` (and the device count as
/// `system.devices`), when `cfg` is a bare model and system: no `[plan]`, and no
/// `[inference]` or `[serving]` (a configuration for `infer` or `serve`, which `predict`
/// refuses as before). `None` otherwise. An error when the search finds no plan that fits
/// (naming the model, the devices and what to change).
pub fn with_default_plan(cfg: &Config) -> Result<Option<(Config, DefaultPlan)>, SearchError> {
    if ["plan", "inference", "serving"]
        .iter()
        .any(|s| cfg.contains(s))
    {
        return Ok(None);
    }
    let resolved = perfcast_scenario::Scenario::training(cfg);
    let model = resolved.model()?;
    let default_batch = !cfg.contains("search.global_batch");
    let with_batch = match default_batch {
        true => {
            Some(cfg.with_values(&[("search.global_batch", &default_global_batch(model.seq_len))])?)
        }
        false => None,
    };
    let resolved = perfcast_scenario::Scenario::training(with_batch.as_ref().unwrap_or(cfg));
    let sc = crate::load_scenario(&resolved)?;
    let r = sc.search().map_err(|e| match e {
        SearchError::Empty { reason } => SearchError::Empty {
            reason: format!(
                "no [plan] was given, and a search for one found none: {reason} (or give a [plan])"
            ),
        },
        e => e,
    })?;
    let Some(best) = r.plans.first() else {
        let devices: Vec<String> = sc
            .trainings
            .iter()
            .map(|t| t.system().devices.to_string())
            .collect();
        return Err(SearchError::Empty {
            reason: format!(
                "no [plan] was given, and no plan of {} fits on {} devices ({} plans tried): \
                 give a [plan], more devices (system.devices) or search.memory_headroom = 0",
                model.name,
                devices.join(" or "),
                r.summary.enumerated
            ),
        });
    };
    let devices = best.report.devices;
    let chosen = cfg
        .with_values(&[("system.devices", &devices)])?
        .with_values(&[("plan", &best.plan)])?;
    Ok(Some((
        chosen,
        DefaultPlan {
            plan: best.plan.clone(),
            devices,
            default_batch,
            evaluated: r.summary.evaluated,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_global_batches() {
        // (seq_len, sequences): 4M tokens in powers of two, at least one sequence.
        for (seq_len, sequences) in [
            (2048, 2048),
            (4096, 1024),
            (8192, 512),
            (131_072, 32),
            (3000, 1024), // 1398 sequences: 1024 is nearer than 2048
            (2500, 2048), // 1677: 2048 is nearer
            (1 << 23, 1),
            (0, 1 << 22),
        ] {
            assert_eq!(default_global_batch(seq_len), sequences, "{seq_len}");
        }
    }
}
