//! The simulator's state: one run's (`Run`), its sequences, instances and their pipeline lanes,
//! the event queue.

use crate::deployment::{Deployment, KvCache, PoolRole};
use crate::rng::Rng;
use perfcast_engine::inference::{Inference, StepCosts};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// One request's progress.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seq {
    pub input: u32,
    pub output: u32,
    /// Prompt tokens found in the prefix cache (whole blocks).
    pub cached: u32,
    /// Prompt tokens to have in the KV cache before decoding: the prompt, or after a
    /// preemption the prompt and every token generated so far (recompute).
    pub target: u32,
    /// Prompt tokens in the KV cache (the cached prefix included).
    pub prefilled: u32,
    /// Tokens in the KV cache.
    pub kv: u32,
    /// Output tokens produced.
    pub generated: u32,
    /// KV blocks held.
    pub blocks: u32,
    /// Instance it is in (or being sent to).
    pub inst: u32,
    pub arrival: f64,
    pub first: f64,
    pub finish: f64,
    /// Start of the KV transfer (disaggregated), and its end.
    pub sent: f64,
    pub received: f64,
    pub preemptions: u32,
    /// Leaves its lane at the end of this step (finished or sent to a decode instance).
    pub leaving: bool,
}

impl Seq {
    pub fn new(arrival: f64, input: u32, output: u32, cached: u32) -> Seq {
        Seq {
            input,
            output,
            cached,
            target: input,
            prefilled: cached,
            kv: cached,
            generated: 0,
            blocks: 0,
            inst: 0,
            arrival,
            first: f64::NAN,
            finish: f64::NAN,
            sent: f64::NAN,
            received: f64::NAN,
            preemptions: 0,
            leaving: false,
        }
    }
    pub fn decoding(&self) -> bool {
        self.prefilled >= self.target
    }
    pub fn done(&self) -> bool {
        !self.finish.is_nan()
    }
}

/// One unit of work of a step.
#[derive(Clone, Copy, Debug)]
pub(super) struct Work {
    pub seq: u32,
    pub tokens: u32,
    pub decode: bool,
}

/// A pipeline lane of an instance: one micro-batch in flight.
#[derive(Clone, Debug, Default)]
pub(super) struct Lane {
    pub running: Vec<u32>,
    pub busy: bool,
    pub work: Vec<Work>,
}

/// A moment of a recorded run, named by what happened then (its time differs from one
/// engine to another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum At {
    /// A request's arrival.
    Arrival(u32),
    /// A step's start.
    Start(u32),
    /// A step's end.
    End(u32),
}

/// One step of a recorded run: where it ran, what it held, and which moment it started at.
#[derive(Clone, Copy, Debug)]
pub(super) struct StepRecord {
    pub inst: u32,
    pub lane: u32,
    /// The event whose handling formed the step.
    pub cause: At,
    /// Its prefill chunks: a range of [`Recorder::chunks`].
    pub chunks: (u32, u32),
    pub decodes: u32,
    pub ctx: u64,
    pub seqs: u32,
    pub tokens: u32,
}

/// What a run records to be re-timed on another engine ([`crate::Schedule`]).
#[derive(Clone, Debug, Default)]
pub(super) struct Recorder {
    /// The moment of the event being handled.
    pub now: Option<At>,
    /// Per instance and lane, the number of its step in flight (its order among the run's
    /// steps).
    pub lane_step: Vec<Vec<u32>>,
    pub steps: Vec<StepRecord>,
    pub chunks: Vec<perfcast_engine::inference::PrefillChunk>,
    /// Every change of an instance's KV occupancy: the instance, when, and the blocks in
    /// use just before.
    pub touches: Vec<(u32, At, u32)>,
    /// Per request, the step that gave its first token and the one that finished it
    /// (`u32::MAX`: none).
    pub first: Vec<u32>,
    pub finish: Vec<u32>,
    /// Per request of a closed loop, the step whose end finished the request that sent it
    /// (`u32::MAX`: sent at the start).
    pub released: Vec<u32>,
}

/// One instance (a replica, or a member of a disaggregated pool).
#[derive(Clone, Debug)]
pub(super) struct Inst {
    pub pool: usize,
    pub role: PoolRole,
    pub kv_total: u32,
    pub kv_free: u32,
    pub waiting: VecDeque<u32>,
    pub lanes: Vec<Lane>,
    /// Requests assigned and not yet finished or sent away (routing).
    pub load: u32,
    /// First device of the instance in the deployment's device order.
    pub first_device: u32,
    /// When its network links are free again (disaggregated transfers).
    pub link_free: f64,
    pub kv_last: f64,
    pub kv_area: f64,
    pub kv_peak: u32,
    pub busy_time: f64,
    pub steps: u64,
    pub seqs_in_steps: u64,
    pub tokens_in_steps: u64,
}

impl Inst {
    pub fn new(pool: usize, role: PoolRole, kv: &KvCache, lanes: u32, first_device: u32) -> Inst {
        Inst {
            pool,
            role,
            kv_total: kv.blocks,
            kv_free: kv.blocks,
            waiting: VecDeque::new(),
            lanes: vec![Lane::default(); lanes.max(1) as usize],
            load: 0,
            first_device,
            link_free: 0.0,
            kv_last: 0.0,
            kv_area: 0.0,
            kv_peak: 0,
            busy_time: 0.0,
            steps: 0,
            seqs_in_steps: 0,
            tokens_in_steps: 0,
        }
    }

    /// Account the KV occupancy up to `t` (call before every change of `kv_free`).
    pub fn kv_touch(&mut self, t: f64) {
        let used = (self.kv_total - self.kv_free) as f64;
        self.kv_area += used * (t - self.kv_last).max(0.0);
        self.kv_last = t;
    }

    pub fn take(&mut self, blocks: u32) {
        self.kv_free -= blocks;
        self.kv_peak = self.kv_peak.max(self.kv_total - self.kv_free);
    }
}

/// What happens at an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ev {
    /// A lane's step ends.
    StepEnd { inst: u32, lane: u32 },
    /// A sequence's KV cache has arrived at decode instance `to` from `from`.
    Transfer { seq: u32, from: u32, to: u32 },
}

/// An event at a time; ties in insertion order.
#[derive(Clone, Copy, Debug)]
pub(super) struct Event {
    pub t: f64,
    pub order: u64,
    pub ev: Ev,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Reversed, so that `BinaryHeap` pops the earliest.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.order.cmp(&self.order))
    }
}

/// One run's mutable state.
pub(super) struct Run<'r, 'a> {
    pub d: &'r Deployment,
    pub kv: Vec<KvCache>,
    /// Index into the simulator's cost tables per pool.
    pub pool_costs: Vec<usize>,
    pub costs: &'r mut [StepCosts<'a>],
    /// Per pool, the draft engine's step tables (timed drafts only).
    pub pool_draft: Vec<Option<usize>>,
    pub draft_costs: &'r mut [StepCosts<'a>],
    pub seqs: Vec<Seq>,
    pub insts: Vec<Inst>,
    /// First instance of each pool.
    pub pool_start: Vec<usize>,
    pub heap: BinaryHeap<Event>,
    pub order: u64,
    pub rng: Rng,
    pub rr: usize,
    /// Instances whose idle lanes should try to start a step once the current time's
    /// events are all processed.
    pub wake: Vec<bool>,
    pub chunks: Vec<perfcast_engine::inference::PrefillChunk>,
    pub preemptions: u64,
    pub steps: u64,
    /// Closed loop: requests not yet sent.
    pub next_closed: usize,
    pub closed_ready: VecDeque<(f64, u32)>,
    pub inf: &'a Inference,
    /// The schedule being recorded, when asked for and the run can be re-timed.
    pub rec: Option<Box<Recorder>>,
    /// Requests completed so far, and who wants to know.
    pub completed: u32,
    pub progress: &'r mut dyn FnMut(u32, u32),
}
