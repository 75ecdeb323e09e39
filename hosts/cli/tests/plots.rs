//! Every chart perfcast draws, rendered to PNG by resvg with the font the charts name (DejaVu
//! Sans, bundled in `crates/perfcast-render/fonts`, so the test does not depend on the machine's
//! fonts): the `--plot` of `roofline`, `predict` and `serve`, and the studies' figures
//! (which must also be the committed ones of `docs/studies/`).
//! Each must render to a non-empty image, every `<text>` must be laid out (its font found),
//! lie inside the canvas, and overlap no other text. The PNGs are left in the test's
//! temporary directory for a human to look at.

// A test: a panic with a message is its failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use resvg::usvg;
use std::path::Path;

/// A text's layout box (the font's ascent to descent by the advance of its glyphs) as the
/// four corners it has on the canvas (rotated labels are rotated boxes), and its characters.
type TextBox = ([(f32, f32); 4], String);

/// The boxes of every text node under `group`.
fn texts(group: &usvg::Group, out: &mut Vec<TextBox>) {
    for node in group.children() {
        match node {
            usvg::Node::Group(g) => texts(g, out),
            usvg::Node::Text(t) => {
                let (b, m) = (t.bounding_box(), t.abs_transform());
                let corner =
                    |x: f32, y: f32| (m.sx * x + m.kx * y + m.tx, m.ky * x + m.sy * y + m.ty);
                let corners = [
                    corner(b.left(), b.top()),
                    corner(b.right(), b.top()),
                    corner(b.right(), b.bottom()),
                    corner(b.left(), b.bottom()),
                ];
                let chars: String = t.chunks().iter().map(|c| c.text()).collect();
                out.push((corners, chars));
            }
            _ => {}
        }
    }
}

/// How far two convex quadrilaterals overlap: the least penetration over the separating
/// axes of both (the normals of their edges); at most 0 when they are apart.
fn overlap(a: &[(f32, f32); 4], b: &[(f32, f32); 4]) -> f32 {
    let mut least = f32::INFINITY;
    for poly in [a, b] {
        for i in 0..4 {
            let (p, q) = (poly[i], poly[(i + 1) % 4]);
            let (nx, ny) = (q.1 - p.1, p.0 - q.0);
            let len = (nx * nx + ny * ny).sqrt();
            if len == 0.0 {
                continue;
            }
            let project = |quad: &[(f32, f32); 4]| {
                quad.iter()
                    .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), c| {
                        let d = (c.0 * nx + c.1 * ny) / len;
                        (lo.min(d), hi.max(d))
                    })
            };
            let ((alo, ahi), (blo, bhi)) = (project(a), project(b));
            least = least.min(ahi.min(bhi) - alo.max(blo));
        }
    }
    least
}

/// Render `svg` (written to `png`), check it as the module says and return how many texts
/// it holds.
fn render_and_check(name: &str, svg: &str, png: &Path) -> usize {
    let mut opt = usvg::Options::default();
    let font = common::repo().join("crates/perfcast-render/fonts/DejaVuSans.ttf");
    opt.fontdb_mut()
        .load_font_data(std::fs::read(&font).unwrap());
    let tree = usvg::Tree::from_str(svg, &opt).unwrap_or_else(|e| panic!("{name}: {e}"));
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.save_png(png).unwrap();
    // Non-empty: some pixels are not the white background.
    let inked = pixmap
        .pixels()
        .iter()
        .filter(|p| p.red() < 200 || p.green() < 200 || p.blue() < 200)
        .count();
    assert!(
        inked * 100 > pixmap.pixels().len(),
        "{name}: only {inked} of {} pixels drawn",
        pixmap.pixels().len()
    );
    let mut boxes = Vec::new();
    texts(tree.root(), &mut boxes);
    let written = svg.matches("<text").count();
    assert_eq!(
        boxes.len(),
        written,
        "{name}: {written} texts written, {} laid out (font not found?)",
        boxes.len()
    );
    let (w, h) = (size.width() as f32, size.height() as f32);
    for (corners, s) in &boxes {
        assert!(
            corners
                .iter()
                .all(|&(x, y)| (0.0..=w).contains(&x) && (0.0..=h).contains(&y)),
            "{name}: `{s}` at {corners:?} leaves the {w}x{h} canvas"
        );
    }
    // Two texts overlap when their boxes share more than a pixel (the layout box holds the
    // font's whole ascent and descent, so the lines of a block touch).
    for (i, (a, sa)) in boxes.iter().enumerate() {
        for (b, sb) in &boxes[i + 1..] {
            let depth = overlap(a, b);
            assert!(
                depth <= 1.0,
                "{name}: `{sa}` {a:?} and `{sb}` {b:?} overlap by {depth:.1} px"
            );
        }
    }
    boxes.len()
}

/// Run perfcast with `--plot FILE` appended and return the plot it wrote.
fn plot(dir: &Path, name: &str, args: &[&str]) -> String {
    let file = dir.join(format!("{name}.svg"));
    let mut all: Vec<&str> = args.to_vec();
    let file_s = file.display().to_string();
    all.extend(["--plot", &file_s]);
    let o = common::output(&mut common::command(&common::repo(), &all));
    assert_eq!(o.code, 0, "{name}: {}", o.stderr);
    std::fs::read_to_string(&file).unwrap()
}

#[test]
fn every_chart_renders_with_its_text_inside_and_apart() {
    let dir = common::tmpdir("perfcast-cli-plots");
    let mut charts: Vec<(String, String)> = vec![
        (
            "roofline-a100".into(),
            plot(
                &dir,
                "roofline-a100",
                &["roofline", "configs/experiments/roofline-a100.toml"],
            ),
        ),
        (
            "roofline-llama2-70b".into(),
            plot(
                &dir,
                "roofline-llama2-70b",
                &["roofline", "configs/experiments/roofline-llama2-70b.toml"],
            ),
        ),
        (
            "predict-gpt3-175b".into(),
            plot(
                &dir,
                "predict-gpt3-175b",
                &["predict", "configs/experiments/gpt3-175b-a100.toml"],
            ),
        ),
        (
            "serve-curve".into(),
            plot(
                &dir,
                "serve-curve",
                &[
                    "serve",
                    "configs/serving/llama3.1-8b-h100.toml",
                    "--rates",
                    "2,8,16,32,inf",
                    "--requests",
                    "200",
                ],
            ),
        ),
    ];
    // The studies whose figures the documentation shows, each run again here.
    let mut studies: Vec<String> = std::fs::read_dir(common::repo().join("docs/studies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    studies.sort();
    assert!(studies.len() >= 5, "{studies:?}");
    for study in studies {
        let out = dir.join(&study);
        let o = common::output(&mut common::command(
            &common::repo(),
            &["study", &study, "--out", &out.display().to_string()],
        ));
        assert_eq!(o.code, 0, "{study}: {}", o.stderr);
        let svg = std::fs::read_to_string(out.join(format!("{study}.svg"))).unwrap();
        // The committed outputs are these outputs (the documentation shows them).
        for ext in ["csv", "svg", "md"] {
            let file = format!("{study}.{ext}");
            let committed =
                std::fs::read_to_string(common::repo().join("docs/studies").join(&file));
            assert!(
                committed.unwrap() == std::fs::read_to_string(out.join(&file)).unwrap(),
                "docs/studies/{file} is not what `perfcast study {study}` writes: run \
                 `cargo run --release -p perfcast-studies --example study -- --docs`"
            );
        }
        charts.push((format!("study-{study}"), svg));
    }
    for (name, svg) in &charts {
        let texts = render_and_check(name, svg, &dir.join(format!("{name}.png")));
        assert!(texts >= 5, "{name}: {texts} texts (axes, labels, title)");
    }
}

/// `--plot` writes SVG or PNG by the file's extension (issue 44: `--plot x.png` once wrote SVG
/// into a .png): a PNG is an image of the chart, twice its size; any other name is a usage
/// error (2) naming both, and nothing is written.
#[test]
fn a_plot_is_svg_or_png_by_its_name() {
    let dir = common::tmpdir("perfcast-cli-plot-names");
    for (cmd, cfg) in [
        ("predict", "configs/experiments/gpt3-175b-a100.toml"),
        ("roofline", "configs/experiments/roofline-a100.toml"),
        ("serve", "configs/serving/llama3.1-8b-h100.toml"),
    ] {
        for name in ["step.jpg", "step"] {
            let file = dir.join(name);
            let file_s = file.display().to_string();
            let o = common::output(&mut common::command(
                &common::repo(),
                &[cmd, cfg, "--plot", &file_s],
            ));
            assert_eq!(o.code, 2, "{cmd} {name}: {}", o.stderr);
            assert!(
                o.stderr.contains("plots are written as SVG or PNG")
                    && o.stderr.contains("step.svg")
                    && o.stderr.contains("step.png"),
                "{cmd} {name}: {}",
                o.stderr
            );
            assert!(!file.exists(), "{cmd} {name}: wrote {}", file.display());
        }
        let (svg, png) = (
            dir.join(format!("{cmd}.svg")),
            dir.join(format!("{cmd}.PNG")),
        );
        for file in [&svg, &png] {
            let file_s = file.display().to_string();
            let o = common::output(&mut common::command(
                &common::repo(),
                &[cmd, cfg, "--plot", &file_s],
            ));
            assert_eq!(o.code, 0, "{cmd}: {}", o.stderr);
        }
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{cmd}: not a PNG");
        let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        let svg_width: f64 = svg_text
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert_eq!(f64::from(width), (2.0 * svg_width).ceil(), "{cmd}");
    }
}
