//! The child: `perfcast plugin-host PATH` loads the library in this process and answers the
//! host's calls on stdin/stdout.

use super::protocol::{Answer, Built, Call, Request, Response, WireComponent, WireError, WireTier};
use super::PROTOCOL;
use crate::LoadedLibrary;
use perfcast_abi::c::PcScheduleProperties;
use perfcast_abi::codes;
use perfcast_abi::strategy::{axis_code, PcAxisDecl};
use perfcast_core::{Category, Component, DType, Engine, ModelError, Registry};
use std::io::{BufRead, Write};
use std::path::Path;

/// The host's request lines, read by a thread of their own: when stdin closes (the host has
/// exited, or was killed: its end of the pipe closes with it) that thread ends the process,
/// even while a plugin call runs forever on the serving thread, so a plugin host never
/// outlives its host.
fn requests() -> impl Iterator<Item = String> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(l) = line else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
        std::process::exit(0);
    });
    rx.into_iter()
}

/// Ask the kernel to kill this process when its host dies (Linux: `PR_SET_PDEATHSIG`; the
/// host spawns from a thread that lives as long as it does, see `super::spawn`), and exit at
/// once if the host died before the request took effect (the parent is no longer the
/// process id the host passed in `PERFCAST_HOST_PID`). Elsewhere the stdin watchdog alone
/// ends an orphaned host.
fn die_with_host() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(PR_SET_PDEATHSIG, signal) reads no memory of ours; getppid cannot fail.
        let (set, parent) = unsafe {
            (
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong),
                libc::getppid(),
            )
        };
        let host = std::env::var(super::HOST_PID_ENV)
            .ok()
            .and_then(|v| v.parse::<libc::pid_t>().ok());
        if set == 0 && host.is_some_and(|h| h != parent) {
            std::process::exit(0);
        }
    }
}

/// Serve the library at `path` on stdin/stdout until stdin closes; `sha256`, the host's pin,
/// is checked again here on the file this process opens and loads. Returns only an error
/// that prevents serving (the library itself does not load: reported to the host in the
/// hello's answer first).
pub fn serve(path: &Path, sha256: Option<&str>) -> Result<(), String> {
    die_with_host();
    crate::crash::quiet();
    // The request reader (and so the watchdog on stdin) starts before the library loads: a
    // library whose constructor never returns must not keep this process alive either.
    let requests = requests();
    let mut registry = Registry::new();
    let loaded = crate::load_library(path, sha256, &mut registry);
    let mut out = std::io::stdout().lock();
    let mut handles: Vec<Component> = Vec::new();
    for line in requests {
        let req: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => return Err(format!("bad request: {e}")),
        };
        let result = match &loaded {
            Err(e) => Err(failed(e.to_string())),
            Ok(lib) => answer(&registry, lib, &mut handles, req.call),
        };
        let resp = match result {
            Ok(a) => Response {
                id: req.id,
                ok: Some(a),
                err: None,
            },
            Err(e) => Response {
                id: req.id,
                ok: None,
                err: Some(e),
            },
        };
        let text = serde_json::to_string(&resp).unwrap_or_else(|e| {
            format!(
                r#"{{"id":{},"err":{{"code":2,"path":"","message":"{e}"}}}}"#,
                req.id
            )
        });
        writeln!(out, "{text}")
            .and_then(|_| out.flush())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

pub(crate) fn failed(message: String) -> WireError {
    WireError {
        code: codes::ERR_FAILED,
        path: String::new(),
        message,
    }
}

fn answer(
    registry: &Registry,
    lib: &LoadedLibrary,
    handles: &mut Vec<Component>,
    call: Call,
) -> Result<Answer, WireError> {
    match call {
        Call::Hello { protocol } => hello(registry, lib, &protocol),
        Call::Build {
            category,
            name,
            params,
        } => build(registry, handles, category, &name, &params),
        other => answer_categories(handles, other),
    }
}

/// The calls of the components, each answered by its category's module.
fn answer_categories(handles: &[Component], call: Call) -> Result<Answer, WireError> {
    let call = match crate::hardware::isolate::answer(handles, call)? {
        Ok(answer) => return Ok(answer),
        Err(other) => other,
    };
    let call = match crate::execution::isolate::answer(handles, call)? {
        Ok(answer) => return Ok(answer),
        Err(other) => other,
    };
    let call = match crate::strategy::isolate::answer(handles, call)? {
        Ok(answer) => return Ok(answer),
        Err(other) => other,
    };
    crate::topology::isolate::answer(handles, call)
}

/// A strategy's error, as the wire carries it (the plugin's own message; the host puts it
/// under the component's name).
pub(crate) fn model_failed(e: ModelError) -> WireError {
    match e {
        ModelError::Plugin(perfcast_core::PluginError::Failed { message, .. }) => failed(message),
        other => failed(other.to_string()),
    }
}

/// The child's greeting: its protocol, its library and the components it serves.
fn hello(registry: &Registry, lib: &LoadedLibrary, protocol: &str) -> Result<Answer, WireError> {
    if protocol != PROTOCOL {
        return Err(failed(format!(
            "this plugin host speaks {PROTOCOL}, not {protocol}"
        )));
    }
    let components = lib
        .components
        .iter()
        .filter_map(|(c, n)| {
            let info = registry.info(*c, n)?;
            Some(WireComponent {
                category: *c,
                name: n.clone(),
                description: info.description.clone(),
                params: info.params.clone(),
            })
        })
        .collect();
    Ok(Answer::Hello {
        protocol: PROTOCOL.into(),
        plugin: lib.plugin.clone(),
        version: lib.version.clone(),
        abi: lib.abi.clone(),
        components,
    })
}

/// Build component `name` of `category` from `params`, keep it under the next handle and
/// answer with what the host's proxy needs of it.
fn build(
    registry: &Registry,
    handles: &mut Vec<Component>,
    category: Category,
    name: &str,
    params: &serde_json::Value,
) -> Result<Answer, WireError> {
    let c = registry
        .build(category, name, params)
        .map_err(|e| match e {
            perfcast_core::registry::RegistryError::Build {
                source: perfcast_core::PluginError::Params { path, message },
                ..
            } => WireError {
                code: codes::ERR_PARAMS,
                path,
                message,
            },
            other => failed(other.to_string()),
        })?;
    let built = match &c {
        Component::ComputeUnit(u) => {
            let mut peaks = Vec::new();
            for e in [Engine::Matrix, Engine::Vector] {
                for d in DType::ALL {
                    if let Some(p) = u.peak(e, d) {
                        peaks.push((codes::engine_code(e), d.code(), p.0));
                    }
                }
            }
            Built::Compute {
                peaks,
                launch_overhead: u.launch_overhead().0,
                gemm_tile: u.gemm_tile(),
            }
        }
        Component::MemoryTier(t) => Built::Tier(WireTier {
            level: codes::tier_level_code(t.level()),
            capacity: t.capacity().0,
            bandwidth: t.bandwidth().0,
            efficiency: t.efficiency(),
            latency: t.latency().0,
        }),
        Component::Interconnect(l) => Built::Link {
            domain_size: l.domain_size(),
            bandwidth: l.bandwidth().0,
            latency: l.latency().0,
        },
        Component::ParallelStrategy(s) => Built::Strategy {
            axis: axis_code(s.axis()),
            axes: s
                .axes()
                .iter()
                .map(PcAxisDecl::from_native)
                .collect::<Result<_, _>>()
                .map_err(failed)?,
        },
        Component::PipelineSchedule(s) => Built::Schedule {
            properties: PcScheduleProperties {
                model_copies: s.model_copies(),
                overlaps_expert_comm: s.overlaps_expert_comm() as u32,
                ..Default::default()
            },
        },
        Component::RecomputePolicy(_) => Built::Recompute,
        Component::Topology(_) => Built::Topology,
    };
    handles.push(c);
    Ok(Answer::Built {
        handle: handles.len() - 1,
        built,
    })
}
