//! What `perfcast predict` writes beside the training report: the plan, every stage's memory,
//! the hardware warnings, the rows that carry error bars, and why a plan does not fit.

use crate::error_bars::Row;
use perfcast_core::KernelPath;
use perfcast_engine::training::{KernelPaths, StageMemory, TrainingPlan, TrainingReport};
use perfcast_render::{num, plan_fields, Table, GIB};
use perfcast_scenario::network::NetworkUsed;
use std::fmt::Write as _;

/// The rows of a training report that get an interval.
pub fn interval_rows(r: &TrainingReport) -> Vec<(Row<'static>, &'static str)> {
    use perfcast_validation::intervals::Direction::{Rate, Time};
    vec![
        (
            Row::new("iteration_time", "iteration time", r.iteration_time.0, Time),
            "s",
        ),
        (
            Row::new("tokens_per_s", "tokens/s", r.tokens_per_s, Rate),
            "tokens/s",
        ),
        (
            Row::new(
                "tokens_per_s_per_gpu",
                "tokens/s per GPU",
                r.tokens_per_s_per_gpu,
                Rate,
            ),
            "tokens/s",
        ),
        (
            // In JSON and CSV only: its table row carries two values.
            Row::new("tflops_per_gpu_model", "", r.tflops_per_gpu_model, Rate),
            "TFLOP/s",
        ),
        (
            Row {
                show: |v| format!("{:.1}%", 100.0 * v),
                ..Row::new("mfu", "MFU / HFU", r.mfu, Rate)
            },
            "",
        ),
    ]
}

/// Why a plan does not fit: its largest stage's memory by part against the device's, and
/// what to change.
pub fn does_not_fit(r: &TrainingReport, stages: &[StageMemory]) -> String {
    let worst = stages.iter().copied().fold(r.memory.first_stage, |a, s| {
        if s.total.0 > a.total.0 {
            s
        } else {
            a
        }
    });
    format!(
        "the plan does not fit in device memory: pipeline stage {} needs {:.2} GiB per device (weights {:.2}, gradients {:.2}, optimizer {:.2}, activations {:.2}, temporary {:.2}, reserved {:.2}) but the device has {:.2} GiB: short by {:.2} GiB; raise plan.tp or plan.pp, use plan.zero_stage, or plan.recompute = \"selective\" / \"full\"",
        worst.stage,
        worst.total.gib(),
        worst.weights.gib(),
        worst.grads.gib(),
        worst.optimizer.gib(),
        worst.activations.gib(),
        worst.temp.gib(),
        worst.reserved.gib(),
        r.memory.capacity.gib(),
        (worst.total.0 - r.memory.capacity.0).max(r.memory.shortfall.0) / GIB,
    )
}

/// The training sequence length, and the model's context where it is longer.
pub fn sequence_label(m: &perfcast_core::workload::ModelSpec) -> String {
    if m.context_limit() > m.seq_len {
        format!(
            "sequences of {} tokens; context {}",
            m.seq_len,
            m.context_limit()
        )
    } else {
        format!("sequences of {} tokens", m.seq_len)
    }
}

/// The terminal text: the plan, the report's table and notes (the hardware warnings continue
/// them), and every pipeline stage's memory when there are more than three.
pub fn table(
    model: &str,
    system: &str,
    plan: &TrainingPlan,
    network: &NetworkUsed,
    r: &TrainingReport,
    stages: &[StageMemory],
    warnings: &[String],
) -> String {
    // The strategies line names what ran; `cp_comm` only where the built-in reads it.
    let label = plan_fields(plan, network.builtin_context());
    let mut s = format!(
        "{model} on {system}, {} devices\n  {label}\n  {}\n",
        r.devices,
        network.head()
    );
    s.push_str(&crate::training::table(r));
    // The report's table ends with its notes: the hardware warnings continue the list.
    for w in warnings {
        let _ = writeln!(s, "  - {w}");
    }
    if stages.len() > 3 {
        let _ = writeln!(s, "Memory of every pipeline stage (GiB per device)");
        let mut headers = vec![("stage", true)];
        headers.extend(StageMemory::FIELDS.iter().map(|f| (f.label, true)));
        let mut t = Table::new(&headers);
        for st in stages {
            let mut row = vec![st.stage.to_string()];
            row.extend(StageMemory::FIELDS.iter().map(|f| {
                if f.unit == "B" {
                    format!("{:.2}", f.display_value(st))
                } else {
                    num((f.get)(st))
                }
            }));
            t.push(row);
        }
        for line in t.render().lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

/// The CSV: the report's `metric,value,unit` rows, the plan's degrees, every stage's memory
/// and the warnings.
pub fn csv(
    plan: &TrainingPlan,
    r: &TrainingReport,
    stages: &[StageMemory],
    warnings: &[String],
) -> String {
    let mut s = crate::training::csv(r);
    for (k, v) in [
        ("plan.tp", plan.tp),
        ("plan.pp", plan.pp),
        ("plan.dp", plan.dp),
        ("plan.cp", plan.cp),
        ("plan.vpp", plan.vpp),
        ("plan.micro_batch", plan.micro_batch),
        ("plan.global_batch", plan.global_batch),
    ] {
        let _ = writeln!(s, "{k},{v},");
    }
    for st in stages {
        for f in &StageMemory::FIELDS {
            let _ = writeln!(
                s,
                "memory.stage{}.{},{},{}",
                st.stage,
                f.name,
                (f.get)(st),
                f.unit
            );
        }
    }
    for w in warnings {
        let _ = writeln!(s, "warning,{},", perfcast_render::csv_cell(w));
    }
    s
}

/// The software stack a prediction ran on: its name (`stack = "NAME"`; `None` with no stack
/// named) and its one-line description (empty: the engines' defaults).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Software {
    /// The config's `stack = "NAME"`, if any.
    pub stack: Option<String>,
    /// The stack's `[software] description` (empty without one).
    pub description: String,
}

/// The table's section on what timed the step: the software stack, and for each op class of
/// one layer, the embedding, the head with the loss and the optimizer (one micro-batch each)
/// its time and the share each kernel path timed (`measured` and `interpolated`: a kernel
/// table; `analytical`: the compute unit's model).
pub fn kernel_paths_table(software: &Software, paths: &[KernelPaths]) -> String {
    let mut s = match &software.stack {
        Some(n) if !software.description.is_empty() => {
            format!("Software: {n} ({})\n", software.description)
        }
        Some(n) => format!("Software: {n}\n"),
        None => "Software: no stack named (the engines' defaults)\n".to_string(),
    };
    let _ = writeln!(
        s,
        "Kernel paths (one layer, the embedding, the head and the optimizer; one micro-batch each)"
    );
    let mut headers = vec![("class", false), ("time ms", true)];
    headers.extend(KernelPath::ALL.iter().map(|p| (p.name(), true)));
    let mut t = Table::new(&headers);
    for c in paths {
        let total = c.total();
        let mut row = vec![c.class.to_string(), format!("{:.3}", 1e3 * total)];
        row.extend(c.seconds().iter().map(|(_, v)| {
            if *v > 0.0 && total > 0.0 {
                format!("{:.1}%", 100.0 * v / total)
            } else {
                "-".to_string()
            }
        }));
        t.push(row);
    }
    for line in t.render().lines() {
        let _ = writeln!(s, "  {line}");
    }
    s
}

/// The CSV rows of [`kernel_paths_table`]: `software.stack`, then
/// `kernel_path.CLASS.PATH,seconds,s` for every class and path.
pub fn kernel_paths_csv(software: &Software, paths: &[KernelPaths]) -> String {
    let mut s = format!(
        "software.stack,{},\n",
        perfcast_render::csv_cell(software.stack.as_deref().unwrap_or(""))
    );
    for c in paths {
        for (p, v) in c.seconds() {
            let _ = writeln!(s, "kernel_path.{}.{},{v},s", c.class, p.name());
        }
    }
    s
}
