//! Building the example plugins: the Rust cdylib crates of `plugins/examples` with the
//! workspace's own cargo, C plugins and programs with the system C compiler (`$CC`, else `cc`).
//!
//! Libraries are copied out of the target directory into the test's own directory: a test
//! loads a file no other test process rebuilds under it, and its path (which error messages
//! and origins show) is the test's.

use crate::process::{run_within, target_dir, workspace_root, BUILD_DEADLINE};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file name of the shared library of crate `krate` (`acme-npu` -> `libacme_npu.so`).
pub fn library_name(krate: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        krate.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// Build the cdylib crates `crates` of this workspace (one `cargo build`, debug profile, into
/// the running test's target directory; cargo's incremental build makes a re-run take about a
/// second) and copy each library into `dir`. Returns the copies, in the order of `crates`.
pub fn build_rust(crates: &[&str], dir: &Path) -> Vec<PathBuf> {
    let target = target_dir();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut build = Command::new(cargo);
    build
        .current_dir(workspace_root())
        .args(["build", "--quiet"]);
    for krate in crates {
        build.args(["-p", krate]);
    }
    run_within(build.arg("--target-dir").arg(&target), BUILD_DEADLINE);
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    crates
        .iter()
        .map(|krate| {
            let name = library_name(krate);
            // Cargo re-creates the uplifted `<target>/debug/lib*.so` only when it recompiles,
            // so fall back to the `deps/` copy if someone deleted it.
            let top = target.join("debug").join(&name);
            let built = if top.exists() {
                top
            } else {
                target.join("debug").join("deps").join(&name)
            };
            let copy = dir.join(&name);
            std::fs::copy(&built, &copy)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), copy.display()));
            copy
        })
        .collect()
}

/// The directory of the C plugin header (`perfcast_plugin.h`).
pub fn c_include_dir() -> PathBuf {
    workspace_root().join("crates/perfcast-abi/include")
}

/// The example C plugin's source (`plugins/examples/c-vendor/c_vendor.c`).
pub fn c_vendor_source() -> PathBuf {
    workspace_root().join("plugins/examples/c-vendor/c_vendor.c")
}

/// The example C plugin compiled for the header's current C ABI, as `dir/libc_vendor.so`.
pub fn c_vendor(dir: &Path) -> PathBuf {
    cc_shared(dir, &c_vendor_source(), "libc_vendor.so", &[])
}

/// The example C plugin compiled for C ABI 1.0 (no interconnect, no `gemm_tile`), as
/// `dir/libc_vendor_abi1_0.so`: what a library built against the first header looks like.
pub fn c_vendor_abi1_0(dir: &Path) -> PathBuf {
    cc_shared(
        dir,
        &c_vendor_source(),
        "libc_vendor_abi1_0.so",
        &["-DPERFCAST_PLUGIN_ABI_MINOR=0"],
    )
}

fn compiler() -> Command {
    Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
}

/// Compile the C source `src` into the shared library `dir/out` against the plugin header,
/// warnings as errors; `extra` flags go before the source (e.g. `-DPERFCAST_PLUGIN_ABI_MINOR=0`).
pub fn cc_shared(dir: &Path, src: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let dst = dir.join(out);
    run_within(
        compiler()
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror"])
            .args(extra)
            .arg("-I")
            .arg(c_include_dir())
            .arg(src)
            .arg("-o")
            .arg(&dst)
            .arg("-lm"),
        BUILD_DEADLINE,
    );
    dst
}

/// Compile the C program `src` into the executable `dir/out` against the plugin header.
pub fn cc_program(dir: &Path, src: &Path, out: &str) -> PathBuf {
    let dst = dir.join(out);
    run_within(
        compiler()
            .arg("-I")
            .arg(c_include_dir())
            .arg(src)
            .arg("-o")
            .arg(&dst),
        BUILD_DEADLINE,
    );
    dst
}

/// The rest of a one-component C plugin whose vtable, `vt`, is defined above it: a `create`
/// that keeps no state, the component `component` of `category` (a `PERFCAST_CATEGORY_*`
/// name), the plugin `plugin` (version 0.0.1) and the entry point. The tests' misbehaving
/// plugins are their vtable's functions and this.
pub fn c_one_component(category: &str, component: &str, plugin: &str) -> String {
    format!(
        r#"
static int32_t create(const char *json, void **out, char *err, size_t cap) {{
    (void)json; (void)err; (void)cap; *out = NULL; return PERFCAST_OK;
}}
static const perfcast_component comp = {{
    .struct_size = sizeof(perfcast_component), .category = {category},
    .name = "{component}", .description = "misbehaves", .create = create, .vtable = &vt,
}};
static const perfcast_component *const comps[] = {{&comp}};
static const perfcast_plugin plugin = {{
    .struct_size = sizeof(perfcast_plugin), .abi_major = PERFCAST_PLUGIN_ABI_MAJOR,
    .abi_minor = PERFCAST_PLUGIN_ABI_MINOR, .n_components = 1, .name = "{plugin}",
    .version = "0.0.1", .components = comps,
}};
const perfcast_plugin *perfcast_plugin_entry_v1(void) {{ return &plugin; }}
"#
    )
}

/// Write the C source `body` to `dir/name.c` (the plugin header included first) and compile it
/// into the shared library `dir/lib<name>.so`.
pub fn cc_plugin_source(dir: &Path, name: &str, body: &str) -> PathBuf {
    cc_plugin_source_with(dir, name, body, &[])
}

/// [`cc_plugin_source`] with `extra` compiler flags (e.g. `-DPERFCAST_PLUGIN_ABI_MINOR=5`).
pub fn cc_plugin_source_with(dir: &Path, name: &str, body: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, format!("#include \"perfcast_plugin.h\"\n{body}\n"))
        .unwrap_or_else(|e| panic!("write {}: {e}", src.display()));
    cc_shared(dir, &src, &library_name(name), extra)
}
