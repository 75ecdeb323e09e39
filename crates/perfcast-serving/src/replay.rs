//! A run's schedule, re-timed on another engine: what a calibration evaluates hundreds of
//! times instead of simulating the run again.

use crate::config::Slo;
use crate::deployment::{Deployment, KvCache, PoolRole};
use crate::report::{self, ServingReport};
use crate::sim::Simulator;
use crate::state::{At, Recorder, Run, StepRecord};
use crate::workload::Traffic;
use perfcast_core::ModelError;

/// What a run did, step by step, without its times: each step's lane, batch (its prefill
/// chunks, decodes and their context) and the event it started at; the step that gave each
/// request its first token and the one that finished it (and, in a closed loop, the one
/// that sent it); every change of the KV caches' occupancy. [`Simulator::replay`] times the
/// same steps on another engine (other step costs) and reports as a run of that engine
/// would, exactly: a schedule is recorded only where it does not depend on step times
/// ([`Schedule::fits`]), on aggregated instances of one lane each, without speculation, when
/// every request is in at once (an offline run: each instance takes requests in order as its
/// KV cache frees, whatever a step lasts) or a closed loop feeds one instance (a request is
/// sent at the end of the step that finished another), under either KV admission and either
/// batching policy (admissions and preemptions follow the cache's blocks, not the clock). Under a rate, across the lanes of a pipeline, or with a closed loop over
/// several instances, a slower step batches the requests differently (in a trial near
/// saturation, Llama 2 7B on one H100 at 6 req/s, re-timing a recorded schedule on steps
/// 0.3% slower moved the mean TTFT by 25%): those runs are simulated.
#[derive(Clone, Debug)]
pub struct Schedule {
    rec: Recorder,
    /// Per instance, the most KV blocks in use at once (the schedule's, not its times').
    kv_peak: Vec<u32>,
    /// Preemptions of the run (decided on blocks, not times).
    preemptions: u64,
    /// What the schedule was decided on: the deployment, the requests and the KV caches
    /// (a replay on others is refused).
    deployment: Deployment,
    traffic: Traffic,
    kv: Vec<KvCache>,
}

impl Schedule {
    /// Whether a run of `d` on `traffic` has a schedule that does not depend on step times.
    pub fn fits(d: &Deployment, traffic: &Traffic) -> bool {
        let in_order = match traffic {
            Traffic::Open(r) => r
                .first()
                .is_none_or(|f| r.iter().all(|x| x.arrival == f.arrival)),
            Traffic::Closed { .. } => {
                d.pools
                    .iter()
                    .map(|p| p.instances)
                    .fold(0, u32::saturating_add)
                    == 1
            }
        };
        in_order
            && d.pools
                .iter()
                .all(|p| p.role == PoolRole::Both && p.plan.pp == 1)
            && d.speculative.is_none()
    }

    pub(super) fn new(rec: Recorder, run: &Run, traffic: &Traffic) -> Schedule {
        Schedule {
            kv_peak: run.insts.iter().map(|i| i.kv_peak).collect(),
            preemptions: run.preemptions,
            deployment: run.d.clone(),
            traffic: traffic.clone(),
            kv: run.kv.clone(),
            rec,
        }
    }

    /// Steps recorded.
    pub fn steps(&self) -> usize {
        self.rec.steps.len()
    }
}

/// Recording, out of the simulator's hot path (each call behind `self.rec.is_some()`).
impl Run<'_, '_> {
    /// The event being handled happened at `at`.
    #[cold]
    #[inline(never)]
    pub(super) fn note_now(&mut self, at: At) {
        if let Some(r) = &mut self.rec {
            r.now = Some(at);
        }
    }

    /// The step in flight on lane `l` of instance `i` ended (the event being handled).
    #[cold]
    #[inline(never)]
    pub(super) fn note_end(&mut self, i: usize, l: usize) {
        if let Some(r) = &mut self.rec {
            r.now = Some(At::End(r.lane_step[i][l]));
        }
    }

    /// A step is being formed (what is done meanwhile is done at its start): the event that
    /// formed it.
    #[cold]
    #[inline(never)]
    pub(super) fn note_forming(&mut self) -> Option<At> {
        let r = self.rec.as_mut()?;
        let cause = r.now;
        r.now = Some(At::Start(self.steps as u32));
        cause
    }

    /// The step formed by `cause`, if it has work (`formed`'s cause and chunks are filled
    /// here); a step of no event, or too many to name, ends the recording.
    #[cold]
    #[inline(never)]
    pub(super) fn note_formed(&mut self, cause: Option<At>, formed: Option<StepRecord>) {
        let Some(r) = &mut self.rec else { return };
        r.now = cause;
        let Some(step) = formed else { return };
        match cause {
            Some(cause) if self.steps < u64::from(u32::MAX) => {
                r.lane_step[step.inst as usize][step.lane as usize] = r.steps.len() as u32;
                let from = r.chunks.len() as u32;
                r.chunks.extend_from_slice(&self.chunks);
                r.steps.push(StepRecord {
                    cause,
                    chunks: (from, r.chunks.len() as u32),
                    ..step
                });
            }
            _ => self.rec = None,
        }
    }

    /// The recorder and the step whose end is being handled, when one is.
    fn step_ending(&mut self) -> Option<(&mut Recorder, u32)> {
        let r = self.rec.as_deref_mut()?;
        match r.now {
            Some(At::End(k)) => Some((r, k)),
            _ => None,
        }
    }

    /// Instance `i`'s KV occupancy is about to change.
    #[cold]
    #[inline(never)]
    pub(super) fn note_touch(&mut self, i: usize) {
        let inst = &self.insts[i];
        if let Some(r) = &mut self.rec {
            if let Some(at) = r.now {
                r.touches.push((i as u32, at, inst.kv_total - inst.kv_free));
            }
        }
    }

    /// Request `s` got its first token at the end of the step being handled.
    #[cold]
    #[inline(never)]
    pub(super) fn note_first(&mut self, s: usize) {
        if let Some((r, k)) = self.step_ending() {
            r.first[s] = k;
        }
    }

    /// Request `s` finished at the end of the step being handled.
    #[cold]
    #[inline(never)]
    pub(super) fn note_finish(&mut self, s: u32) {
        if let Some((r, k)) = self.step_ending() {
            r.finish[s as usize] = k;
        }
    }

    /// Closed loop: request `s` is sent at the end of the step being handled.
    #[cold]
    #[inline(never)]
    pub(super) fn note_released(&mut self, s: usize) {
        if let Some((r, k)) = self.step_ending() {
            r.released[s] = k;
        }
    }
}

impl Simulator<'_> {
    /// The run `schedule` recorded ([`Simulator::run_recorded`], on any engine of the same
    /// model and deployment), its steps timed on this simulator's engine.
    pub fn replay(
        &mut self,
        d: &Deployment,
        traffic: &Traffic,
        schedule: &Schedule,
        slos: &[Slo],
    ) -> Result<ServingReport, ModelError> {
        let mut progress = |_, _| {};
        let mut run = self.start(d, traffic, 0, &mut progress)?;
        let rec = &schedule.rec;
        if *d != schedule.deployment || *traffic != schedule.traffic || run.kv != schedule.kv {
            return Err(ModelError::invalid(
                perfcast_core::Key::other("serving schedule"),
                format!("{} requests, {} steps", rec.first.len(), rec.steps.len()),
                "was recorded on another deployment, workload or KV cache than the one to replay",
            ));
        }
        let mut start = Vec::with_capacity(rec.steps.len());
        let mut end: Vec<f64> = Vec::with_capacity(rec.steps.len());
        let mut lane_free: Vec<Vec<f64>> =
            run.insts.iter().map(|i| vec![0.0; i.lanes.len()]).collect();
        // A request's arrival: its own time, or the end of the step that sent it.
        let time = |at: At, start: &[f64], end: &[f64], seqs: &[crate::state::Seq]| match at {
            At::Arrival(s) => end
                .get(rec.released[s as usize] as usize)
                .copied()
                .unwrap_or(seqs[s as usize].arrival),
            At::Start(k) => start[k as usize],
            At::End(k) => end[k as usize],
        };
        if let Traffic::Closed { .. } = traffic {
            // The clients' first requests are sent at the start; the others are timed below.
            run.seqs.iter_mut().for_each(|s| s.arrival = 0.0);
        }
        for s in &rec.steps {
            let &StepRecord {
                inst,
                lane,
                cause,
                chunks: (a, b),
                decodes,
                ctx,
                seqs,
                tokens,
            } = s;
            let (i, l) = (inst as usize, lane as usize);
            let t0 = time(cause, &start, &end, &run.seqs).max(lane_free[i][l]);
            run.chunks.clear();
            run.chunks
                .extend_from_slice(&rec.chunks[a as usize..b as usize]);
            let dur = run.step_duration(i, decodes, ctx, seqs as usize)?;
            let x = &mut run.insts[i];
            x.busy_time += dur;
            x.steps += 1;
            x.seqs_in_steps += u64::from(seqs);
            x.tokens_in_steps += u64::from(tokens);
            start.push(t0);
            end.push(t0 + dur);
            lane_free[i][l] = t0 + dur;
        }
        run.steps = rec.steps.len() as u64;
        for (k, seq) in run.seqs.iter_mut().enumerate() {
            if let Some(&e) = end.get(rec.released[k] as usize) {
                seq.arrival = e;
            }
            if let Some(&e) = end.get(rec.first[k] as usize) {
                seq.first = e;
            }
            if let Some(&e) = end.get(rec.finish[k] as usize) {
                seq.finish = e;
                run.completed += 1;
            }
        }
        for &(i, at, used) in &rec.touches {
            let t = time(at, &start, &end, &run.seqs);
            let x = &mut run.insts[i as usize];
            x.kv_free = x.kv_total - used;
            x.kv_touch(t);
        }
        for (x, &peak) in run.insts.iter_mut().zip(&schedule.kv_peak) {
            x.kv_peak = peak;
        }
        run.preemptions = schedule.preemptions;
        Ok(report::build(&run, traffic, slos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArrivalProcess, KvAdmission, Length, Load, ServingConfig, WorkloadSpec};
    use perfcast_engine::inference::{Inference, InferenceOptions};
    use perfcast_testkit::flat::h100;
    use perfcast_testkit::llama2;

    fn engine(devices: u32, step_overhead_us: f64) -> Inference {
        let options = InferenceOptions {
            step_overhead_us,
            ..InferenceOptions::default()
        };
        Inference::new(llama2(7), h100(devices), options).unwrap()
    }

    fn setup(c: &ServingConfig, load: Load) -> (Deployment, Traffic) {
        let traffic = WorkloadSpec {
            input_len: Length::Fixed(1500),
            output_len: Length::Fixed(100),
            requests: c.requests,
            load,
            seed: 3,
        }
        .traffic();
        let d = c.deployment(None, traffic.max_context()).unwrap();
        (d, traffic)
    }

    fn config() -> ServingConfig {
        ServingConfig {
            requests: 120,
            max_batch: 32,
            max_num_tokens: 4096,
            ..ServingConfig::default()
        }
    }

    fn rate(rate: f64) -> Load {
        Load::Rate {
            rate,
            process: ArrivalProcess::Poisson,
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs()
    }

    /// On the engine that recorded it, a schedule replays to the run's report bit for bit;
    /// on another engine, to that engine's run (offline on one replica and two; a closed loop
    /// on one).
    #[test]
    fn a_schedule_is_its_run_on_any_engine() {
        let (slow, fast) = (engine(2, 2000.0), engine(2, 0.0));
        let two_replicas = ServingConfig {
            replicas: Some(2),
            ..config()
        };
        // On-demand KV in a cache that runs short (preemptions), with SGLang's reserve, and
        // prefill-first batching.
        let on_demand = ServingConfig {
            kv_admission: KvAdmission::OnDemand,
            kv_memory_fraction: 0.1,
            ..config()
        };
        let reserved = ServingConfig {
            admission_reserve: 0.7,
            batching: crate::Batching::PrefillFirst,
            ..on_demand.clone()
        };
        for (c, load) in [
            (config(), Load::Burst),
            (two_replicas.clone(), Load::Burst),
            (config(), Load::Concurrency(24)),
            (on_demand.clone(), Load::Burst),
            (on_demand, Load::Concurrency(24)),
            (reserved, Load::Concurrency(24)),
        ] {
            let (d, traffic) = setup(&c, load);
            let mut sim = Simulator::new(&slow);
            let (rep, schedule) = sim.run_recorded(&d, &traffic, 0, &[]).unwrap();
            let schedule = schedule.expect("recorded");
            assert_eq!(
                schedule.steps() as u64,
                rep.pools.iter().map(|p| p.steps).sum::<u64>()
            );
            assert_eq!(rep, sim.run(&d, &traffic, 0, &[]).unwrap());
            assert_eq!(sim.replay(&d, &traffic, &schedule, &[]).unwrap(), rep);
            if c.kv_memory_fraction < 0.2 && c.admission_reserve == 0.0 {
                assert!(rep.preemptions > 0, "{c:?} {load:?}: {rep:?}");
            }
            let mut sim = Simulator::new(&fast);
            let direct = sim.run(&d, &traffic, 0, &[]).unwrap();
            let replayed = sim.replay(&d, &traffic, &schedule, &[]).unwrap();
            assert!(direct.duration.0 < rep.duration.0 * 0.97);
            assert_eq!(replayed.pools, direct.pools);
            for (a, b) in [
                (replayed.duration.0, direct.duration.0),
                (replayed.ttft.mean.0, direct.ttft.mean.0),
                (replayed.ttft.p99.0, direct.ttft.p99.0),
                (replayed.itl_mean.0, direct.itl_mean.0),
                (replayed.e2e.mean.0, direct.e2e.mean.0),
                (replayed.output_tokens_per_s, direct.output_tokens_per_s),
            ] {
                assert!(close(a, b, 1e-12), "{a} vs {b}");
            }
        }
    }

    /// Runs a schedule cannot stand for (a pipeline, a rate, a closed loop over two replicas)
    /// record none; a schedule replayed on another workload is refused.
    #[test]
    fn what_a_schedule_cannot_stand_for() {
        let inf = engine(2, 0.0);
        let pipeline = ServingConfig {
            pp: Some(2),
            ..config()
        };
        let two_replicas = ServingConfig {
            replicas: Some(2),
            ..config()
        };
        for (c, load) in [
            (pipeline, Load::Burst),
            (config(), rate(6.0)),
            (two_replicas, Load::Concurrency(24)),
        ] {
            let (d, traffic) = setup(&c, load);
            let mut sim = Simulator::new(&inf);
            let (rep, none) = sim.run_recorded(&d, &traffic, 0, &[]).unwrap();
            assert!(none.is_none(), "{load:?}");
            assert_eq!(rep, sim.run(&d, &traffic, 0, &[]).unwrap());
        }
        let (d, traffic) = setup(&config(), Load::Burst);
        let (_, schedule) = Simulator::new(&inf)
            .run_recorded(&d, &traffic, 0, &[])
            .unwrap();
        let fewer = ServingConfig {
            requests: 60,
            ..config()
        };
        let (d2, traffic2) = setup(&fewer, Load::Burst);
        let e = Simulator::new(&inf)
            .replay(&d2, &traffic2, &schedule.unwrap(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("serving schedule") && e.contains("another deployment"),
            "{e}"
        );
    }
}
