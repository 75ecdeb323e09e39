//! The breakdown's ledger per declared axis: the exposed time of the collectives on a
//! strategy's declared axes, moved out of their classes' ledgers.
//!
//! The step's exposed communication is linear in each overlap window's exposed time, and a
//! window's exposed time is shared among its collectives by their time ([`pool_of`]). So
//! timing the composition again with only one part of the collectives counted gives that
//! part's share of every ledger, and the parts add up to the run's. A collective belongs to
//! the first declared axis its group spans (2D tensor parallelism's all-reduce over the whole
//! grid is its declared axis's); the rest stay in their classes' ledgers.

use super::compose::{step_windows, Composed};
use super::prepare::Prepared;
use super::report::TimeBreakdown;
use super::time::{exposures, pool_of, GroupTimes};
use super::{sum, ClassComm, Training};
use perfcast_core::parallel::{CommClass, CommOp, Phase};
use perfcast_core::Seconds;

/// The run's number of the declared axis a collective belongs to (`None`: built-in axes
/// only).
fn owner(op: &CommOp) -> Option<usize> {
    let bits = op.group.declared_bits();
    (bits != 0).then(|| bits.trailing_zeros() as usize)
}

impl Training {
    /// Split `b`'s communication ledgers by declared axis (at once done when no strategy
    /// declares one; the search's fast path never calls it).
    pub(super) fn split_declared(
        &self,
        p: &Prepared,
        g: &GroupTimes,
        c: &Composed,
        b: &mut TimeBreakdown,
    ) {
        if self.comps.declared.is_empty() {
            return;
        }
        let share = self.params.overlap_compute_share;
        let mbf = c.input.micro_batches as f64;

        let part = |keep: &dyn Fn(&CommOp) -> bool| -> ClassComm {
            let moe_lt = g.moe.map(|m| m.lt);
            let gk = exposures(
                g.lt,
                g.ends,
                moe_lt,
                g.comms,
                g.ctime,
                g.opt,
                p.ls.op_sac,
                share,
                keep,
            );
            let st = self.stage(p, &gk, c.which);
            let step = pool_of(
                &g.comms,
                &g.ctime,
                &[Phase::Step],
                false,
                step_windows(&c.crit),
                share,
                keep,
            );
            std::array::from_fn(|k| mbf * st.comm[k] + step.exposed[k])
        };
        let rest = part(&|op| owner(op).is_none());
        let of = |class: CommClass| Seconds(rest[class.index()]);
        b.tp_comm = of(CommClass::Tensor);
        b.cp_comm = of(CommClass::Context);
        b.pp_comm = of(CommClass::Pipeline) + c.sr.p2p;
        b.dp_comm = of(CommClass::Data);
        b.zero_comm = of(CommClass::Zero);
        b.ep_comm = of(CommClass::Expert);
        for (k, d) in self.comps.declared.iter().enumerate() {
            // An axis that exposes nothing has no ledger (as `ep_comm` is left out when zero):
            // a 1 x 1 grid reads as the plan without the axis.
            let t = sum(&part(&|op| owner(op) == Some(k)));
            if t != 0.0 {
                b.axes.push(&d.decl.name, Seconds(t));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::report::AxisLedger;
    use perfcast_core::parallel::AxisSet;

    #[test]
    fn a_collective_belongs_to_the_first_declared_axis_its_group_spans() {
        let op = |group| CommOp {
            class: perfcast_core::parallel::CommClass::Tensor,
            phase: Phase::Forward,
            kind: perfcast_core::CollectiveKind::AllReduce,
            bytes: perfcast_core::Bytes(1e6),
            group,
            count: 1.0,
            overlap: perfcast_core::parallel::Overlap::Exposed,
            with_recompute: false,
            dispatch: None,
        };
        // (group, owner)
        let table = [
            (AxisSet::TENSOR, None),
            (AxisSet::DATA_CONTEXT, None),
            (AxisSet::declared(0), Some(0)),
            (AxisSet::TENSOR.union(AxisSet::declared(3)), Some(3)),
            (AxisSet::declared(5).union(AxisSet::declared(2)), Some(2)),
        ];
        for (group, want) in table {
            assert_eq!(owner(&op(group)), want, "{group:?}");
        }
    }

    #[test]
    fn the_ledger_keeps_names_in_order_and_serializes_as_a_map() {
        let mut l = AxisLedger::default();
        assert!(l.is_empty() && l.total().0 == 0.0 && l.max().0 == 0.0);
        l.push("col", Seconds(1.5));
        l.push(&"a".repeat(31), Seconds(0.25));
        let got: Vec<(&str, f64)> = l.iter().map(|(n, t)| (n, t.0)).collect();
        assert_eq!(got, [("col", 1.5), ("a".repeat(31).as_str(), 0.25)]);
        assert_eq!((l.total().0, l.max().0), (1.75, 1.5));
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, format!("{{\"col\":1.5,\"{}\":0.25}}", "a".repeat(31)));
        assert_eq!(
            format!("{l:?}"),
            format!(
                "{{\"col\": Seconds(1.5), \"{}\": Seconds(0.25)}}",
                "a".repeat(31)
            )
        );
    }
}
