//! `perfcast._native`: the Python package's way into perfcast. `run(args)` runs a `perfcast`
//! command in this process ([`perfcast_cli::run_captured`]) with the GIL released and returns
//! what the command line would print; `load(args)` loads a configuration once and its
//! `Loaded.run(args)` runs commands on it ([`perfcast_cli::Loaded`]); `main(args)` runs the
//! command line as the binary would (`python -m perfcast`, and the plugin host of isolated
//! libraries, `python -m perfcast._plugin_host`); a failure raises
//! `_native.Failure(kind, message, output)`, which the Python layer (`python/perfcast/`)
//! turns into its exception classes. Everything else (configurations as dicts or TOML text,
//! keyword overrides, results as objects) is Python, in `python/perfcast/__init__.py`.

use perfcast_cli::FailureKind;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    Failure,
    PyException,
    "A perfcast command that failed: (kind, message, output)."
);

/// The name the Python layer maps to an exception class.
fn kind_name(k: FailureKind) -> &'static str {
    match k {
        FailureKind::Usage => "usage",
        FailureKind::Config => "config",
        FailureKind::Plugin => "plugin",
        FailureKind::Validation => "validation",
        FailureKind::Infeasible => "infeasible",
        FailureKind::Other => "other",
        FailureKind::Internal => "internal",
    }
}

/// Run `perfcast ARGS...` in process and return its standard output.
#[pyfunction]
fn run(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| perfcast_cli::run_captured(&args))
        .map_err(raise)
}

fn raise(f: perfcast_cli::Failure) -> PyErr {
    Failure::new_err((kind_name(f.kind), f.message, f.output))
}

/// A configuration loaded once ([`perfcast_cli::Loaded`]): the Python `Scenario`.
#[pyclass(frozen)]
struct Loaded(perfcast_cli::Loaded);

#[pymethods]
impl Loaded {
    /// Run a command on this configuration (its configuration argument is a placeholder).
    fn run(&self, py: Python<'_>, args: Vec<String>) -> PyResult<String> {
        py.allow_threads(|| self.0.run_captured(&args))
            .map_err(raise)
    }
}

/// Load `CONFIG... [--set KEY=VALUE]... [--load PATH [--sha256 HEX]]...` once.
#[pyfunction]
fn load(py: Python<'_>, args: Vec<String>) -> PyResult<Loaded> {
    py.allow_threads(|| perfcast_cli::load(&args))
        .map(Loaded)
        .map_err(raise)
}

/// Run the `perfcast` command line `ARGS` (program name first) as the binary does, output
/// on this process's standard output and error; the exit code (`python -m perfcast`).
#[pyfunction]
fn main(py: Python<'_>, args: Vec<String>) -> u8 {
    py.allow_threads(|| perfcast_cli::main_with(args))
}

/// Run isolated plugin libraries as `PROGRAM ARGS... PATH` (the interpreter running
/// `-m perfcast._plugin_host`: this process's executable is Python, not perfcast).
#[pyfunction]
fn set_plugin_host(program: std::path::PathBuf, args: Vec<String>) -> bool {
    perfcast_cli::set_plugin_host(program, args)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(set_plugin_host, m)?)?;
    m.add_class::<Loaded>()?;
    m.add("Failure", m.py().get_type::<Failure>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
