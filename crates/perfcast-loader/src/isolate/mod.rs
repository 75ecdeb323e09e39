//! Plugin isolation: a library loaded in a child process (`perfcast plugin-host PATH`) that
//! answers the host's calls over its stdin/stdout, so that a plugin that crashes, hangs,
//! exits or writes garbage takes down only the child. The host side registers proxies whose
//! answers go through the same checks as an in-process library's (each category's adapter),
//! with a time limit per call and a cache of answers (the engine asks the same questions
//! again and again: a search's layer shapes repeat).
//!
//! The protocol (`perfcast-plugin-host/4`), modelled on nushell's plugin protocol (a
//! versioned hello, then calls and answers matched by id, one JSON document per line):
//!
//! ```text
//! host  -> {"id":0,"call":{"hello":{"protocol":"perfcast-plugin-host/4"}}}
//! child <- {"id":0,"ok":{"hello":{"protocol":"perfcast-plugin-host/4","plugin":..,"version":..,
//!           "abi":..,"components":[{"category":..,"name":..,"description":..,"params":..}]}}}
//! host  -> {"id":1,"call":{"build":{"category":"compute_unit","name":"acme/npu9","params":{..}}}}
//! child <- {"id":1,"ok":{"built":{"handle":0,"compute":{"peaks":[..],"launch_overhead":..,"gemm_tile":..}}}}
//! host  -> {"id":2,"call":{"op_time":{"handle":0,"op":{..},"tiers":[..]}}}
//! child <- {"id":2,"ok":{"op_time":{..}}}        or  {"id":2,"err":{"code":2,"path":"","message":".."}}
//! host  -> {"id":3,"call":{"comms":{"handle":1,"plan":{..},"dims":{..},"capacity":32}}}
//! child <- {"id":3,"ok":{"comms":[{..},..]}}
//! ```
//!
//! Every category is served: compute units, memory tiers and interconnects (their constant
//! properties sent once with the build), parallel strategies, pipeline schedules, recompute
//! policies and topologies (each category's `isolate` module, on the `Proxy` of `proxies`:
//! their calls carry the ABIs' data as JSON, and their answers go through the same checked
//! adapters as an in-process library's).
//!
//! A different protocol string in the hello is refused by both sides. Calls are answered in
//! order; the child serves one at a time.

use crate::call::CallError;
use crate::execution::{ForeignRecompute, ForeignSchedule};
use crate::hardware::isolate::{IsoCompute, IsoLink};
use crate::hardware::{foreign_memory_tier, ForeignComputeUnit, ForeignInterconnect};
use crate::strategy::ForeignStrategy;
use crate::topology::ForeignTopology;
use crate::{Candidate, LoadError, LoadedLibrary};
use perfcast_abi::codes;
use perfcast_abi::LinkProps;
use perfcast_core::{Category, Component};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The protocol both sides must speak (2: the execution categories and topologies; 3: a
/// schedule's properties in its `built` answer).
pub const PROTOCOL: &str = "perfcast-plugin-host/4";

/// The default time limit of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to start the child: the executable and the arguments before the library path
/// (`perfcast plugin-host`), and the time limit of a call.
#[derive(Debug, Clone)]
pub struct IsolateOptions {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
}

pub(crate) mod child;
pub(crate) mod protocol;
pub(crate) mod proxies;
use crate::execution::isolate::{IsoRecompute, IsoSchedule};
use crate::strategy::isolate::IsoStrategy;
use crate::topology::isolate::IsoTopology;
pub use child::serve;
use protocol::{Answer, Built, Call, Request, Response};
use proxies::Proxy;

// ---------------------------------------------------------------------------------------
// The host: a connection to one child, and proxies for its components.
// ---------------------------------------------------------------------------------------

struct Inner {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
    /// Why the child can no longer answer, once it cannot.
    dead: Option<String>,
}

/// A running plugin host.
struct Connection {
    /// `plugin NAME (isolated, PATH)`, for messages.
    label: String,
    timeout: Duration,
    inner: Mutex<Inner>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Ok(mut i) = self.inner.lock() {
            let _ = i.child.kill();
            let _ = i.child.wait();
        }
    }
}

impl Connection {
    /// Send `call` and wait for its answer (at most `timeout`); a crash, a hang, an exit or a
    /// garbage line ends the connection with an error naming the plugin and the call.
    fn call(&self, what: &str, call: Call) -> Result<Answer, CallError> {
        let mut i = self
            .inner
            .lock()
            .map_err(|_| self.fail("the connection is poisoned".into()))?;
        if let Some(d) = &i.dead {
            return Err(self.fail(d.clone()));
        }
        let id = i.next_id;
        i.next_id += 1;
        let text = serde_json::to_string(&Request { id, call })
            .map_err(|e| self.fail(format!("cannot encode `{what}`: {e}")))?;
        let sent = writeln!(i.stdin, "{text}").and_then(|_| i.stdin.flush());
        let line = match sent {
            Err(_) => Err(RecvTimeoutError::Disconnected),
            Ok(()) => i.lines.recv_timeout(self.timeout),
        };
        let why = match line {
            Ok(line) => match serde_json::from_str::<Response>(&line) {
                Ok(r) if r.id == id => {
                    return match (r.ok, r.err) {
                        (Some(a), _) => Ok(a),
                        (None, Some(e)) => Err(CallError {
                            code: e.code,
                            path: e.path,
                            message: e.message,
                        }),
                        (None, None) => Err(self.fail(format!("an empty answer to `{what}`"))),
                    };
                }
                _ => format!(
                    "answered `{what}` with garbage: `{}`",
                    line.chars().take(80).collect::<String>()
                ),
            },
            Err(RecvTimeoutError::Timeout) => format!(
                "did not answer `{what}` within {} s; the plugin process was stopped",
                self.timeout.as_secs_f64()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                let status = i.child.wait().map(exit_text).unwrap_or_default();
                format!("the plugin process {status} during `{what}`")
            }
        };
        let _ = i.child.kill();
        let _ = i.child.wait();
        i.dead = Some(why.clone());
        Err(self.fail(why))
    }

    fn fail(&self, message: String) -> CallError {
        CallError {
            code: codes::ERR_FAILED,
            path: String::new(),
            message: format!("{}: {message}", self.label),
        }
    }
}

/// How a child process ended, in words.
fn exit_text(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                11 => " (SIGSEGV, a segmentation fault)",
                6 => " (SIGABRT, an abort)",
                9 => " (SIGKILL)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(c) => format!("exited with status {c}"),
        None => "ended".into(),
    }
}

/// The factory of component `name` of `category` on `conn`.
fn factory(
    conn: Arc<Connection>,
    category: Category,
    name: String,
) -> perfcast_core::registry::Factory {
    Arc::new(move |params| {
        let call = Call::Build {
            category,
            name: name.clone(),
            params: if params.is_null() {
                serde_json::json!({})
            } else {
                params.clone()
            },
        };
        let (handle, built) = match conn.call("build", call) {
            Ok(Answer::Built { handle, built }) => (handle, built),
            Ok(_) => {
                return Err(conn
                    .fail("answered `build` with another kind of answer".into())
                    .into_plugin_error(&name))
            }
            Err(e) => return Err(e.into_plugin_error(&name)),
        };
        match built {
            Built::Compute {
                peaks,
                launch_overhead,
                gemm_tile,
            } => {
                let proxy = Proxy::new(&conn, handle);
                let backend = IsoCompute::new(proxy, peaks, launch_overhead, gemm_tile);
                let unit = ForeignComputeUnit::new(&name, Box::new(backend))?;
                Ok(Component::ComputeUnit(Arc::new(unit)))
            }
            Built::Tier(t) => {
                let tier = foreign_memory_tier(&name, Ok(t.into()), Box::new(conn.clone()))?;
                Ok(Component::MemoryTier(Arc::new(tier)))
            }
            Built::Link {
                domain_size,
                bandwidth,
                latency,
            } => {
                let props = LinkProps {
                    domain_size,
                    bandwidth,
                    latency,
                };
                let backend = IsoLink(Proxy::new(&conn, handle));
                let link = ForeignInterconnect::new(&name, Ok(props), Box::new(backend))?;
                Ok(Component::Interconnect(Arc::new(link)))
            }
            Built::Strategy { axis, axes } => {
                let backend = IsoStrategy::new(Proxy::new(&conn, handle), axis, axes);
                let s = ForeignStrategy::new(&name, Box::new(backend))?;
                Ok(Component::ParallelStrategy(Arc::new(s)))
            }
            Built::Schedule { properties } => {
                let backend = IsoSchedule(Proxy::new(&conn, handle), properties);
                let s = ForeignSchedule::new(&name, Box::new(backend))?;
                Ok(Component::PipelineSchedule(Arc::new(s)))
            }
            Built::Recompute => {
                let backend = IsoRecompute(Proxy::new(&conn, handle));
                let p = ForeignRecompute::new(&name, Box::new(backend));
                Ok(Component::RecomputePolicy(Arc::new(p)))
            }
            Built::Topology => {
                let backend = IsoTopology(Proxy::new(&conn, handle));
                let t = ForeignTopology::new(&name, Box::new(backend));
                Ok(Component::Topology(Arc::new(t)))
            }
        }
    })
}

/// The environment variables a plugin host inherits: where programs and shared libraries
/// are found, the home and temporary directories, and the locale.
pub const CHILD_ENV: [&str; 7] = [
    "PATH",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "SYSTEMROOT",
];

/// The variable through which a plugin host learns its host's process id, to know whether
/// the host died before the host's death could signal it (see `child::die_with_host`).
const HOST_PID_ENV: &str = "PERFCAST_HOST_PID";

/// Spawn `cmd` in a process group of its own (the terminal's Ctrl-C goes to perfcast, which
/// decides the child's fate) from the one long-lived thread that spawns every plugin host.
/// A parent-death signal fires when the *thread* that forked the child exits, so a host
/// spawned from a short-lived thread (a rayon worker, a test's thread) would be killed while
/// perfcast still uses it; this thread lives as long as the process.
fn spawn(mut cmd: Command) -> std::io::Result<Child> {
    type Job = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("perfcast-plugin-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .ok();
        Mutex::new(tx)
    });
    let (reply, answer) = std::sync::mpsc::channel();
    let no_thread = || std::io::Error::other("the plugin spawner thread is not running");
    spawner
        .lock()
        .map_err(|_| no_thread())?
        .send((cmd, reply))
        .map_err(|_| no_thread())?;
    answer.recv().map_err(|_| no_thread())?
}

/// Start a plugin host for the library at `path` (checked, and its sha256 pin, here first),
/// shake hands and return what it provides as registry candidates.
pub(crate) fn load(
    path: &Path,
    sha256: Option<&str>,
    opts: &IsolateOptions,
) -> Result<(LoadedLibrary, Vec<Candidate>), LoadError> {
    let init = |message: String| LoadError::Init {
        path: path.to_path_buf(),
        message,
    };
    let mut cmd = Command::new(&opts.program);
    cmd.args(&opts.args);
    if let Some(pin) = sha256 {
        cmd.args(["--sha256", pin]);
    }
    // The child gets only what a dynamic library needs to load and run, not perfcast's
    // environment (isolation is not a sandbox: it runs as the same user, see docs/commands/plugins.md).
    cmd.env_clear();
    for k in CHILD_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.env(HOST_PID_ENV, std::process::id().to_string());
    cmd.arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = spawn(cmd).map_err(|e| {
        init(format!(
            "cannot start the plugin host {}: {e}",
            opts.program.display()
        ))
    })?;
    let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
        (Some(i), Some(o)) => (i, o),
        _ => return Err(init("the plugin host has no pipes".into())),
    };
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    let conn = Arc::new(Connection {
        label: format!("plugin {} (isolated)", path.display()),
        timeout: opts.timeout,
        inner: Mutex::new(Inner {
            child,
            stdin,
            lines,
            next_id: 0,
            dead: None,
        }),
    });
    let hello = conn
        .call(
            "hello",
            Call::Hello {
                protocol: PROTOCOL.into(),
            },
        )
        .map_err(|e| init(e.message))?;
    let Answer::Hello {
        protocol,
        plugin,
        version,
        abi,
        components,
    } = hello
    else {
        return Err(init(
            "the plugin host answered the hello with something else".into(),
        ));
    };
    if protocol != PROTOCOL {
        return Err(init(format!(
            "the plugin host speaks {protocol}, this host {PROTOCOL}"
        )));
    }
    let loaded = LoadedLibrary {
        path: path.to_path_buf(),
        plugin,
        version,
        abi: format!("{abi}, isolated"),
        components: Vec::new(),
    };
    let candidates = components
        .into_iter()
        .map(|c| Candidate {
            category: c.category,
            factory: factory(conn.clone(), c.category, c.name.clone()),
            name: c.name,
            description: c.description,
            params: c.params,
        })
        .collect();
    Ok((loaded, candidates))
}
