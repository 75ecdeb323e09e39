//! The engine sees only `perfcast-core` (ARCHITECTURE.md, "perfcast-engine" invariant): its
//! normal dependencies name no other perfcast crate, so no plugin, host or loader can leak
//! into the model. (Dev-dependencies may: tests use the built-in plugins.)

#[test]
fn the_engine_depends_on_core_only() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("the engine's Cargo.toml");
    let doc: toml::Table = manifest.parse().expect("valid TOML");
    let deps = doc
        .get("dependencies")
        .and_then(|d| d.as_table())
        .expect("[dependencies]");
    let perfcast: Vec<&String> = deps.keys().filter(|k| k.starts_with("perfcast")).collect();
    assert_eq!(perfcast, ["perfcast-core"], "engine dependencies: {deps:?}");
}
