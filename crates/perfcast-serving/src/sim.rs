//! The event loop: arrivals, routing, steps, KV transfers; the run's accounting.

use crate::config::Slo;
use crate::deployment::{kv_caches, Deployment, PoolRole, Router};
use crate::replay::Schedule;
use crate::report::{self, ServingReport};
use crate::rng::Rng;
use crate::speculative::DraftMethod;
use crate::state::{At, Ev, Event, Inst, Recorder, Run, Seq};
use crate::workload::Traffic;
use perfcast_core::op::{Collective, CollectiveKind};
use perfcast_core::{Bytes, ModelError};
use perfcast_engine::inference::{Inference, InferencePlan, ServingMemory, StepCosts};
use std::collections::{BinaryHeap, VecDeque};

/// A serving simulator for one model on one system: the step-time tables of every pool plan
/// it has run, kept across runs (a search runs many deployments of the same plans).
pub struct Simulator<'a> {
    inf: &'a Inference,
    costs: Vec<StepCosts<'a>>,
    /// The engine a timed speculative draft runs on (an MTP module or a draft model, on the
    /// same system), and its step tables.
    draft: Option<&'a Inference>,
    draft_costs: Vec<StepCosts<'a>>,
}

/// Steps allowed per token of work before a run is declared stuck (it cannot be: every step
/// processes at least one token and the oldest request always progresses; the bound turns a
/// bug into an error instead of a hang).
const STEPS_PER_TOKEN_BOUND: u64 = 64;

impl<'a> Simulator<'a> {
    /// A simulator over `inf`'s model and system.
    pub fn new(inf: &'a Inference) -> Simulator<'a> {
        Simulator::with_costs(inf, Vec::new())
    }

    /// A simulator that starts from step tables already computed (e.g. warmed with
    /// [`StepCosts::warm`] and cloned into each worker of a search).
    pub fn with_costs(inf: &'a Inference, costs: Vec<StepCosts<'a>>) -> Simulator<'a> {
        Simulator {
            inf,
            costs,
            draft: None,
            draft_costs: Vec::new(),
        }
    }

    /// The engine that times a speculative draft of `method = "mtp"` or `"draft_model"`
    /// (built by the host: `perfcast_scenario::ServingScenario::draft`).
    pub fn with_draft(mut self, draft: Option<&'a Inference>) -> Simulator<'a> {
        self.draft = draft;
        self
    }

    /// The inference engine it times steps with.
    pub fn inference(&self) -> &'a Inference {
        self.inf
    }

    fn costs_for(
        &mut self,
        plan: &perfcast_engine::inference::InferencePlan,
    ) -> Result<usize, ModelError> {
        costs_in(self.inf, &mut self.costs, plan)
    }

    /// Simulate `traffic` on `d`; `seed` drives the draft acceptance draws, `slos` the
    /// goodput (one [`crate::SloReport`] each).
    pub fn run(
        &mut self,
        d: &Deployment,
        traffic: &Traffic,
        seed: u64,
        slos: &[Slo],
    ) -> Result<ServingReport, ModelError> {
        self.run_with_progress(d, traffic, seed, slos, &mut |_, _| {})
    }

    /// [`Simulator::run`], calling `progress(completed, requests)` every 256 completed
    /// requests and at the end (for a host's progress bar).
    pub fn run_with_progress(
        &mut self,
        d: &Deployment,
        traffic: &Traffic,
        seed: u64,
        slos: &[Slo],
        progress: &mut dyn FnMut(u32, u32),
    ) -> Result<ServingReport, ModelError> {
        let mut run = self.start(d, traffic, seed, progress)?;
        run.event_loop(traffic)?;
        let n = run.seqs.len() as u32;
        (run.progress)(run.completed, n);
        Ok(report::build(&run, traffic, slos))
    }

    /// [`Simulator::run`], recording the run's schedule to re-time on another engine
    /// ([`Simulator::replay`]); `None` when the run is not one a schedule can stand for
    /// ([`Schedule`]).
    pub fn run_recorded(
        &mut self,
        d: &Deployment,
        traffic: &Traffic,
        seed: u64,
        slos: &[Slo],
    ) -> Result<(ServingReport, Option<Schedule>), ModelError> {
        let mut progress = |_, _| {};
        let mut run = self.start(d, traffic, seed, &mut progress)?;
        if Schedule::fits(d, traffic) {
            let n = run.seqs.len();
            run.rec = Some(Box::new(Recorder {
                first: vec![u32::MAX; n],
                finish: vec![u32::MAX; n],
                released: vec![u32::MAX; n],
                lane_step: run.insts.iter().map(|i| vec![0; i.lanes.len()]).collect(),
                ..Recorder::default()
            }));
        }
        run.event_loop(traffic)?;
        let rep = report::build(&run, traffic, slos);
        let schedule = run.rec.take().map(|rec| Schedule::new(*rec, &run, traffic));
        Ok((rep, schedule))
    }

    /// The run's state before its first event: the step tables of its plans, the KV caches,
    /// the requests and the instances.
    pub(super) fn start<'r>(
        &'r mut self,
        d: &'r Deployment,
        traffic: &Traffic,
        seed: u64,
        progress: &'r mut dyn FnMut(u32, u32),
    ) -> Result<Run<'r, 'a>, ModelError> {
        let max_input = traffic.max_input();
        let max_context = traffic.max_context();
        let timed_draft = d.speculative.is_some_and(|s| s.timed());
        let draft = match (timed_draft, self.draft) {
            (false, _) => None,
            (true, Some(inf)) => Some(inf),
            (true, None) => {
                return Err(ModelError::invalid(
                    perfcast_core::Key::serving("speculative.method"),
                    "a timed draft",
                    "needs the draft's engine, which this host did not build \
                     (Simulator::with_draft)",
                ))
            }
        };
        // The plans the step tables are built for: the longest request's context.
        let plans: Vec<InferencePlan> = d
            .pools
            .iter()
            .map(|p| InferencePlan {
                input_len: max_context.max(2) - 1,
                output_len: 1,
                ..p.plan.clone()
            })
            .collect();
        let draft_plans: Vec<Option<InferencePlan>> = d
            .pools
            .iter()
            .zip(&plans)
            .map(|(p, plan)| match draft {
                Some(inf) if p.role != PoolRole::Prefill => Some(draft_plan(inf, plan)),
                _ => None,
            })
            .collect();
        let draft_memory = draft_memories(d, draft, &draft_plans)?;
        // The deployment's checks and KV caches before any step table.
        let kv = kv_caches(self.inf, d, max_input, max_context, &draft_memory)?;
        let mut pool_costs = Vec::with_capacity(d.pools.len());
        let mut pool_draft = Vec::with_capacity(d.pools.len());
        for (plan, dp) in plans.iter().zip(&draft_plans) {
            pool_costs.push(self.costs_for(plan)?);
            pool_draft.push(match (draft, dp) {
                (Some(inf), Some(dp)) => {
                    Some(costs_in(inf, &mut self.draft_costs, dp).map_err(draft_error)?)
                }
                _ => None,
            });
        }
        let hit = d.prefix_cache_hit_rate;
        let block = d.kv_block_size;
        let seqs: Vec<Seq> = traffic
            .requests()
            .iter()
            .map(|r| {
                // Whole blocks of the prompt, never the whole prompt (its last token must
                // be computed to sample the first output token).
                let cached = ((hit * r.input as f64) as u32 / block * block).min(r.input - 1);
                Seq::new(r.arrival, r.input, r.output, cached)
            })
            .collect();
        let mut insts = Vec::new();
        let mut pool_start = Vec::new();
        let mut device = 0u32;
        for (pi, p) in d.pools.iter().enumerate() {
            pool_start.push(insts.len());
            for _ in 0..p.instances {
                insts.push(Inst::new(pi, p.role, &kv[pi], p.plan.pp, device));
                device += p.plan.gpus_per_replica();
            }
        }
        let n_inst = insts.len();
        Ok(Run {
            d,
            kv,
            pool_costs,
            costs: &mut self.costs,
            pool_draft,
            draft_costs: &mut self.draft_costs,
            seqs,
            insts,
            pool_start,
            heap: BinaryHeap::new(),
            order: 0,
            rng: Rng::new(seed ^ 0xD1CE_5EED_0000_0001),
            rr: 0,
            wake: vec![false; n_inst],
            chunks: Vec::new(),
            preemptions: 0,
            steps: 0,
            next_closed: 0,
            closed_ready: VecDeque::new(),
            inf: self.inf,
            rec: None,
            completed: 0,
            progress,
        })
    }
}

/// The step tables of `plan` among `costs` (computed and added when none fits): a table
/// serves any plan equal but for the batch, replicas and lengths, up to its context.
fn costs_in<'a>(
    inf: &'a Inference,
    costs: &mut Vec<StepCosts<'a>>,
    plan: &InferencePlan,
) -> Result<usize, ModelError> {
    let shape = |p: &InferencePlan| InferencePlan {
        replicas: 1,
        batch: 1,
        input_len: 1,
        output_len: 1,
        graph_capture: false,
        ..p.clone()
    };
    let want = shape(plan);
    if let Some(i) = costs.iter().position(|c| {
        let p = c.plan();
        shape(p) == want && p.input_len + p.output_len >= plan.input_len + plan.output_len
    }) {
        return Ok(i);
    }
    costs.push(inf.step_costs(plan)?);
    Ok(costs.len() - 1)
}

/// The plan a draft engine runs beside a pool's `plan`: one stage (the MTP module sits on
/// the last, a draft model runs whole on the instance's GPUs) at the pool's tensor
/// parallelism and formats; a dense draft model without the experts' layout.
fn draft_plan(draft: &Inference, plan: &InferencePlan) -> InferencePlan {
    let mut p = InferencePlan {
        pp: 1,
        ..plan.clone()
    };
    if draft.model().moe.is_none() {
        p.ep = 1;
        p.attention_dp = false;
    }
    p
}

/// Per pool, the memory of a timed draft beside it (`None` where no draft runs): an MTP
/// module without the embedding and LM head it shares with its model.
fn draft_memories(
    d: &Deployment,
    draft: Option<&Inference>,
    plans: &[Option<InferencePlan>],
) -> Result<Vec<Option<ServingMemory>>, ModelError> {
    let mut out = Vec::with_capacity(d.pools.len());
    for (p, plan) in d.pools.iter().zip(plans) {
        let (Some(inf), Some(plan)) = (draft, plan) else {
            out.push(None);
            continue;
        };
        let mut mem = inf
            .serving_memory(plan, p.max_num_tokens, p.max_batch)
            .map_err(draft_error)?;
        if d.speculative.is_some_and(|s| s.method == DraftMethod::Mtp) {
            mem.weights = Bytes(mem.weights.0 - mem.shared_weights.0);
        }
        out.push(Some(mem));
    }
    Ok(out)
}

/// An error of the draft's engine, named as the draft's.
fn draft_error(e: ModelError) -> ModelError {
    ModelError::invalid(
        perfcast_core::Key::serving("speculative.method"),
        "a timed draft",
        format!("the draft cannot run beside the pool's plan: {e}"),
    )
}

impl Run<'_, '_> {
    /// Account instance `i`'s KV occupancy up to `t` (before every change of its free
    /// blocks), noted in the schedule being recorded.
    pub fn touch(&mut self, i: usize, t: f64) {
        if self.rec.is_some() {
            self.note_touch(i);
        }
        self.insts[i].kv_touch(t);
    }

    pub fn push(&mut self, t: f64, ev: Ev) {
        self.order += 1;
        self.heap.push(Event {
            t,
            order: self.order,
            ev,
        });
    }

    fn event_loop(&mut self, traffic: &Traffic) -> Result<(), ModelError> {
        let n = self.seqs.len();
        let mut next_open = 0usize;
        if let Traffic::Closed { clients, .. } = traffic {
            let first = (*clients as usize).min(n);
            self.closed_ready
                .extend((0..first).map(|i| (0.0, i as u32)));
            self.next_closed = first;
        }
        let work: u64 = self
            .seqs
            .iter()
            .map(|s| s.input as u64 + s.output as u64)
            .sum();
        let bound = work.saturating_mul(STEPS_PER_TOKEN_BOUND).max(1_000_000);
        loop {
            let ta = match traffic {
                Traffic::Open(r) => r.get(next_open).map(|r| r.arrival),
                Traffic::Closed { .. } => self.closed_ready.front().map(|x| x.0),
            };
            let te = self.heap.peek().map(|e| e.t);
            let t = match (ta, te) {
                (None, None) => break,
                (Some(a), Some(e)) if e < a => self.pop_event()?,
                (Some(a), _) => {
                    let s = match traffic {
                        Traffic::Open(_) => {
                            next_open += 1;
                            next_open - 1
                        }
                        Traffic::Closed { .. } => {
                            self.closed_ready.pop_front().map_or(0, |x| x.1) as usize
                        }
                    };
                    self.arrive(s as u32, a);
                    a
                }
                (None, Some(_)) => self.pop_event()?,
            };
            // Start steps only once every event at this time is in.
            let next = match traffic {
                Traffic::Open(r) => r.get(next_open).map(|r| r.arrival),
                Traffic::Closed { .. } => self.closed_ready.front().map(|x| x.0),
            };
            let pending = [next, self.heap.peek().map(|e| e.t)]
                .into_iter()
                .flatten()
                .any(|x| x <= t);
            if !pending {
                self.start_idle(t)?;
            }
            if self.steps > bound {
                return Err(ModelError::invalid(
                    perfcast_core::Key::other("serving simulation"),
                    self.steps,
                    "steps exceed 64 per token of work: the scheduler made no progress (a bug; please report it)",
                ));
            }
        }
        Ok(())
    }

    fn pop_event(&mut self) -> Result<f64, ModelError> {
        let Some(e) = self.heap.pop() else {
            return Ok(0.0);
        };
        match e.ev {
            Ev::StepEnd { inst, lane } => {
                if self.rec.is_some() {
                    self.note_end(inst as usize, lane as usize);
                }
                self.step_end(inst as usize, lane as usize, e.t)?
            }
            Ev::Transfer { seq, from, to } => {
                // A schedule stands for aggregated runs only (`Schedule::fits`).
                self.rec = None;
                self.transfer_done(seq, from, to, e.t)
            }
        }
        Ok(e.t)
    }

    /// A request arrives at the first pool.
    fn arrive(&mut self, s: u32, t: f64) {
        let start = self.pool_start[0];
        let count = self.d.pools[0].instances as usize;
        let i = match self.d.router {
            Router::RoundRobin => {
                self.rr = (self.rr + 1) % count;
                start + self.rr
            }
            Router::LeastLoaded => (start..start + count)
                .min_by_key(|&i| (self.insts[i].load, i))
                .unwrap_or(start),
        };
        if self.rec.is_some() {
            self.note_now(At::Arrival(s));
        }
        let seq = &mut self.seqs[s as usize];
        seq.arrival = t;
        seq.inst = i as u32;
        self.insts[i].load += 1;
        self.insts[i].waiting.push_back(s);
        self.wake[i] = true;
    }

    fn start_idle(&mut self, t: f64) -> Result<(), ModelError> {
        for i in 0..self.insts.len() {
            if !std::mem::take(&mut self.wake[i]) {
                continue;
            }
            for l in 0..self.insts[i].lanes.len() {
                if !self.insts[i].lanes[l].busy {
                    self.start_step(i, l, t)?;
                }
            }
        }
        Ok(())
    }

    /// A request finished at `t`: free its blocks; a closed-loop client sends its next one.
    pub fn finish(&mut self, s: u32, t: f64) {
        let seq = &mut self.seqs[s as usize];
        seq.finish = t;
        seq.leaving = true;
        let (i, blocks) = (seq.inst as usize, seq.blocks);
        seq.blocks = 0;
        if self.rec.is_some() {
            self.note_finish(s);
        }
        self.touch(i, t);
        let inst = &mut self.insts[i];
        inst.kv_free += blocks;
        inst.load = inst.load.saturating_sub(1);
        self.completed += 1;
        if self.completed.is_multiple_of(256) {
            (self.progress)(self.completed, self.seqs.len() as u32);
        }
        if self.next_closed > 0 && self.next_closed < self.seqs.len() {
            if self.rec.is_some() {
                self.note_released(self.next_closed);
            }
            self.closed_ready.push_back((t, self.next_closed as u32));
            self.next_closed += 1;
        }
    }

    /// A prefill finished on a prefill instance: send its KV cache to a decode instance.
    pub fn send(&mut self, s: u32, t: f64) -> Result<(), ModelError> {
        let from = self.seqs[s as usize].inst as usize;
        let start = self.pool_start[1];
        let count = self.d.pools[1].instances as usize;
        let to = (start..start + count)
            .min_by_key(|&i| (self.insts[i].load, i))
            .unwrap_or(start);
        let dur = self.transfer_time(from, to, self.seqs[s as usize].kv)?;
        let begin = t
            .max(self.insts[from].link_free)
            .max(self.insts[to].link_free);
        let end = begin + dur;
        self.insts[from].link_free = end;
        self.insts[to].link_free = end;
        self.insts[from].load = self.insts[from].load.saturating_sub(1);
        self.insts[to].load += 1;
        let seq = &mut self.seqs[s as usize];
        seq.leaving = true;
        seq.sent = begin;
        seq.received = end;
        self.push(
            end,
            Ev::Transfer {
                seq: s,
                from: from as u32,
                to: to as u32,
            },
        );
        Ok(())
    }

    fn transfer_done(&mut self, s: u32, from: u32, to: u32, t: f64) {
        let blocks = std::mem::take(&mut self.seqs[s as usize].blocks);
        let src = &mut self.insts[from as usize];
        src.kv_touch(t);
        src.kv_free += blocks;
        self.wake[from as usize] = true;
        let seq = &mut self.seqs[s as usize];
        seq.inst = to;
        seq.leaving = false;
        self.insts[to as usize].waiting.push_back(s);
        self.wake[to as usize] = true;
    }

    /// Time to move `tokens` of KV cache from instance `from` to `to`: every device of the
    /// sender sends its own shard at once, over the innermost network level whose domain
    /// holds both instances (devices are numbered pool by pool, instance by instance).
    fn transfer_time(&self, from: usize, to: usize, tokens: u32) -> Result<f64, ModelError> {
        let (a, b) = (&self.insts[from], &self.insts[to]);
        let ga = self.d.pools[a.pool].plan.gpus_per_replica();
        let gb = self.d.pools[b.pool].plan.gpus_per_replica();
        let lo = a.first_device.min(b.first_device);
        let hi = (a.first_device + ga).max(b.first_device + gb) - 1;
        let net = &self.inf.system().network;
        let Some((li, level)) = net.iter().enumerate().find(|(_, l)| {
            let size = l.domain_size().max(1);
            lo / size == hi / size
        }) else {
            return Err(ModelError::invalid(
                perfcast_core::Key::system("network"),
                hi + 1,
                "no network level spans the prefill and decode instances: the KV cache cannot be sent",
            ));
        };
        let bytes = self.kv[a.pool].memory.kv_bytes(tokens);
        let c = Collective {
            kind: CollectiveKind::SendRecv,
            bytes: Bytes(bytes),
            ranks: 2,
        };
        let opts = self.inf.options();
        let wire = level
            .try_collective_time(&c, opts.collective_algorithm)
            .map_err(|e| perfcast_engine::network::level_error(li, e))?
            .0;
        let t = wire + (opts.collective_overhead_us + self.d.transfer_overhead_us) * 1e-6;
        perfcast_core::units::ensure_finite("KV transfer time", t)
    }

    /// Whether instance `i` prefills only.
    pub fn prefill_only(&self, i: usize) -> bool {
        self.insts[i].role == PoolRole::Prefill
    }
}
