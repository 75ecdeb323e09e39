//! What `perfcast search` writes of a deployment search for serving (`[serving_search]`): the
//! Pareto front of tokens/s per GPU against tokens/s per user, the best deployment per SLO (or
//! the closest), the top load points; the CSV/Parquet rows of both lists.

use perfcast_render::{num, Table};
use perfcast_search::serving::{BestForSlo, SearchPoint, ServingSearchResult};
use perfcast_serving::Slo;

fn limits(s: &Slo) -> String {
    let mut v = Vec::new();
    if let Some(t) = s.ttft_ms {
        v.push(format!("TTFT <= {} ms", num(t)));
    }
    if let Some(t) = s.tpot_ms {
        v.push(format!("TPOT <= {} ms", num(t)));
    }
    if let Some(t) = s.e2e_ms {
        v.push(format!("end-to-end <= {} ms", num(t)));
    }
    format!(
        "{} for {}% of requests",
        v.join(", "),
        num(100.0 * s.attainment)
    )
}

fn points_table(points: &[SearchPoint]) -> Table {
    let mut t = Table::new(&[
        ("deployment", false),
        ("gpus", true),
        ("clients", true),
        ("tok_s_per_gpu", true),
        ("tok_s_per_user", true),
        ("ttft_p90_ms", true),
        ("tpot_p90_ms", true),
    ]);
    for p in points {
        t.push(vec![
            p.label.clone(),
            p.gpus.to_string(),
            p.clients.to_string(),
            num(p.tokens_per_s_per_gpu),
            num(p.tokens_per_s_per_user),
            num(p.ttft_p90_ms),
            num(p.tpot_p90_ms),
        ]);
    }
    t
}

/// The terminal text.
pub fn text(r: &ServingSearchResult) -> String {
    let mut out = format!(
        "Pareto front, tokens/s per GPU vs tokens/s per user ({} points):\n{}",
        r.pareto.len(),
        points_table(&r.pareto).render()
    );
    for b in &r.best {
        match (&b.best, &b.closest) {
            (Some(p), _) => out.push_str(&format!(
                "\nbest under {}: `{}` at {} clients: {} tok/s per GPU, {} tok/s per user (TTFT p90 {} ms, TPOT p90 {} ms)\n",
                limits(&b.slo),
                p.label,
                p.clients,
                num(p.tokens_per_s_per_gpu),
                num(p.tokens_per_s_per_user),
                num(p.ttft_p90_ms),
                num(p.tpot_p90_ms)
            )),
            (None, Some(p)) => out.push_str(&format!(
                "\nno deployment meets {}; closest: `{}` at {} clients (limits x{})\n",
                limits(&b.slo),
                p.label,
                p.clients,
                num(p.slo_factor.iter().copied().fold(0.0, f64::max))
            )),
            (None, None) => {}
        }
    }
    if !r.top.is_empty() {
        let what = if r.best.is_empty() {
            "all loads"
        } else {
            "loads meeting the first SLO"
        };
        out.push_str(&format!(
            "\ntop {} by tokens/s per GPU ({what}):\n{}",
            r.top.len(),
            points_table(&r.top).render()
        ));
    }
    out.push_str(&format!(
        "\n{} deployments ({} refused{}), {} load points, {} requests simulated in {:.3} s on {} threads\n",
        r.configurations,
        r.refused,
        if r.refusals.is_empty() {
            String::new()
        } else {
            format!(": {}", r.refusals[0])
        },
        r.points,
        r.requests,
        r.seconds,
        r.threads
    ));
    out
}

/// The CSV's (and Parquet's) rows: the Pareto front, then the top deployments.
pub fn rows(r: &ServingSearchResult) -> Table {
    let mut t = Table::new(&[
        ("list", false),
        ("deployment", false),
        ("disaggregated", false),
        ("tp", true),
        ("pp", true),
        ("ep", true),
        ("attention_dp", false),
        ("instances", true),
        ("prefill_instances", true),
        ("prefill_tp", true),
        ("max_batch", true),
        ("max_num_tokens", true),
        ("chunk_size", true),
        ("gpus", true),
        ("clients", true),
        ("tok_s_per_gpu", true),
        ("tok_s_per_user", true),
        ("output_tok_s", true),
        ("ttft_p50_ms", true),
        ("ttft_p90_ms", true),
        ("tpot_p50_ms", true),
        ("tpot_p90_ms", true),
    ]);
    for (list, pts) in [("pareto", &r.pareto), ("top", &r.top)] {
        for p in pts {
            let (np, tpp) = p.prefill.map_or((String::new(), String::new()), |(n, t)| {
                (n.to_string(), t.to_string())
            });
            t.push(vec![
                list.into(),
                p.label.clone(),
                p.disaggregated.to_string(),
                p.tp.to_string(),
                p.pp.to_string(),
                p.ep.to_string(),
                p.attention_dp.to_string(),
                p.instances.to_string(),
                np,
                tpp,
                p.max_batch.to_string(),
                p.max_num_tokens.to_string(),
                p.chunk_size.to_string(),
                p.gpus.to_string(),
                p.clients.to_string(),
                p.tokens_per_s_per_gpu.to_string(),
                p.tokens_per_s_per_user.to_string(),
                p.output_tokens_per_s.to_string(),
                p.ttft_p50_ms.to_string(),
                p.ttft_p90_ms.to_string(),
                p.tpot_p50_ms.to_string(),
                p.tpot_p90_ms.to_string(),
            ]);
        }
    }
    t
}

/// Why no deployment meets the SLO of `b`, with the closest one and how far its limits
/// would have to be relaxed.
pub fn infeasible(b: &BestForSlo) -> String {
    let message = match &b.closest {
        Some(p) => format!(
            "no deployment meets the SLO ({}): the closest is `{}` at {} clients (TTFT p90 {} ms, TPOT p90 {} ms, {} tok/s per GPU), which would need every limit relaxed {}x",
            limits(&b.slo),
            p.label,
            p.clients,
            num(p.ttft_p90_ms),
            num(p.tpot_p90_ms),
            num(p.tokens_per_s_per_gpu),
            num(p.slo_factor.iter().copied().fold(0.0, f64::max).max(1.0)),
        ),
        None => format!("no deployment meets the SLO ({})", limits(&b.slo)),
    };
    message
}
