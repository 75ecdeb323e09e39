//! The requests of a simulation: generated from a [`WorkloadSpec`] (seeded) or read from a
//! trace (CSV or JSON lines, every bad line named).

use crate::config::{ArrivalProcess, Length, Load, WorkloadSpec};
use crate::rng::Rng;
use serde::Serialize;

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Request {
    /// Arrival time, seconds from the start (closed loop: ignored, clients send when ready).
    pub arrival: f64,
    /// Prompt tokens.
    pub input: u32,
    /// Generated tokens, the first included.
    pub output: u32,
}

/// The traffic of a simulation, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    /// Requests that arrive at their own times (sorted by arrival).
    Open(Vec<Request>),
    /// `clients` clients send the requests in order, each when its previous one completes.
    Closed {
        /// Clients.
        clients: u32,
        /// The requests in the order they are sent (arrival times ignored).
        requests: Vec<Request>,
    },
}

impl Traffic {
    /// The requests.
    pub fn requests(&self) -> &[Request] {
        match self {
            Traffic::Open(r) => r,
            Traffic::Closed { requests, .. } => requests,
        }
    }
    /// Longest prompt.
    pub fn max_input(&self) -> u32 {
        self.requests().iter().map(|r| r.input).max().unwrap_or(1)
    }
    /// Longest prompt plus output.
    pub fn max_context(&self) -> u32 {
        self.requests()
            .iter()
            .map(|r| r.input.saturating_add(r.output))
            .max()
            .unwrap_or(2)
    }
}

fn draw(rng: &mut Rng, l: Length) -> u32 {
    match l {
        Length::Fixed(n) => n,
        Length::Range { min, max } => rng.range(min, max),
    }
}

impl WorkloadSpec {
    /// The requests of this spec: lengths drawn first (one stream), then arrival times (a
    /// second stream), so that the same seed gives the same requests at every rate.
    pub fn traffic(&self) -> Traffic {
        let mut lengths = Rng::new(self.seed);
        let mut times = Rng::new(self.seed ^ 0x5EED_A771_7A1E_5EED);
        let mut t = 0.0;
        let mut out = Vec::with_capacity(self.requests as usize);
        for i in 0..self.requests {
            let input = draw(&mut lengths, self.input_len);
            let output = draw(&mut lengths, self.output_len);
            let arrival = match self.load {
                Load::Burst | Load::Concurrency(_) => 0.0,
                Load::Rate { rate, process } => {
                    if i > 0 {
                        t += match process {
                            ArrivalProcess::Poisson => times.exponential(rate),
                            ArrivalProcess::Constant => 1.0 / rate,
                        };
                    }
                    t
                }
            };
            out.push(Request {
                arrival,
                input,
                output,
            });
        }
        match self.load {
            Load::Concurrency(c) => Traffic::Closed {
                clients: c,
                requests: out,
            },
            _ => Traffic::Open(out),
        }
    }
}

/// A bad line of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::error::Error for TraceError {}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

/// Trace formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Comma-separated with a header naming `arrival_s`, `input_len` and `output_len` (other
    /// columns ignored).
    Csv,
    /// One JSON object per line with those three fields (other fields ignored).
    Jsonl,
}

/// The field names of a trace.
pub const TRACE_FIELDS: [&str; 3] = ["arrival_s", "input_len", "output_len"];

fn err(line: usize, message: impl Into<String>) -> TraceError {
    TraceError {
        line,
        message: message.into(),
    }
}

fn field(line: usize, name: &str, v: Option<f64>) -> Result<f64, TraceError> {
    let v = v.ok_or_else(|| err(line, format!("no `{name}`")))?;
    if !v.is_finite() {
        return Err(err(line, format!("`{name}` = {v} is not a finite number")));
    }
    if v < 0.0 {
        return Err(err(line, format!("`{name}` = {v} is negative")));
    }
    Ok(v)
}

fn request(line: usize, vals: [Option<f64>; 3]) -> Result<Request, TraceError> {
    let arrival = field(line, TRACE_FIELDS[0], vals[0])?;
    let mut lens = [0u32; 2];
    for (i, l) in lens.iter_mut().enumerate() {
        let name = TRACE_FIELDS[i + 1];
        let v = field(line, name, vals[i + 1])?;
        if v.fract() != 0.0 || v < 1.0 || v > u32::MAX as f64 {
            return Err(err(
                line,
                format!("`{name}` = {v} is not a whole number of tokens >= 1"),
            ));
        }
        *l = v as u32;
    }
    Ok(Request {
        arrival,
        input: lens[0],
        output: lens[1],
    })
}

/// Parse a trace. Blank lines (and, in CSV, lines starting with `#`) are skipped; arrivals are
/// sorted (stable) and shifted so that the first is at 0.
pub fn parse_trace(text: &str, format: TraceFormat) -> Result<Vec<Request>, TraceError> {
    let mut out = Vec::new();
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !(l.is_empty() || format == TraceFormat::Csv && l.starts_with('#')));
    match format {
        TraceFormat::Csv => {
            let (hl, header) = lines
                .next()
                .ok_or_else(|| err(0, "empty trace: no header line"))?;
            let cols: Vec<&str> = header.split(',').map(str::trim).collect();
            let mut idx = [0usize; 3];
            for (k, name) in TRACE_FIELDS.iter().enumerate() {
                idx[k] = cols.iter().position(|c| c == name).ok_or_else(|| {
                    err(
                        hl,
                        format!(
                            "the header has no `{name}` column (it needs {}; it has: {header})",
                            TRACE_FIELDS.join(", ")
                        ),
                    )
                })?;
            }
            for (n, l) in lines {
                let cells: Vec<&str> = l.split(',').map(str::trim).collect();
                let mut vals = [None; 3];
                for k in 0..3 {
                    vals[k] = match cells.get(idx[k]).filter(|c| !c.is_empty()) {
                        None => None,
                        Some(c) => Some(c.parse::<f64>().map_err(|_| {
                            err(n, format!("`{}` = `{c}` is not a number", TRACE_FIELDS[k]))
                        })?),
                    };
                }
                out.push((n, request(n, vals)?));
            }
        }
        TraceFormat::Jsonl => {
            for (n, l) in lines {
                let v: serde_json::Value = serde_json::from_str(l)
                    .map_err(|e| err(n, format!("not a JSON object: {e}")))?;
                let obj = v.as_object().ok_or_else(|| err(n, "not a JSON object"))?;
                let mut vals = [None; 3];
                for (k, name) in TRACE_FIELDS.iter().enumerate() {
                    vals[k] = match obj.get(*name) {
                        None | Some(serde_json::Value::Null) => None,
                        Some(x) => Some(
                            x.as_f64()
                                .ok_or_else(|| err(n, format!("`{name}` = {x} is not a number")))?,
                        ),
                    };
                }
                out.push((n, request(n, vals)?));
            }
        }
    }
    if out.len() > crate::MAX_REQUESTS as usize {
        return Err(err(
            0,
            format!(
                "{} requests: a trace {}",
                out.len(),
                crate::MAX_REQUESTS_RULE
            ),
        ));
    }
    let Some(first) = out
        .iter()
        .min_by(|a, b| a.1.arrival.total_cmp(&b.1.arrival))
    else {
        return Err(err(0, "the trace has no requests"));
    };
    let (l0, t0) = (first.0, first.1.arrival);
    if let Some((n, r)) = out.iter().find(|(_, r)| r.arrival - t0 > MAX_TRACE_SPAN_S) {
        return Err(err(
            *n,
            format!(
                "`arrival_s` = {} is {:.3e} s after the first arrival (line {l0}): a trace may \
                 span at most {MAX_TRACE_SPAN_S:e} s (about 32 years), within which the \
                 simulator's clock keeps latencies to a microsecond",
                r.arrival,
                r.arrival - t0
            ),
        ));
    }
    let mut out: Vec<Request> = out.into_iter().map(|(_, r)| r).collect();
    out.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    for r in &mut out {
        r.arrival -= t0;
    }
    Ok(out)
}

/// The longest span of a trace's arrivals, seconds. The simulator's clock is f64 seconds from
/// the first arrival: at 10^9 s its resolution is 1.2e-7 s, so latencies keep their
/// microseconds; arrivals 10^15 s apart (resolution 0.125 s) gave a time to first token of 0.
pub const MAX_TRACE_SPAN_S: f64 = 1e9;
