//! Every panel kind renders well-formed SVG with its labels and legend; bad data is an
//! error, not a broken file.

use super::*;

fn balanced(svg: &str) -> bool {
    // Every element opened is closed: count `<x ...>` vs `</x>` for container tags and
    // check every other tag self-closes.
    for tag in ["svg", "text", "title"] {
        let open = svg.matches(&format!("<{tag}")).count();
        let close = svg.matches(&format!("</{tag}>")).count();
        if open != close {
            return false;
        }
    }
    for tag in ["rect", "line", "circle", "polyline", "path"] {
        for part in svg.split(&format!("<{tag} ")).skip(1) {
            let end = part.find('>').unwrap();
            if !part[..end].ends_with('/') {
                return false;
            }
        }
    }
    true
}

fn fig(kind: PanelKind, y: Axis) -> Figure {
    Figure {
        title: "T & <t>".into(),
        width: 900.0,
        panel_height: 420.0,
        panels: vec![Panel {
            title: "panel".into(),
            y,
            kind,
        }],
        caption: "cmd".into(),
    }
}

#[test]
fn every_chart_kind_renders_well_formed_with_labels_and_legend() {
    let kinds = vec![
        (
            PanelKind::StackedBars {
                series: vec!["weights".into(), "activations".into()],
                groups: vec![BarGroup {
                    label: "22B".into(),
                    bars: vec![Bar {
                        label: "none".into(),
                        segments: vec![10.0, 20.0],
                        note: "fits".into(),
                    }],
                }],
                reference: Some(RefLine {
                    value: 80.0,
                    label: "80 GB".into(),
                }),
            },
            Axis::linear("memory per GPU (GB)"),
        ),
        (
            PanelKind::Waterfall {
                factors: vec![("compute".into(), 4.0), ("network".into(), 0.9)],
                total_label: "total".into(),
            },
            Axis::log("speed-up (x)"),
        ),
        (
            PanelKind::CategoryLines {
                categories: vec!["HBM2e".into(), "HBM3".into()],
                series: vec![("TPOT".into(), vec![1.0, 0.6])],
            },
            Axis::log("relative latency (x)"),
        ),
        (
            PanelKind::XY {
                x: Axis::log("intensity (FLOP/B)"),
                series: vec![Series {
                    name: "A100".into(),
                    points: vec![(1.0, 2.0), (100.0, 300.0)],
                    line: true,
                    marker: Some(Marker::Triangle),
                    color: 1,
                    dashed: true,
                }],
            },
            Axis::log("TFLOP/s"),
        ),
    ];
    for (k, y) in kinds {
        let label = y.label.clone();
        let svg = fig(k, y).render().unwrap();
        assert!(balanced(&svg), "{svg}");
        assert!(svg.contains("T &amp; &lt;t&gt;"));
        assert!(svg.contains(&label), "{label}");
        assert!(!svg.contains("NaN"));
    }
}

#[test]
fn bad_data_is_an_error_not_a_broken_file() {
    let f = fig(
        PanelKind::CategoryLines {
            categories: vec!["a".into()],
            series: vec![("s".into(), vec![f64::NAN])],
        },
        Axis::linear("y"),
    );
    assert!(f.render().unwrap_err().message.contains("NaN"));
    let f = fig(
        PanelKind::Waterfall {
            factors: vec![("x".into(), 0.0)],
            total_label: "t".into(),
        },
        Axis::log("y"),
    );
    assert!(f.render().is_err());
    let f = fig(
        PanelKind::StackedBars {
            series: vec!["a".into()],
            groups: vec![BarGroup {
                label: "g".into(),
                bars: vec![Bar {
                    label: "b".into(),
                    segments: vec![1.0, 2.0],
                    note: String::new(),
                }],
            }],
            reference: None,
        },
        Axis::linear("y"),
    );
    assert!(f.render().unwrap_err().message.contains("segments"));
}
