//! A training plan as one line of text, in the style each output needs.

use perfcast_engine::training::{Placement, Task, TrainingPlan};

/// How much of a plan a label shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanStyle {
    /// Every searched dimension, compactly (search tables):
    /// `tp8 pp16 dp8 v6 mb2 sp zero2 full interleaved-1f1b fp16 tpo`. CP, EP and ETP only
    /// when > 1, `sp`
    /// only with TP > 1, the recomputed layer count in parentheses, the schedule only with
    /// PP > 1, `tpo` when TP communication overlaps.
    Compact,
    /// Every plan field as `key=value` (predict's header):
    /// `tp=8 pp=16 dp=8 cp=1 vpp=1 sp=false zero=1 micro_batch=1 global_batch=1536
    /// recompute=full schedule=1f1b precision=fp16`, plus `cp_comm=...` with CP > 1.
    Fields,
    /// The few choices a study varies (study tables and summaries): `TP8 PP8 DP16 mb1
    /// selective bf16 Z1` (the ZeRO stage only when > 0).
    Brief,
}

/// `p` as text in `style`.
pub fn plan_label(p: &TrainingPlan, style: PlanStyle) -> String {
    match style {
        PlanStyle::Compact => compact(p),
        PlanStyle::Fields => plan_fields(p, true),
        PlanStyle::Brief => brief(p),
    }
}

/// The compact label with the placement of the mesh axes in brackets when it is not
/// Megatron-LM's (`... tpo [dp-tp-pp-cp]`).
pub fn placed_plan_label(p: &TrainingPlan, placement: &str) -> String {
    let mut s = compact(p);
    if placement != Placement::MEGATRON.name() {
        s.push_str(&format!(" [{placement}]"));
    }
    s
}

fn compact(p: &TrainingPlan) -> String {
    let mut s = format!("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
    if p.cp > 1 {
        s.push_str(&format!(" cp{}", p.cp));
    }
    if p.ep > 1 {
        s.push_str(&format!(" ep{}", p.ep));
    }
    if p.etp > 1 {
        s.push_str(&format!(" etp{}", p.etp));
    }
    for (name, d) in &p.axes {
        s.push_str(&format!(" {name}{d}"));
    }
    s.push_str(&format!(" v{} mb{}", p.vpp, p.micro_batch));
    if p.sp && p.tp > 1 {
        s.push_str(" sp");
    }
    s.push_str(&format!(" zero{} {}", p.zero_stage, p.recompute));
    if let Some(n) = p.recompute_layers {
        s.push_str(&format!("({n})"));
    }
    if p.pp > 1 {
        s.push(' ');
        s.push_str(p.schedule_name());
    }
    s.push(' ');
    s.push_str(p.precision.name());
    if p.tp_comm_overlap {
        s.push_str(" tpo");
    }
    if !p.task.is_pretrain() {
        s.push(' ');
        s.push_str(p.task.name());
    }
    s
}

/// The [`PlanStyle::Fields`] label; `cp_comm` only when `builtin_context` (it is the option of
/// the built-in context strategy: a loaded one in its place, e.g. a library's Ulysses, does
/// not read it).
pub fn plan_fields(p: &TrainingPlan, builtin_context: bool) -> String {
    let mut s = format!(
        "tp={} pp={} dp={} cp={} vpp={} sp={} zero={} micro_batch={} global_batch={} recompute={} schedule={} precision={}",
        p.tp,
        p.pp,
        p.dp,
        p.cp,
        p.vpp,
        p.sp,
        p.zero_stage,
        p.micro_batch,
        p.global_batch,
        p.recompute,
        p.schedule_name(),
        p.precision
    );
    if p.cp > 1 && builtin_context {
        s.push_str(&format!(" cp_comm={}", p.cp_comm.name()));
    }
    for (name, d) in &p.axes {
        s.push_str(&format!(" axes.{name}={d}"));
    }
    if !p.task.is_pretrain() {
        s.push_str(&format!(" task={}", p.task.name()));
    }
    match &p.lora {
        Some(l) if p.task == Task::Lora => {
            let targets: Vec<_> = l.targets.iter().map(|t| t.name()).collect();
            s.push_str(&format!(
                " lora.rank={} lora.targets={}",
                l.rank,
                targets.join(",")
            ));
        }
        None if p.task == Task::Lora => s.push_str(" (the stack's adapters: options.engine.lora)"),
        _ => {}
    }
    s
}

fn brief(p: &TrainingPlan) -> String {
    let mut s = format!("TP{} PP{} DP{}", p.tp, p.pp, p.dp);
    if p.ep > 1 {
        s.push_str(&format!(" EP{}", p.ep));
    }
    if p.etp > 1 {
        s.push_str(&format!(" ETP{}", p.etp));
    }
    for (name, d) in &p.axes {
        s.push_str(&format!(" {}{d}", name.to_uppercase()));
    }
    s.push_str(&format!(
        " mb{} {} {}",
        p.micro_batch, p.recompute, p.precision
    ));
    if p.zero_stage > 0 {
        s.push_str(&format!(" Z{}", p.zero_stage));
    }
    if !p.task.is_pretrain() {
        s.push(' ');
        s.push_str(p.task.name());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfcast_core::DType;

    #[test]
    fn every_style_of_one_plan() {
        let p = TrainingPlan {
            tp: 8,
            pp: 16,
            dp: 8,
            vpp: 6,
            micro_batch: 2,
            global_batch: 1536,
            sp: true,
            zero_stage: 2,
            recompute: "full".into(),
            schedule: Some("interleaved-1f1b".into()),
            precision: DType::Fp16,
            tp_comm_overlap: true,
            ..TrainingPlan::default()
        };
        let table = [
            (
                PlanStyle::Compact,
                "tp8 pp16 dp8 v6 mb2 sp zero2 full interleaved-1f1b fp16 tpo",
            ),
            (
                PlanStyle::Fields,
                "tp=8 pp=16 dp=8 cp=1 vpp=6 sp=true zero=2 micro_batch=2 global_batch=1536 recompute=full schedule=interleaved-1f1b precision=fp16",
            ),
            (PlanStyle::Brief, "TP8 PP16 DP8 mb2 full fp16 Z2"),
        ];
        for (style, want) in table {
            assert_eq!(plan_label(&p, style), want, "{style:?}");
        }
        assert_eq!(
            placed_plan_label(&p, "tp-cp-pp-dp"),
            plan_label(&p, PlanStyle::Compact)
        );
        assert!(placed_plan_label(&p, "dp-tp-pp-cp").ends_with(" tpo [dp-tp-pp-cp]"));
    }

    /// A fine-tuning plan says so in every style, and the fields name its adapters (or
    /// whence they come).
    #[test]
    fn fine_tuning_shows_in_every_style() {
        use perfcast_engine::training::{LoraPlan, LoraTarget};
        let p = TrainingPlan {
            task: Task::Lora,
            lora: Some(LoraPlan {
                rank: 16,
                targets: vec![LoraTarget::LinearQkv, LoraTarget::LinearProj],
            }),
            ..TrainingPlan::default()
        };
        assert!(plan_label(&p, PlanStyle::Compact).ends_with(" lora"));
        assert!(plan_label(&p, PlanStyle::Brief).ends_with(" lora"));
        assert!(plan_label(&p, PlanStyle::Fields)
            .ends_with(" task=lora lora.rank=16 lora.targets=linear_qkv,linear_proj"));
        let defaults = TrainingPlan { lora: None, ..p };
        assert!(plan_label(&defaults, PlanStyle::Fields).contains("options.engine.lora"));
        let sft = TrainingPlan {
            task: Task::Sft,
            ..TrainingPlan::default()
        };
        assert!(plan_label(&sft, PlanStyle::Fields).ends_with(" task=sft"));
        let pre = TrainingPlan::default();
        assert!(!plan_label(&pre, PlanStyle::Fields).contains("task"));
    }

    #[test]
    fn optional_parts_appear_only_when_they_mean_something() {
        let p = TrainingPlan {
            tp: 1,
            pp: 1,
            cp: 2,
            sp: true,
            recompute: "full".into(),
            recompute_layers: Some(3),
            ..TrainingPlan::default()
        };
        let c = plan_label(&p, PlanStyle::Compact);
        assert!(c.starts_with("tp1 pp1 dp1 cp2 v1"), "{c}");
        assert!(!c.contains(" sp") && c.contains("full(3)"), "{c}");
        assert!(plan_label(&p, PlanStyle::Fields).contains(" cp_comm="));
        assert!(!plan_label(&p, PlanStyle::Brief).contains(" Z"));
        // Declared axes, by name.
        let h = TrainingPlan {
            dp: 2,
            axes: [("shard".to_string(), 8)].into(),
            ..TrainingPlan::default()
        };
        assert!(plan_label(&h, PlanStyle::Compact).starts_with("tp1 pp1 dp2 shard8 v1"));
        assert!(plan_label(&h, PlanStyle::Fields).ends_with(" axes.shard=8"));
        assert!(plan_label(&h, PlanStyle::Brief).starts_with("TP1 PP1 DP2 SHARD8 mb1"));
    }
}
