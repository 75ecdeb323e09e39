//! Where things are, and running commands.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The repository root (the workspace's directory), canonical.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("repository root above {}: {e}", env!("CARGO_MANIFEST_DIR")))
}

/// The cargo target directory of the running test or bench: cargo puts its executable in
/// `<target>/<profile>/deps/`. Falls back to `CARGO_TARGET_DIR`, then `<root>/target`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let deps = exe.as_deref().and_then(Path::parent);
    if let Some(deps) = deps.filter(|d| d.file_name() == Some(OsStr::new("deps"))) {
        if let Some(target) = deps.parent().and_then(Path::parent) {
            return target.to_path_buf();
        }
    }
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

/// A new, empty directory `<prefix>-<pid>-<n>` under `<target>/tmp` (where cargo's
/// `CARGO_TARGET_TMPDIR` points), so that parallel tests and processes never share one.
pub fn tmpdir(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = target_dir().join("tmp").join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    if d.exists() {
        std::fs::remove_dir_all(&d).unwrap_or_else(|e| panic!("remove {}: {e}", d.display()));
    }
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    d
}

/// What a command printed, and its exit code.
pub struct Out {
    /// Exit code, -1 if the process was killed by a signal.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Run `cmd` and collect its exit code, stdout and stderr (lossy UTF-8).
pub fn output(cmd: &mut Command) -> Out {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Run `cmd`; panic with its stderr unless it succeeds.
pub fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `bin args` in `dir`, without any `PERFCAST_*` variable of the test's own environment (the
/// configuration loader reads those as config keys, so a developer's shell must not change
/// what a test sees).
pub fn command(bin: impl AsRef<OsStr>, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PERFCAST_") {
            cmd.env_remove(k);
        }
    }
    cmd
}
