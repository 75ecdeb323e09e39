//! The `topologies` study: the orderings its physics implies (more oversubscription is never
//! faster nor dearer; rail-aligned groups lose nothing on rail-optimised or rail-only
//! networks; rail-only costs less than rail-optimised) and bad input naming the key.

// A test, bench or example target: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use perfcast_studies::common::StudyContext;
use perfcast_studies::info;
use perfcast_studies::studies::topologies;

/// The repository's `configs/studies` (the shipped configs the binary embeds through
/// `perfcast-assets`; the tests read the files themselves).
fn configs_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/studies")
}

fn shipped() -> String {
    let text = std::fs::read_to_string(configs_dir().join("topologies.toml")).unwrap();
    text.replace("\"../", &format!("\"{}/../", configs_dir().display()))
}

fn ctx(text: &str) -> StudyContext {
    StudyContext::from_text(
        info("topologies").unwrap(),
        &configs_dir(),
        text,
        &perfcast_config::Plugins::new(perfcast_builtins::DefaultPlugins::new())
            .with_kernels(perfcast_kernel_data::shared().expect("kernel tables")),
    )
}

#[test]
fn orderings_of_the_shipped_study() {
    let r = topologies::evaluate(&ctx(&shipped())).unwrap();
    let by = |label: &str| r.rows.iter().find(|x| x.label == label).unwrap();
    let t = |label: &str| by(label).report.iteration_time.0;
    let cost = |label: &str| by(label).cost.as_ref().unwrap().total_usd();
    assert!(t("fat-tree 1:1") <= t("fat-tree 2:1") && t("fat-tree 2:1") <= t("fat-tree 4:1"));
    assert!(
        t("fat-tree 4:1") > 1.02 * t("fat-tree 1:1"),
        "4:1 must show"
    );
    assert_eq!(t("rail-only"), t("rail-optimised"));
    assert!(
        cost("fat-tree 4:1") < cost("fat-tree 2:1") && cost("fat-tree 2:1") < cost("fat-tree 1:1")
    );
    assert!(cost("rail-only") < 0.7 * cost("rail-optimised"));
    for x in &r.rows {
        assert!(x.all_to_all.is_finite() && x.all_to_all > 0.0);
        assert!(x.exposed_comm() >= 0.0);
    }
}

#[test]
fn bad_topologies_name_the_key() {
    let good = shipped();
    let cases = [
        (
            good.replacen("kind = \"fat-tree\"", "kind = \"fat-trie\"", 1),
            "topologies[0].component",
        ),
        (
            good.replacen("oversubscription = [2.0]", "oversubscription = \"2:1\"", 1),
            "oversubscription",
        ),
        (
            good.replacen("ranks = 128", "ranks = 1", 1),
            "all_to_all.ranks",
        ),
        (
            good.replacen("dims = [8, 8, 8]", "dims = [8, 8, 4]", 1),
            "dims",
        ),
    ];
    for (text, key) in cases {
        let e = topologies::evaluate(&ctx(&text)).err().unwrap().to_string();
        assert!(e.contains(key), "{key}: {e}");
    }
}
