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

/// Run `perfcast ARGS...` (a `--format json` command) and return its output as Python
/// objects, built while the JSON is read (keys in the command's order).
#[pyfunction]
fn run_json(py: Python<'_>, args: Vec<String>) -> PyResult<PyObject> {
    let text = py
        .allow_threads(|| perfcast_cli::run_captured(&args))
        .map_err(raise)?;
    from_json(py, &text)
}

/// The Python objects of a JSON text (`json.loads`, without a second pass over the text in
/// Python: this is most of a small command's time seen from Python).
fn from_json(py: Python<'_>, text: &str) -> PyResult<PyObject> {
    use serde::de::DeserializeSeed as _;
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Objects(py)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not JSON: {e}")))?;
    Ok(v)
}

/// Deserialises into Python objects: objects to `dict`, arrays to `list`, integers to `int`,
/// other numbers to `float`, `null` to `None`.
#[derive(Clone, Copy)]
struct Objects<'py>(Python<'py>);

impl<'de> serde::de::DeserializeSeed<'de> for Objects<'_> {
    type Value = PyObject;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<PyObject, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Objects<'_> {
    type Value = PyObject;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<PyObject, E> {
        obj(self.0, v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PyObject, E> {
        obj(self.0, v)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PyObject, E> {
        obj(self.0, v)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<PyObject, E> {
        obj(self.0, v)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PyObject, E> {
        obj(self.0, v)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<PyObject, E> {
        Ok(self.0.None())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<PyObject, A::Error> {
        let list = pyo3::types::PyList::empty(self.0);
        while let Some(v) = seq.next_element_seed(self)? {
            list.append(v).map_err(py_err)?;
        }
        Ok(list.into_any().unbind())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<PyObject, A::Error> {
        let dict = pyo3::types::PyDict::new(self.0);
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let v = map.next_value_seed(self)?;
            dict.set_item(k.as_ref(), v).map_err(py_err)?;
        }
        Ok(dict.into_any().unbind())
    }
}

fn obj<'py, T, E>(py: Python<'py>, v: T) -> Result<PyObject, E>
where
    T: pyo3::IntoPyObject<'py>,
    E: serde::de::Error,
{
    use pyo3::BoundObject as _;
    v.into_pyobject(py)
        .map(|b| b.into_any().unbind())
        .map_err(|e| py_err(e.into()))
}

fn py_err<E: serde::de::Error>(e: PyErr) -> E {
    E::custom(e)
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

    /// [`Loaded::run`] of a `--format json` command, as Python objects ([`run_json`]).
    fn run_json(&self, py: Python<'_>, args: Vec<String>) -> PyResult<PyObject> {
        let text = py
            .allow_threads(|| self.0.run_captured(&args))
            .map_err(raise)?;
        from_json(py, &text)
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
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(set_plugin_host, m)?)?;
    m.add_class::<Loaded>()?;
    m.add("Failure", m.py().get_type::<Failure>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
