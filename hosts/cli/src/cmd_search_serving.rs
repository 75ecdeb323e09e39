//! `perfcast search` with a `[serving_search]` section: the deployment search for serving
//! (`perfcast_search::serving`): the Pareto front of tokens/s per GPU against tokens/s per
//! user, the best deployment per SLO (or the closest, then an error), the top load points.

use crate::common::{print, Format};
use anyhow::Context as _;
use perfcast_config::Config;
use perfcast_report::deployments;
use perfcast_search::serving::ServingSearchResult;
use serde::Serialize;

/// The sections a deployment search reads beside the host's.
pub const SECTIONS: [&str; 3] = ["serving", "slo", perfcast_search::serving::SECTION];

#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    result: &'a ServingSearchResult,
    config: serde_json::Value,
}

/// The deployment search of `cfg`: `top` deployments (`--top`), timed when `bench`, written
/// in `format` to `out` or standard output.
pub fn run(
    cfg: &Config,
    top: Option<usize>,
    bench: bool,
    format: Format,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let mut s = perfcast_search::serving::load(cfg)?;
    if let Some(n) = top {
        if n == 0 {
            anyhow::bail!("invalid `--top 0`: must be at least 1");
        }
        s.config.top = Some(n);
    }
    if bench {
        return time_it(&s);
    }
    let working = crate::common::working("searching deployments");
    let r = perfcast_search::serving::search(&s)?;
    drop(working);
    crate::common::write_rows(
        format,
        || {
            Ok(Output {
                result: &r,
                config: perfcast_scenario::reproducible_config(cfg, s.scenario.inference.model())?,
            })
        },
        || deployments::text(&r),
        || deployments::rows(&r),
        out,
        "search",
        "deployment-search",
    )?;
    match r.best.iter().find(|b| b.best.is_none()) {
        Some(b) => Err(anyhow::Error::new(crate::common::Infeasible(
            deployments::infeasible(b),
        ))),
        None => Ok(()),
    }
}

fn time_it(s: &perfcast_search::serving::ServingSearch) -> anyhow::Result<()> {
    let runs = 5;
    let mut secs = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let r = perfcast_search::serving::search(s)?;
        secs.push(r.seconds);
        last = Some(r);
    }
    secs.sort_by(f64::total_cmp);
    let r = last.context("no run")?;
    let med = secs[runs / 2];
    print(&format!(
        "{runs} runs on {} threads: median {:.3} s (min {:.3}, max {:.3})\n\
         {} deployments ({} refused), {} load points, {} requests per run\n\
         {:.0} deployments/s, {:.0} simulated requests/s (median run)\n",
        r.threads,
        med,
        secs[0],
        secs[runs - 1],
        r.configurations,
        r.refused,
        r.points,
        r.requests,
        r.configurations as f64 / med,
        r.requests as f64 / med,
    ))
}
