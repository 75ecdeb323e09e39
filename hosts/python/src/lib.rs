//! `perfcast._native`: the Python package's way into perfcast. One function, `run(args)`,
//! runs a `perfcast` command in this process ([`perfcast_cli::run_captured`]) with the GIL
//! released and returns what the command line would print; a failure raises
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
        .map_err(|f| Failure::new_err((kind_name(f.kind), f.message, f.output)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add("Failure", m.py().get_type::<Failure>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
