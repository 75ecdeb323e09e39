//! The scheduler of one lane: which sequences a step runs and how many tokens each, KV
//! allocation and preemption; and what a finished step does to its sequences.
//!
//! Each step, in order (TensorRT-LLM's in-flight batching and vLLM's scheduler agree on it):
//! every running sequence in admission order gets its decode token (or its draft
//! verification), then running prefills continue with a chunk, then waiting requests are
//! admitted first-come first-served while the lane has fewer than `max_batch` sequences, the
//! step has token budget left (`max_num_tokens`) and the KV cache has blocks: a request that
//! cannot be admitted stops admission (no overtaking). Chunks take
//! `min(remaining prompt, chunk_size, budget left)` tokens; without chunked prefill a prompt
//! is taken whole or waits for a step with room.
//!
//! Under `prefill-first` batching (SGLang) a step takes the running prefills and the
//! admissions alone when there are any, and the running decodes only when there are none.

use crate::deployment::{Batching, KvAdmission, PoolRole};
use crate::state::Run;
use crate::state::{At, Ev, StepRecord, Work};
use perfcast_core::ModelError;
use perfcast_engine::inference::{PrefillChunk, StepBatch};

/// Which running sequences a step takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Decodes and prefill chunks.
    Both,
    /// Prefill chunks only.
    Prefill,
    /// Decodes only.
    Decode,
}

impl Phase {
    fn takes(self, decoding: bool) -> bool {
        match self {
            Phase::Both => true,
            Phase::Prefill => !decoding,
            Phase::Decode => decoding,
        }
    }
}

/// What a step being formed holds so far: its tokens, its decodes and their context.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    tokens: u32,
    decodes: u32,
    ctx: u64,
}

impl Run<'_, '_> {
    /// Tokens a decode of `s` feeds the model: 1, or the draft and the last token.
    fn decode_q(&self) -> u32 {
        self.d.speculative.map_or(1, |s| s.draft_len + 1)
    }

    /// KV blocks a sequence of `tokens` tokens holds on instance `i` (its layers' spans
    /// decide: [`perfcast_engine::inference::ServingMemory::kv_blocks`]).
    fn blocks_for(&self, i: usize, tokens: u32) -> u32 {
        self.kv[self.insts[i].pool]
            .memory
            .kv_blocks(tokens, self.d.kv_block_size)
    }

    /// Blocks a sequence holds on instance `i` under the guaranteed policy from admission
    /// on.
    fn guaranteed_blocks(&self, i: usize, s: u32, role: PoolRole) -> u32 {
        let seq = &self.seqs[s as usize];
        let tokens = match role {
            PoolRole::Prefill => seq.input,
            _ => self.d.reserved_tokens(seq.input + seq.output),
        };
        self.blocks_for(i, tokens)
    }

    /// Preempt `s` (recompute): its blocks go back, it returns to the front of the queue and
    /// will prefill its prompt and everything it generated again.
    fn preempt(&mut self, i: usize, s: u32, t: f64) {
        self.touch(i, t);
        let seq = &mut self.seqs[s as usize];
        let blocks = std::mem::take(&mut seq.blocks);
        seq.target = seq.input + seq.generated;
        seq.prefilled = seq.cached;
        seq.kv = seq.cached;
        seq.preemptions += 1;
        let inst = &mut self.insts[i];
        inst.kv_free += blocks;
        inst.waiting.push_front(s);
        self.preemptions += 1;
    }

    /// Give `running[k]` `need` more blocks, preempting the lane's later-admitted sequences
    /// (and at last itself) while the cache is short. False when `running[k]` was preempted.
    fn grow(&mut self, i: usize, running: &mut Vec<u32>, k: usize, need: u32, t: f64) -> bool {
        while self.insts[i].kv_free < need {
            if running.len() > k + 1 {
                let victim = running.pop().unwrap_or_default();
                self.preempt(i, victim, t);
            } else {
                let s = running.remove(k);
                self.preempt(i, s, t);
                return false;
            }
        }
        self.touch(i, t);
        self.insts[i].take(need);
        self.seqs[running[k] as usize].blocks += need;
        true
    }

    /// Form and start the next step of lane `l` of instance `i` at `t`, if it has work.
    pub fn start_step(&mut self, i: usize, l: usize, t: f64) -> Result<(), ModelError> {
        let mut running = std::mem::take(&mut self.insts[i].lanes[l].running);
        let mut work = std::mem::take(&mut self.insts[i].lanes[l].work);
        work.clear();
        self.chunks.clear();
        let mut tally = Tally::default();
        // Recording: what is done while forming the step is done at its start.
        let cause = if self.rec.is_some() {
            self.note_forming()
        } else {
            None
        };
        if self.d.batching == Batching::PrefillFirst {
            // A step of prefills when one can be formed, else of decodes.
            self.continue_running(i, &mut running, &mut work, &mut tally, t, Phase::Prefill);
            self.admit_waiting(i, &mut running, &mut work, &mut tally, t);
            if work.is_empty() {
                self.continue_running(i, &mut running, &mut work, &mut tally, t, Phase::Decode);
            }
        } else {
            self.continue_running(i, &mut running, &mut work, &mut tally, t, Phase::Both);
            self.admit_waiting(i, &mut running, &mut work, &mut tally, t);
        }
        let lane_work = !work.is_empty();
        let mut dur = 0.0;
        if self.rec.is_some() {
            let formed = StepRecord {
                inst: i as u32,
                lane: l as u32,
                cause: At::Start(0),
                chunks: (0, 0),
                decodes: tally.decodes,
                ctx: tally.ctx,
                seqs: work.len() as u32,
                tokens: tally.tokens,
            };
            self.note_formed(cause, lane_work.then_some(formed));
        }
        if lane_work {
            dur = self.step_duration(i, tally.decodes, tally.ctx, work.len())?;
            let inst = &mut self.insts[i];
            inst.busy_time += dur;
            inst.steps += 1;
            inst.seqs_in_steps += work.len() as u64;
            inst.tokens_in_steps += tally.tokens as u64;
            self.steps += 1;
        }
        let lane = &mut self.insts[i].lanes[l];
        lane.running = running;
        lane.work = work;
        lane.busy = lane_work;
        if lane_work {
            self.push(
                t + dur,
                Ev::StepEnd {
                    inst: i as u32,
                    lane: l as u32,
                },
            );
        }
        Ok(())
    }

    /// The step's share of the sequences already running on instance `i`: a decode (or a
    /// speculative verify) each, or the next prefill chunk, within the token budget; under
    /// on-demand admission a sequence's KV grows first (evicting the newest if it must).
    fn continue_running(
        &mut self,
        i: usize,
        running: &mut Vec<u32>,
        work: &mut Vec<Work>,
        tally: &mut Tally,
        t: f64,
        phase: Phase,
    ) {
        let budget = self.d.pools[self.insts[i].pool].max_num_tokens;
        let on_demand = self.d.kv_admission == KvAdmission::OnDemand;
        let q = self.decode_q();
        let mut k = 0;
        while k < running.len() {
            let s = running[k];
            if phase != Phase::Both && !phase.takes(self.seqs[s as usize].decoding()) {
                k += 1;
                continue;
            }
            // The common case first: a decode under the guaranteed policy.
            if !on_demand {
                let seq = &self.seqs[s as usize];
                if seq.prefilled >= seq.target {
                    if q <= budget - tally.tokens {
                        tally.decodes += 1;
                        tally.ctx += (seq.kv + q) as u64;
                        tally.tokens += q;
                        work.push(Work {
                            seq: s,
                            tokens: q,
                            decode: true,
                        });
                    }
                    k += 1;
                    continue;
                }
            }
            let seq = self.seqs[s as usize];
            let room = budget - tally.tokens;
            let take = if seq.decoding() {
                if q > room {
                    0
                } else {
                    q
                }
            } else {
                let rem = seq.target - seq.prefilled;
                if self.d.chunked_prefill {
                    rem.min(self.d.chunk_size).min(room)
                } else if rem <= room {
                    rem
                } else {
                    0
                }
            };
            if take == 0 {
                k += 1;
                continue;
            }
            if on_demand {
                let need = self.blocks_for(i, seq.kv + take).saturating_sub(seq.blocks);
                if need > 0 && !self.grow(i, running, k, need, t) {
                    continue;
                }
            }
            self.add_work(s, take, work, tally);
            k += 1;
        }
    }

    /// Admit waiting sequences to instance `i` in arrival order while the batch, the token
    /// budget and the free KV blocks allow.
    fn admit_waiting(
        &mut self,
        i: usize,
        running: &mut Vec<u32>,
        work: &mut Vec<Work>,
        tally: &mut Tally,
        t: f64,
    ) {
        let pool = &self.d.pools[self.insts[i].pool];
        let (budget, max_batch, role) = (pool.max_num_tokens, pool.max_batch, pool.role);
        let on_demand = self.d.kv_admission == KvAdmission::OnDemand;
        let q = self.decode_q();
        while running.len() < max_batch as usize && tally.tokens < budget {
            let Some(&s) = self.insts[i].waiting.front() else {
                break;
            };
            let seq = self.seqs[s as usize];
            let room = budget - tally.tokens;
            let take = if seq.decoding() {
                q
            } else {
                let rem = seq.target - seq.prefilled;
                if self.d.chunked_prefill {
                    rem.min(self.d.chunk_size).min(room)
                } else {
                    rem
                }
            };
            if take > room {
                break;
            }
            let need = if on_demand {
                self.blocks_for(i, seq.kv + take)
            } else {
                self.guaranteed_blocks(i, s, role)
            }
            .saturating_sub(seq.blocks);
            let reserve = if on_demand && self.d.admission_reserve > 0.0 {
                self.growth_reserve(i, running)
            } else {
                0
            };
            if need.saturating_add(reserve) > self.insts[i].kv_free {
                break;
            }
            self.insts[i].waiting.pop_front();
            self.touch(i, t);
            self.insts[i].take(need);
            self.seqs[s as usize].blocks += need;
            running.push(s);
            self.add_work(s, take, work, tally);
        }
    }

    /// Blocks the running sequences of instance `i` are expected to need before they finish:
    /// each one's remaining prompt and `admission_reserve` of its remaining output (SGLang's
    /// `new_token_ratio` in `PrefillAdder`), beyond the blocks it holds.
    fn growth_reserve(&self, i: usize, running: &[u32]) -> u32 {
        let r = self.d.admission_reserve;
        running
            .iter()
            .map(|&s| {
                let seq = &self.seqs[s as usize];
                let left = seq.output.saturating_sub(seq.generated) as f64 * r;
                let tokens = seq.target.max(seq.kv) + left.ceil() as u32;
                self.blocks_for(i, tokens).saturating_sub(seq.blocks)
            })
            .fold(0u32, u32::saturating_add)
    }

    fn add_work(&mut self, s: u32, take: u32, work: &mut Vec<Work>, tally: &mut Tally) {
        let seq = &self.seqs[s as usize];
        let decode = seq.decoding();
        if decode {
            tally.decodes += 1;
            tally.ctx += (seq.kv + take) as u64;
        } else {
            self.chunks.push(PrefillChunk {
                tokens: take,
                prior: seq.prefilled,
                last: seq.prefilled + take == seq.target,
            });
        }
        tally.tokens += take;
        work.push(Work {
            seq: s,
            tokens: take,
            decode,
        });
    }

    /// The step's time: the engine step of this composition, the draft model's steps when
    /// speculating, and the runtime's host costs.
    pub(super) fn step_duration(
        &mut self,
        i: usize,
        decodes: u32,
        ctx: u64,
        seqs: usize,
    ) -> Result<f64, ModelError> {
        let pool = self.insts[i].pool;
        let costs = &mut self.costs[self.pool_costs[pool]];
        let q = self.d.speculative.map_or(1, |s| s.draft_len + 1);
        let graph = if self.chunks.is_empty() {
            self.d.graph_batch(decodes)
        } else {
            None
        };
        let batch = StepBatch {
            chunks: &self.chunks,
            decodes,
            decode_context: ctx,
            decode_tokens: q,
            graph_batch: graph,
        };
        let mut t = costs.time(&batch)?;
        if let Some(s) = self.d.speculative {
            let draft = StepBatch {
                chunks: &[],
                decodes,
                decode_context: ctx - decodes as u64 * (q as u64 - 1),
                decode_tokens: 1,
                graph_batch: self.d.graph_batch(decodes),
            };
            if decodes > 0 && s.timed() {
                // One pass of the draft's engine per draft token, run one after the other
                // (each draft token feeds the next).
                if let Some(k) = self.pool_draft[pool] {
                    t += s.draft_len as f64 * self.draft_costs[k].time(&draft)?;
                }
            } else if decodes > 0 && s.draft_cost > 0.0 {
                t += s.draft_len as f64 * s.draft_cost * costs.time(&draft)?;
            }
        }
        t += (self.d.scheduler_overhead_us + self.d.per_sequence_overhead_us * seqs as f64) * 1e-6;
        perfcast_core::units::ensure_finite("serving step time", t)
    }

    /// Tokens a verification step gains: the accepted drafts (each accepted with the
    /// acceptance rate, up to the first rejection) and the target's own token.
    fn gained(&mut self) -> u32 {
        match self.d.speculative {
            None => 1,
            Some(s) => {
                let mut n = 1;
                while n <= s.draft_len && self.rng.next_f64() < s.acceptance_rate {
                    n += 1;
                }
                n
            }
        }
    }

    /// Lane `l` of instance `i` finished its step at `t`.
    pub fn step_end(&mut self, i: usize, l: usize, t: f64) -> Result<(), ModelError> {
        let work = std::mem::take(&mut self.insts[i].lanes[l].work);
        let on_demand = self.d.kv_admission == KvAdmission::OnDemand;
        let prefill_only = self.prefill_only(i);
        let mut leaving = false;
        let spec = self.d.speculative.is_some();
        for w in &work {
            let s = w.seq as usize;
            if w.decode && !spec && !on_demand {
                // The common case: one token, no blocks to give back.
                let seq = &mut self.seqs[s];
                seq.generated += 1;
                seq.kv += 1;
                if seq.generated >= seq.output {
                    self.finish(w.seq, t);
                    leaving = true;
                }
                continue;
            }
            if w.decode {
                let g = self.gained();
                let seq = &mut self.seqs[s];
                let g = g.min(seq.output - seq.generated);
                seq.generated += g;
                seq.kv += g;
                if on_demand {
                    let kv = seq.kv;
                    let keep = self.blocks_for(i, kv);
                    let seq = &mut self.seqs[s];
                    let extra = seq.blocks.saturating_sub(keep);
                    if extra > 0 {
                        seq.blocks -= extra;
                        self.touch(i, t);
                        self.insts[i].kv_free += extra;
                    }
                }
            } else {
                let seq = &mut self.seqs[s];
                seq.prefilled += w.tokens;
                seq.kv += w.tokens;
                if seq.prefilled == seq.target {
                    seq.generated += 1;
                    if seq.first.is_nan() {
                        seq.first = t;
                        if self.rec.is_some() {
                            self.note_first(s);
                        }
                    }
                }
            }
            let seq = self.seqs[s];
            if seq.generated >= seq.output {
                self.finish(w.seq, t);
                leaving = true;
            } else if prefill_only && seq.decoding() {
                self.send(w.seq, t)?;
                leaving = true;
            }
        }
        let lane = &mut self.insts[i].lanes[l];
        if leaving {
            let seqs = &mut self.seqs;
            lane.running.retain(|&s| {
                let seq = &mut seqs[s as usize];
                !std::mem::take(&mut seq.leaving)
            });
        }
        lane.work = work;
        lane.busy = false;
        // Blocks may have been freed: every lane of the instance may now start.
        self.wake[i] = true;
        Ok(())
    }
}
