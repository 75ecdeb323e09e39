//! perfcast-loader: load dynamic plugins (Rust/abi_stable or C) into the one [`Registry`].
//!
//! ```ignore
//! let mut registry = perfcast_builtins::registry()?;
//! let lib = perfcast_loader::load_library(Path::new("libacme_npu.so"), None, &mut registry)?;
//! let npu = registry.compute_unit("acme/npu9", &params)?; // an Arc<dyn ComputeUnit>
//! ```
//!
//! What [`load_library`] does, in order:
//! 1. checks the file exists and is readable, and its sha256 when a pin is given (before any
//!    of its code runs);
//! 2. dlopens it (`RTLD_LOCAL`) and picks the ABI by symbol: `perfcast_plugin_entry_v1` is a
//!    C plugin, abi_stable's root-module symbol a Rust plugin, `perfcast_plugin_entry_v<N>`
//!    a C plugin for another major; anything else is "not a perfcast plugin";
//! 3. checks the ABI version and layout (Rust: abi_stable's version + layout check, loaded per
//!    file with `lib_header_from_path(..).init_root_module()`; C: entry symbol major,
//!    `abi_major`, `struct_size` of every struct);
//! 4. registers every component under `Origin::Library(path)`, all or nothing (a name
//!    already taken is an error naming both origins).
//!
//! Libraries are never unloaded. Foreign objects become native `Arc<dyn ComputeUnit>` /
//! `Arc<dyn MemoryTier>` / `Arc<dyn Interconnect>`; every value they return is checked
//! (see each category's module: `hardware`, `strategy`, `execution`, `topology`), a panic inside a Rust plugin comes back as `PluginError::Failed`.

mod c_plugin;
mod call;
mod crash;
mod execution;
mod hardware;
pub mod isolate;
mod rust_plugin;
mod strategy;
mod topology;

use perfcast_abi::c::{PcEntry, C_ABI_MAJOR, C_ENTRY_SYMBOL};
use perfcast_abi::rust_abi::RUST_ROOT_SYMBOL;
use perfcast_core::registry::{Factory, RegistryError};
use perfcast_core::{Category, Origin, PluginInfo, Registry};
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::{Read, Seek as _};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A library loaded into a registry.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedLibrary {
    pub path: PathBuf,
    /// The plugin's own name (e.g. `acme`).
    pub plugin: String,
    /// The plugin's own version.
    pub version: String,
    /// ABI and version it was built against, e.g. `rust-abi_stable 1.4` or `c 1.7`.
    pub abi: String,
    /// What it registered.
    pub components: Vec<(Category, String)>,
}

/// Why a library was not loaded. `Display` is short (one line) and names the file; the full
/// text of a layout mismatch is in [`LoadError::details`].
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("plugin {}: file does not exist", .path.display())]
    NotFound { path: PathBuf },
    #[error("plugin {}: cannot read the file: {reason}", .path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("plugin {}: sha256 pin `{pin}` is not 64 hexadecimal digits", .path.display())]
    InvalidPin { path: PathBuf, pin: String },
    #[error("plugin {}: sha256 mismatch: pinned {expected}, file has {actual}; not loaded", .path.display())]
    Sha256Mismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{} is not a perfcast plugin: {reason}", .path.display())]
    NotAPlugin { path: PathBuf, reason: String },
    #[error("plugin {}: built for {found}, this host expects {expected}{}", .path.display(), Summary(.summary))]
    IncompatibleAbi {
        path: PathBuf,
        found: String,
        expected: String,
        /// One line summarising a layout mismatch.
        summary: Option<String>,
        /// The full layout report (hundreds of lines), not shown by `Display`.
        details: Option<String>,
    },
    #[error("plugin {}: invalid descriptor: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("plugin {}: initialisation failed: {message}", .path.display())]
    Init { path: PathBuf, message: String },
    #[error("plugin {}: {source}", .path.display())]
    Registry {
        path: PathBuf,
        source: RegistryError,
    },
}

struct Summary<'a>(&'a Option<String>);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(s) => write!(f, " ({s})"),
            None => Ok(()),
        }
    }
}

impl LoadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::NotFound { path }
            | LoadError::Unreadable { path, .. }
            | LoadError::InvalidPin { path, .. }
            | LoadError::Sha256Mismatch { path, .. }
            | LoadError::NotAPlugin { path, .. }
            | LoadError::IncompatibleAbi { path, .. }
            | LoadError::Invalid { path, .. }
            | LoadError::Init { path, .. }
            | LoadError::Registry { path, .. } => path,
        }
    }

    /// The full diagnostic behind a short message, when there is one (abi_stable's layout
    /// report for a layout mismatch). For a log file, not for the terminal.
    pub fn details(&self) -> Option<&str> {
        match self {
            LoadError::IncompatibleAbi { details, .. } => details.as_deref(),
            _ => None,
        }
    }
}

/// A component found in a library, not yet registered.
pub(crate) struct Candidate {
    pub category: Category,
    pub name: String,
    pub description: String,
    pub factory: Factory,
    /// The parameters the library declares for it (`None`: not declared).
    pub params: Option<Vec<perfcast_core::ParamSpec>>,
}

/// Parameters as the JSON text a plugin receives (`null` becomes `{}`).
pub(crate) fn params_json(params: &serde_json::Value) -> String {
    if params.is_null() {
        "{}".to_string()
    } else {
        params.to_string()
    }
}

/// The lowercase hex sha256 of a file.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    sha256_of(&mut std::fs::File::open(path)?)
}

/// The lowercase hex sha256 of what is left to read of `f`.
fn sha256_of(f: &mut std::fs::File) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether an ELF file holds everything its headers say it does: the program and section
/// header tables, and every segment's bytes. A file that is not ELF passes (the dynamic
/// loader judges it).
fn elf_fits(file: &mut std::fs::File, len: u64) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut h = [0u8; 64];
    let n = file.read(&mut h).map_err(|e| e.to_string())?;
    if n < 16 || &h[..4] != b"\x7fELF" {
        return Ok(());
    }
    let wide = h[4] == 2;
    let little = h[5] != 2;
    let need = if wide { 64 } else { 52 };
    if n < need {
        return Err(format!(
            "the file is truncated: {len} bytes, less than its ELF header"
        ));
    }
    let u = |b: &[u8]| -> u64 {
        let mut v = 0u64;
        for (i, x) in b.iter().enumerate() {
            let shift = if little { 8 * i } else { 8 * (b.len() - 1 - i) };
            v |= (*x as u64) << shift;
        }
        v
    };
    let (phoff, shoff, phentsize, phnum, shentsize, shnum) = if wide {
        (
            u(&h[32..40]),
            u(&h[40..48]),
            u(&h[54..56]),
            u(&h[56..58]),
            u(&h[58..60]),
            u(&h[60..62]),
        )
    } else {
        (
            u(&h[28..32]),
            u(&h[32..36]),
            u(&h[42..44]),
            u(&h[44..46]),
            u(&h[46..48]),
            u(&h[48..50]),
        )
    };
    let truncated = |end: u64, what: &str| {
        format!("the file is truncated: its {what} ends at byte {end}, the file has {len}")
    };
    let ph_end = phoff.saturating_add(phentsize.saturating_mul(phnum));
    if ph_end > len {
        return Err(truncated(ph_end, "program header table"));
    }
    let sh_end = shoff.saturating_add(shentsize.saturating_mul(shnum));
    if shnum > 0 && sh_end > len {
        return Err(truncated(sh_end, "section header table"));
    }
    let mut ph = vec![0u8; (phentsize.saturating_mul(phnum)).min(1 << 20) as usize];
    file.seek(SeekFrom::Start(phoff))
        .and_then(|_| file.read_exact(&mut ph))
        .map_err(|e| e.to_string())?;
    for e in ph.chunks_exact(phentsize.max(1) as usize) {
        if e.len() < if wide { 56 } else { 32 } {
            break;
        }
        let (offset, filesz) = if wide {
            (u(&e[8..16]), u(&e[32..40]))
        } else {
            (u(&e[4..8]), u(&e[16..20]))
        };
        let end = offset.saturating_add(filesz);
        if end > len {
            return Err(truncated(end, "a loadable segment"));
        }
    }
    Ok(())
}

/// Check the file at `path` (it exists, is no directory, its ELF headers fit, its sha256 is
/// the pin) and return it open: what is loaded is this open file ([`Opened::dlopen_path`]),
/// so a file swapped at `path` after the check is not the one loaded.
fn check_file(path: &Path, sha256: Option<&str>) -> Result<Opened, LoadError> {
    let p = path.to_path_buf();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::NotFound { path: p })
        }
        Err(e) => {
            return Err(LoadError::Unreadable {
                path: p,
                reason: e.to_string(),
            })
        }
    };
    if meta.is_dir() {
        return Err(LoadError::Unreadable {
            path: p,
            reason: "it is a directory".into(),
        });
    }
    // A FIFO would block the open until a writer comes, a device would read forever.
    if !meta.is_file() {
        return Err(LoadError::Unreadable {
            path: p,
            reason: "not a regular file (a library is a file on disk)".into(),
        });
    }
    let mut file = std::fs::File::open(path).map_err(|e| LoadError::Unreadable {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    // A truncated library would be mapped past its end and fault (SIGBUS) when the loader
    // touches the missing pages: refuse one whose headers describe more than the file holds.
    if let Err(reason) = elf_fits(&mut file, meta.len()) {
        return Err(LoadError::NotAPlugin { path: p, reason });
    }
    if let Some(pin) = sha256 {
        let want = pin
            .trim()
            .trim_start_matches("sha256:")
            .to_ascii_lowercase();
        if want.len() != 64 || !want.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(LoadError::InvalidPin {
                path: p,
                pin: pin.to_string(),
            });
        }
        let actual = file
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| sha256_of(&mut file))
            .map_err(|e| LoadError::Unreadable {
                path: p.clone(),
                reason: e.to_string(),
            })?;
        if actual != want {
            return Err(LoadError::Sha256Mismatch {
                path: p,
                expected: want,
                actual,
            });
        }
    }
    Ok(Opened { file, path: p })
}

/// A checked library file, held open until it is loaded.
struct Opened {
    file: std::fs::File,
    path: PathBuf,
}

impl Opened {
    /// The file's path, a relative one made absolute: dlopen reads a name without a `/` as a
    /// library to look up in the system's search path, never in the working directory.
    fn by_name(&self) -> PathBuf {
        if self.path.is_relative() {
            if let Ok(cwd) = std::env::current_dir() {
                return cwd.join(&self.path);
            }
        }
        self.path.clone()
    }

    /// The path to hand dlopen: on Linux the open file itself (`/proc/self/fd/N`), elsewhere
    /// [`Opened::by_name`]. The dynamic loader knows a library by the name it was opened
    /// with, so once one is loaded through its descriptor, the descriptor must never be
    /// closed (a later library given the same number would alias it): see
    /// [`Opened::keep_open`].
    fn dlopen_path(&self) -> PathBuf {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd as _;
            let fd = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
            if fd.exists() {
                return fd;
            }
        }
        self.by_name()
    }

    /// The file's identity (device, inode), where the system has one.
    fn id(&self) -> Option<(u64, u64)> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let m = self.file.metadata().ok()?;
            Some((m.dev(), m.ino()))
        }
        #[cfg(not(unix))]
        None
    }
}

/// A library this process opened: the library, and the name the dynamic loader knows it by.
struct Kept {
    id: (u64, u64),
    lib: &'static libloading::Library,
    name: PathBuf,
}

/// Every file loaded so far, by identity. The dynamic loader knows a library by each name it
/// was opened with (`/proc/self/fd/N`), so such a descriptor is never closed (a later file
/// given the same number would alias the library), and a file loaded again is not opened
/// again under a new name: its library is taken from here, and the new descriptor, which
/// the loader never saw, is closed (a sweep loading its library at every point would
/// otherwise hold one descriptor per point).
static KEPT: std::sync::Mutex<Vec<Kept>> = std::sync::Mutex::new(Vec::new());

/// Check the library file at `path` as [`load_library`] does first (it exists, is not a
/// directory, its ELF headers fit the file, its sha256 is `sha256`), without loading it: what
/// a host runs on every library it is asked for before any of them runs code.
pub fn check_library_file(path: &Path, sha256: Option<&str>) -> Result<(), LoadError> {
    check_file(path, sha256).map(drop)
}

/// Load the plugin at `path` into `registry` (see the crate docs). `sha256`, when given, is
/// the expected lowercase-hex digest of the file (an optional `sha256:` prefix is accepted);
/// it is checked before the library is opened.
pub fn load_library(
    path: &Path,
    sha256: Option<&str>,
    registry: &mut Registry,
) -> Result<LoadedLibrary, LoadError> {
    // One load at a time: which descriptor names a file's library (the first one that loaded
    // it, kept open; see `Opened::keep_open`) must be decided by the load that created it.
    static LOADING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = LOADING.lock().unwrap_or_else(|p| p.into_inner());
    let opened = check_file(path, sha256)?;
    let display = opened.by_name();
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    let id = opened.id();
    let (lib, file) = match kept.iter().find(|k| Some(k.id) == id) {
        // Loaded before: the same library, under the name it was first opened with.
        Some(k) => (k.lib, k.name.clone()),
        None => {
            let file = opened.dlopen_path();
            // Its initialisers may crash already: the note names it from here on.
            crash::loading(&display);
            // SAFETY: loading a library runs its initialisers; the host only loads paths
            // the user named (config or --load), optionally pinned by sha256.
            let lib =
                unsafe { libloading::Library::new(&file) }.map_err(|e| LoadError::NotAPlugin {
                    path: path.to_path_buf(),
                    // The loader's message names the descriptor it was given: name the file.
                    reason: format!(
                        "cannot be loaded as a shared library ({})",
                        e.to_string()
                            .replace(&file.display().to_string(), &display.display().to_string())
                    ),
                })?;
            // Libraries are never unloaded: objects and strings they own live as long as the
            // process, and so does the descriptor that names it.
            let lib: &'static libloading::Library = Box::leak(Box::new(lib));
            std::mem::forget(opened);
            if let Some(id) = id {
                kept.push(Kept {
                    id,
                    lib,
                    name: file.clone(),
                });
            }
            (lib, file)
        }
    };
    drop(kept);
    let (mut loaded, candidates) = read_plugin(path, &display, &file, lib)?;
    register_all(path, &mut loaded, candidates, registry)?;
    Ok(loaded)
}

/// Read a loaded library's plugin (C entry point or Rust root module) into candidates:
/// `file` is the name `lib` was opened with, `display` the file's own path.
fn read_plugin(
    path: &Path,
    display: &Path,
    file: &Path,
    lib: &'static libloading::Library,
) -> Result<(LoadedLibrary, Vec<Candidate>), LoadError> {
    // SAFETY: the symbol's type is the header's `perfcast_plugin_entry_fn`.
    let c_entry = unsafe { lib.get::<PcEntry>(C_ENTRY_SYMBOL) }
        .ok()
        .map(|s| *s);
    if let Some(entry) = c_entry {
        // SAFETY: `entry` is the plugin's perfcast_plugin_entry_v1.
        return unsafe { c_plugin::load(path, entry) };
    }
    if unsafe { lib.get::<*const u8>(RUST_ROOT_SYMBOL) }.is_ok() {
        return rust_plugin::load(display, file, lib);
    }
    let other_major = (0..=16u32).filter(|m| *m != C_ABI_MAJOR).find(|m| {
        let sym = format!("perfcast_plugin_entry_v{m}\0");
        unsafe { lib.get::<*const u8>(sym.as_bytes()) }.is_ok()
    });
    Err(match other_major {
        Some(m) => LoadError::IncompatibleAbi {
            path: path.to_path_buf(),
            found: format!("C ABI {m} (exports perfcast_plugin_entry_v{m})"),
            expected: format!("C ABI {C_ABI_MAJOR}.x"),
            summary: None,
            details: None,
        },
        None => LoadError::NotAPlugin {
            path: path.to_path_buf(),
            reason: "it exports neither `perfcast_plugin_entry_v1` (C ABI) nor abi_stable's root module (Rust ABI)".into(),
        },
    })
}

/// Load the plugin at `path` into `registry` isolated: in a child process started as
/// `opts.program opts.args... PATH` (`perfcast plugin-host PATH`), which loads it and answers
/// every call over a pipe ([`isolate`]). The file and its sha256 pin are checked here first;
/// the components register as with [`load_library`], under the same origin. A crash, a hang
/// (longer than `opts.timeout`), an exit or a garbage answer of the child is an error naming
/// the plugin and the call, never the end of the host.
pub fn load_library_isolated(
    path: &Path,
    sha256: Option<&str>,
    registry: &mut Registry,
    opts: &isolate::IsolateOptions,
) -> Result<LoadedLibrary, LoadError> {
    let opened = check_file(path, sha256)?;
    // The child opens the library itself: it is handed the path, and the pin to check again
    // on the file it opens (the one it loads).
    let (mut loaded, candidates) = isolate::load(&opened.by_name(), sha256, opts)?;
    loaded.path = path.to_path_buf();
    register_all(path, &mut loaded, candidates, registry)?;
    Ok(loaded)
}

/// A dynamic plugin's component names are namespaced, `vendor/name` (so vendors cannot clash
/// with each other or with built-ins): both parts non-empty, no whitespace or control
/// characters.
fn check_name(name: &str) -> Result<(), String> {
    let ok = match name.split_once('/') {
        Some((ns, rest)) => {
            !ns.is_empty()
                && !rest.is_empty()
                && !name.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "component name `{}` must be namespaced as `vendor/name` (no spaces)",
            name.escape_debug()
        ))
    }
}

/// Register every candidate or none: names are checked and duplicates (against the registry or
/// inside the plugin) are found before anything is added.
fn register_all(
    path: &Path,
    loaded: &mut LoadedLibrary,
    candidates: Vec<Candidate>,
    registry: &mut Registry,
) -> Result<(), LoadError> {
    let origin = Origin::Library(path.to_path_buf());
    let mut seen = std::collections::BTreeSet::new();
    for c in &candidates {
        check_name(&c.name).map_err(|message| LoadError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
        let first = registry
            .info(c.category, &c.name)
            .map(|i| i.origin.to_string())
            .or_else(|| (!seen.insert((c.category, c.name.clone()))).then(|| origin.to_string()));
        if let Some(first) = first {
            return Err(LoadError::Registry {
                path: path.to_path_buf(),
                source: RegistryError::Duplicate {
                    category: c.category,
                    name: c.name.clone(),
                    first,
                    second: origin.to_string(),
                },
            });
        }
    }
    for c in candidates {
        let info = PluginInfo {
            category: c.category,
            name: c.name.clone(),
            origin: origin.clone(),
            version: loaded.version.clone(),
            abi_version: Some(loaded.abi.clone()),
            description: c.description,
            params: c.params,
        };
        registry
            .register(info, c.factory)
            .map_err(|source| LoadError::Registry {
                path: path.to_path_buf(),
                source,
            })?;
        loaded.components.push((c.category, c.name));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced() {
        for ok in ["acme/npu9", "cvendor/lpddr", "a/b/c"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["npu9", "/npu9", "acme/", "acme/npu 9", "acme/\u{7}", ""] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn short_messages() {
        let e = LoadError::IncompatibleAbi {
            path: "/p/libx.so".into(),
            found: "Rust ABI 2.0.0".into(),
            expected: "Rust ABI 1.x".into(),
            summary: Some("mismatched type Expected: u32 Found: u64".into()),
            details: Some("line\n".repeat(900)),
        };
        let msg = e.to_string();
        assert_eq!(
            msg,
            "plugin /p/libx.so: built for Rust ABI 2.0.0, this host expects Rust ABI 1.x \
             (mismatched type Expected: u32 Found: u64)"
        );
        assert_eq!(e.details().unwrap().lines().count(), 900);
        assert_eq!(e.path(), Path::new("/p/libx.so"));
        assert_eq!(params_json(&serde_json::Value::Null), "{}");
    }

    /// The file checked against its pin is the file loaded: replacing the path after the
    /// check changes nothing (Linux: the loader opens `/proc/self/fd/N`).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_pinned_file_is_the_one_loaded() {
        let d = perfcast_testkit::tmpdir("perfcast-loader-pin");
        let p = d.join("libx.so");
        std::fs::write(&p, b"first").unwrap();
        let pin = sha256_file(&p).unwrap();
        let opened = check_file(&p, Some(&pin)).unwrap();
        let swap = d.join("swap");
        std::fs::write(&swap, b"second").unwrap();
        std::fs::rename(&swap, &p).unwrap();
        let open = opened.dlopen_path();
        assert!(open.starts_with("/proc/self/fd"), "{}", open.display());
        assert_eq!(std::fs::read(&open).unwrap(), b"first");
        assert_eq!(opened.by_name(), p);
        // A pin that does not match, or is not a digest, is refused naming the file.
        let e = check_file(&p, Some(&pin)).err().unwrap().to_string();
        assert!(
            e.contains("sha256 mismatch") && e.contains("libx.so"),
            "{e}"
        );
        let e = check_file(&p, Some("12ab")).err().unwrap().to_string();
        assert!(e.contains("not 64 hexadecimal digits"), "{e}");
    }
}
