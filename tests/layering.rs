//! The house's dependency rules, checked against every `Cargo.toml` of the workspace.
//!
//! [`ALLOWED`] is the one table of which internal crates each crate may name among its normal
//! `[dependencies]` (dev-dependencies are free: tests may use the built-in plugins and the
//! testkit). A crate added to the workspace without a row fails here, so every new crate
//! states its place. The rules the table encodes (ARCHITECTURE.md, "Dependency layering"):
//!
//! - `perfcast-core` depends on no other perfcast crate; plugins depend on `perfcast-core`
//!   (and, as libraries, on `perfcast-abi`) only, never on the engine or a host.
//! - The engine sees only `perfcast-core`: no plugin, host or loader can leak into the model.
//! - The serving simulator sits on the engine's step costs and nothing above them.
//! - Only hosts and tests link `perfcast-builtins`: a library crate takes the registry it is
//!   handed, so a host chooses its plugins.
//! - The testkit depends on `perfcast-core` and `perfcast-builtins` only: the engine's tests
//!   use it, and a dependency back on the engine would link a second copy into them.
//! - Only `perfcast-assets` embeds `configs/`; it depends on nothing.
//! - Internal crates are named through `[workspace.dependencies]`, never by a relative path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every workspace crate and the internal crates its normal dependencies may name.
const ALLOWED: &[(&str, &[&str])] = &[
    // The plugin API and the binary contract.
    ("perfcast-core", &[]),
    ("perfcast-abi", &["perfcast-core"]),
    ("perfcast-loader", &["perfcast-core", "perfcast-abi"]),
    // The model and what embeds the project's data.
    ("perfcast-engine", &["perfcast-core"]),
    ("perfcast-serving", &["perfcast-core", "perfcast-engine"]),
    // The project's data, embedded once; it depends on nothing.
    ("perfcast-assets", &[]),
    // Kernel tables timed on silicon: their schema, reading and interpolation (a plugin may
    // use it), and the project's tables, embedded, which only hosts link.
    ("perfcast-kernels", &["perfcast-core"]),
    ("perfcast-kernel-data", &["perfcast-kernels"]),
    // Configuration and the scenario layer.
    (
        "perfcast-config",
        &[
            "perfcast-core",
            "perfcast-loader",
            "perfcast-assets",
            "perfcast-kernels",
        ],
    ),
    (
        "perfcast-scenario",
        &[
            "perfcast-core",
            "perfcast-assets",
            "perfcast-engine",
            "perfcast-serving",
            "perfcast-config",
        ],
    ),
    // The drawing kit (tables, numbers, labels, figures, files), below every report.
    ("perfcast-render", &["perfcast-core", "perfcast-engine"]),
    // What each report looks like.
    (
        "perfcast-report",
        &[
            "perfcast-core",
            "perfcast-engine",
            "perfcast-kernels",
            "perfcast-serving",
            "perfcast-render",
            "perfcast-scenario",
            "perfcast-search",
            "perfcast-validation",
        ],
    ),
    // The applications.
    (
        "perfcast-search",
        &[
            "perfcast-core",
            "perfcast-engine",
            "perfcast-serving",
            "perfcast-config",
            "perfcast-scenario",
            "perfcast-render",
        ],
    ),
    (
        "perfcast-validation",
        &[
            "perfcast-core",
            "perfcast-assets",
            "perfcast-engine",
            "perfcast-serving",
            "perfcast-config",
            "perfcast-scenario",
            "perfcast-render",
            "perfcast-kernels",
        ],
    ),
    (
        "perfcast-studies",
        &[
            "perfcast-core",
            "perfcast-assets",
            "perfcast-engine",
            "perfcast-config",
            "perfcast-scenario",
            "perfcast-search",
            "perfcast-render",
        ],
    ),
    // The built-in plugins and the facade that composes them.
    ("perfcast-plugin-gpu", &["perfcast-core"]),
    ("perfcast-plugin-memory", &["perfcast-core"]),
    ("perfcast-plugin-network", &["perfcast-core"]),
    ("perfcast-plugin-parallel", &["perfcast-core"]),
    ("perfcast-plugin-recompute", &["perfcast-core"]),
    ("perfcast-plugin-schedule", &["perfcast-core"]),
    ("perfcast-plugin-topology", &["perfcast-core"]),
    (
        "perfcast-plugin-technology",
        &[
            "perfcast-core",
            "perfcast-plugin-gpu",
            "perfcast-plugin-memory",
            "perfcast-plugin-network",
        ],
    ),
    (
        "perfcast-builtins",
        &[
            "perfcast-core",
            "perfcast-plugin-gpu",
            "perfcast-plugin-memory",
            "perfcast-plugin-network",
            "perfcast-plugin-parallel",
            "perfcast-plugin-recompute",
            "perfcast-plugin-schedule",
            "perfcast-plugin-technology",
            "perfcast-plugin-topology",
        ],
    ),
    // Example plugins a plugin author reads: the plugin API and the ABI only.
    ("acme-npu", &["perfcast-core", "perfcast-abi"]),
    ("minimal-rust", &["perfcast-core", "perfcast-abi"]),
    ("dragonfly-plus", &["perfcast-core", "perfcast-abi"]),
    ("ulysses", &["perfcast-core", "perfcast-abi"]),
    ("hsdp", &["perfcast-core", "perfcast-abi"]),
    // The host: it chooses the plugins and hands them down.
    (
        "perfcast-cli",
        &[
            "perfcast-core",
            "perfcast-engine",
            "perfcast-serving",
            "perfcast-config",
            "perfcast-scenario",
            "perfcast-render",
            "perfcast-report",
            "perfcast-search",
            "perfcast-studies",
            "perfcast-validation",
            "perfcast-builtins",
            "perfcast-kernels",
            "perfcast-kernel-data",
        ],
    ),
    // The public test support of plugin authors: a library beside the built-ins, through the
    // configuration and scenario layers, as the command line loads it.
    (
        "perfcast-plugin-test",
        &[
            "perfcast-core",
            "perfcast-builtins",
            "perfcast-config",
            "perfcast-scenario",
            "perfcast-engine",
            "perfcast-kernel-data",
        ],
    ),
    // The Python package's native module: the CLI's commands in process (`run_captured`),
    // so that its results are the command line's, byte for byte.
    ("perfcast-python", &["perfcast-cli"]),
    // Tests and their fixtures.
    ("perfcast-tests", &[]),
    ("perfcast-testkit", &["perfcast-core", "perfcast-builtins"]),
    ("abi-v2-fixture", &[]),
    ("abi-mismatch-fixture", &[]),
    ("abi-v1-2-fixture", &[]),
    (
        "abi-v1-3-fixture",
        &["perfcast-core", "perfcast-abi", "perfcast-plugin-parallel"],
    ),
    ("sram-fixture", &["perfcast-core", "perfcast-abi"]),
    ("fuzz-fixture", &["perfcast-core", "perfcast-abi"]),
    (
        "topology-builtins-lib",
        &["perfcast-core", "perfcast-abi", "perfcast-plugin-topology"],
    ),
    (
        "execution-builtins-lib",
        &[
            "perfcast-core",
            "perfcast-abi",
            "perfcast-plugin-parallel",
            "perfcast-plugin-schedule",
            "perfcast-plugin-recompute",
        ],
    ),
];

/// Crates that exist to be hosts or tests: the only ones that may link `perfcast-builtins`.
const MAY_LINK_BUILTINS: &[&str] = &["perfcast-cli", "perfcast-plugin-test", "perfcast-testkit"];

struct Member {
    dir: PathBuf,
    manifest: toml::Table,
}

impl Member {
    fn name(&self) -> &str {
        self.manifest["package"]["name"]
            .as_str()
            .expect("package.name")
    }

    fn section(&self, name: &str) -> Option<&toml::Table> {
        self.manifest.get(name).and_then(|d| d.as_table())
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn workspace() -> (toml::Table, Vec<Member>) {
    let root_manifest = read_toml(&root().join("Cargo.toml"));
    let members = root_manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| {
            let dir = root().join(m.as_str().expect("a member path"));
            let manifest = read_toml(&dir.join("Cargo.toml"));
            Member { dir, manifest }
        })
        .collect();
    (root_manifest, members)
}

fn internal_names(members: &[Member]) -> Vec<String> {
    members.iter().map(|m| m.name().to_string()).collect()
}

/// The internal crates a dependency table names.
fn internal_deps<'a>(table: Option<&'a toml::Table>, internal: &[String]) -> Vec<&'a str> {
    table
        .map(|t| {
            t.keys()
                .filter(|k| internal.iter().any(|i| i == *k))
                .map(String::as_str)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_crate_names_only_the_crates_its_row_allows() {
    let (_, members) = workspace();
    let internal = internal_names(&members);
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut broken = Vec::new();
    for m in &members {
        let Some(ok) = allowed.get(m.name()) else {
            broken.push(format!(
                "{}: no row in tests/layering.rs ALLOWED (say what it may depend on)",
                m.name()
            ));
            continue;
        };
        for dep in internal_deps(m.section("dependencies"), &internal) {
            if !ok.contains(&dep) {
                broken.push(format!(
                    "{} depends on {dep}, which its row does not allow",
                    m.name()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

#[test]
fn the_table_has_no_row_for_a_crate_that_is_gone() {
    let (_, members) = workspace();
    let internal = internal_names(&members);
    let stale: Vec<&str> = ALLOWED
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !internal.iter().any(|i| i == n))
        .collect();
    assert!(
        stale.is_empty(),
        "rows for crates not in the workspace: {stale:?}"
    );
}

#[test]
fn only_hosts_and_tests_link_the_builtins() {
    let (_, members) = workspace();
    let linking: Vec<&str> = members
        .iter()
        .filter(|m| {
            m.section("dependencies")
                .is_some_and(|d| d.contains_key("perfcast-builtins"))
        })
        .map(Member::name)
        .filter(|n| !MAY_LINK_BUILTINS.contains(n))
        .collect();
    assert!(
        linking.is_empty(),
        "library crates linking perfcast-builtins (take the registry from the host instead): {linking:?}"
    );
}

#[test]
fn internal_crates_come_from_the_workspace_table() {
    let (root_manifest, members) = workspace();
    let internal = internal_names(&members);
    let table = root_manifest["workspace"]["dependencies"]
        .as_table()
        .expect("[workspace.dependencies]");
    let mut broken = Vec::new();
    for m in &members {
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = m.section(section) else {
                continue;
            };
            for dep in internal_deps(Some(deps), &internal) {
                let by_workspace = deps[dep]
                    .as_table()
                    .and_then(|t| t.get("workspace"))
                    .and_then(|w| w.as_bool())
                    == Some(true);
                if !by_workspace {
                    broken.push(format!(
                        "{} [{section}] {dep}: write `{dep}.workspace = true`",
                        m.name()
                    ));
                }
                if !table.contains_key(dep) {
                    broken.push(format!("{dep} is not in [workspace.dependencies]"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn folder_names_say_what_a_crate_is() {
    let (_, members) = workspace();
    let mut broken = Vec::new();
    for m in &members {
        let folder = m
            .dir
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let parent = m
            .dir
            .parent()
            .and_then(|p| p.strip_prefix(root()).ok())
            .and_then(|p| p.to_str())
            .unwrap_or_default()
            .to_string();
        // crates/NAME and fixtures are named as their package; plugins/NAME is
        // perfcast-plugin-NAME; hosts/NAME is perfcast-NAME.
        let expected = match parent.as_str() {
            "crates" | "tests/fixtures/plugins" | "plugins/examples" => folder.to_string(),
            "plugins" if folder == "builtins" => "perfcast-builtins".to_string(),
            "plugins" => format!("perfcast-plugin-{folder}"),
            "hosts" => format!("perfcast-{folder}"),
            "" => format!("perfcast-{folder}"),
            "tests" => format!("perfcast-{folder}"),
            other => {
                broken.push(format!(
                    "{}: a crate under {other}/, outside the layout",
                    m.name()
                ));
                continue;
            }
        };
        if m.name() != expected {
            broken.push(format!(
                "{}/{folder}: package {} (expected {expected})",
                parent,
                m.name()
            ));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// Crates that set their own lints instead of the workspace's: the FFI boundary (unsafe code
/// is theirs), the plugins built as libraries (their exported symbols are unsafe attributes),
/// and the test-only crates (a panic is a test's failure report).
const OWN_LINTS: &[&str] = &[
    "perfcast-abi",
    "perfcast-loader",
    "acme-npu",
    "minimal-rust",
    "dragonfly-plus",
    "ulysses",
    "hsdp",
    "perfcast-tests",
    "perfcast-testkit",
    "abi-v2-fixture",
    "abi-mismatch-fixture",
    "abi-v1-2-fixture",
    "abi-v1-3-fixture",
    "sram-fixture",
    "fuzz-fixture",
    "topology-builtins-lib",
    "execution-builtins-lib",
];

/// Every other crate takes `[workspace.lints]`: unsafe code forbidden, no `unwrap`/`expect`
/// in library code.
#[test]
fn every_other_crate_takes_the_workspace_lints() {
    let (root_manifest, members) = workspace();
    let lints = &root_manifest["workspace"]["lints"];
    assert_eq!(lints["rust"]["unsafe_code"].as_str(), Some("forbid"));
    for lint in ["unwrap_used", "expect_used"] {
        assert!(
            lints["clippy"].get(lint).is_some(),
            "clippy::{lint} not set"
        );
    }
    let missing: Vec<&str> = members
        .iter()
        .filter(|m| !OWN_LINTS.contains(&m.name()))
        .filter(|m| {
            m.section("lints")
                .and_then(|l| l.get("workspace"))
                .and_then(|w| w.as_bool())
                != Some(true)
        })
        .map(Member::name)
        .collect();
    assert!(
        missing.is_empty(),
        "crates without `[lints] workspace = true`: {missing:?}"
    );
}
