//! `perfcast kernels`: import kernel tables (NVIDIA AIConfigurator's layout, or a vendor's
//! CSV/Parquet), list them and show one.

use crate::common::{print, to_json, Format};
use anyhow::{bail, Context};
use perfcast_kernels::io::{read_csv, read_table, write_table, ParquetFile};
use perfcast_kernels::{aic, Catalog, KernelTable, Op};
use perfcast_report::kernels;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Convert kernel tables into perfcast's (`OUT/<gpu>/<op>.parquet`): an AIConfigurator
    /// data folder (`aiconfigurator_core/systems/data`, or a folder holding it), or a CSV or
    /// Parquet file of `op`, the op's fields and `latency_ms` (`--gpu` names its GPU).
    Import(ImportArgs),
    /// The tables there are: GPU, op, rows, variants, framework, source.
    List(ListArgs),
    /// One table: its provenance, its variants and the range of each shape field.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// An AIConfigurator data folder, or a `.csv` / `.parquet` file of kernels.
    pub input: PathBuf,
    /// Where the tables go (one folder per GPU).
    #[arg(long, default_value = "kernels")]
    pub out: PathBuf,
    /// Only these GPUs of an AIConfigurator folder (repeatable); the GPU of a CSV file.
    #[arg(long = "gpu", value_name = "NAME")]
    pub gpus: Vec<String>,
    /// The package or collection the tables come from and its licence, recorded in each.
    #[arg(long)]
    pub source: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// A folder of tables (`perfcast kernels import` output) instead of the built-in ones.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    pub gpu: String,
    /// gemm, context_attention, generation_attention, moe or nccl.
    pub op: String,
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also print the first N rows.
    #[arg(long, default_value_t = 0)]
    pub rows: usize,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(c: Command) -> anyhow::Result<()> {
    match c {
        Command::Import(a) => import(a),
        Command::List(a) => list(a),
        Command::Show(a) => show(a),
    }
}

fn catalog(dir: Option<&Path>) -> anyhow::Result<Catalog> {
    Ok(match dir {
        Some(d) => Catalog::dir(d)?,
        None => perfcast_kernel_data::catalog()?,
    })
}

fn import(a: ImportArgs) -> anyhow::Result<()> {
    let ext = a.input.extension().and_then(|x| x.to_str());
    let default_source = || format!("imported from {}", a.input.display());
    let source = a.source.clone().unwrap_or_else(default_source);
    let tables: Vec<KernelTable> = match ext {
        Some("csv") => {
            let [gpu] = a.gpus.as_slice() else {
                bail!(
                    "{}: a CSV file is one GPU's: name it with --gpu",
                    a.input.display()
                );
            };
            let text =
                perfcast_config::input::read_text(&a.input, perfcast_config::input::MAX_TEXT_BYTES)
                    .with_context(|| a.input.display().to_string())?;
            read_csv(&a.input.display().to_string(), &text, gpu, &source)?
        }
        Some("parquet") => {
            let f = ParquetFile::read(&a.input)?;
            let gpu = a.gpus.first().map(String::as_str);
            let op = f
                .metadata("perfcast.op")
                .is_none()
                .then(|| {
                    a.input
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .and_then(Op::from_name)
                })
                .flatten();
            vec![read_table(&f, op, gpu)?]
        }
        _ => {
            let root = aic::data_root(&a.input)?;
            let all = aic::gpus(&root)?;
            for g in &a.gpus {
                if !all.contains(g) {
                    let near =
                        perfcast_core::suggest::closest(g, all.iter().map(String::as_str), 3, None);
                    bail!(
                        "{}: no GPU `{g}` (nearest: {})",
                        root.display(),
                        near.join(", ")
                    );
                }
            }
            let mut out = Vec::new();
            for g in all
                .iter()
                .filter(|g| a.gpus.is_empty() || a.gpus.contains(g))
            {
                out.extend(aic::import_gpu(&root, g, &source)?);
            }
            out
        }
    };
    if tables.is_empty() {
        bail!("{}: no kernel tables found", a.input.display());
    }
    let mut lines = Vec::new();
    for t in &tables {
        let dir = a.out.join(&t.gpu);
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        let path = dir.join(format!("{}.parquet", t.op));
        let bytes = write_table(t)?;
        perfcast_render::file::write(&path, &bytes).with_context(|| path.display().to_string())?;
        lines.push(format!(
            "{}: {} rows, {} bytes (from {})",
            path.display(),
            t.rows.len(),
            bytes.len(),
            if t.provenance.path.is_empty() {
                t.provenance.source.as_str()
            } else {
                t.provenance.path.as_str()
            }
        ));
    }
    print(&(lines.join("\n") + "\n"))
}

fn list(a: ListArgs) -> anyhow::Result<()> {
    let c = catalog(a.dir.as_deref())?;
    let mut rows = Vec::new();
    for gpu in c.gpus() {
        for op in c.ops(gpu) {
            let t = c.get(gpu, op)?;
            let p = t.provenance();
            rows.push(kernels::ListRow {
                gpu: gpu.to_string(),
                op: op.name().to_string(),
                rows: t.rows(),
                variants: t.variant_count(),
                framework: p.framework.clone(),
                device: p.device.clone(),
                source: p.source.clone(),
                path: p.path.clone(),
            });
        }
    }
    let text = match a.format {
        Format::Parquet => return Err(crate::common::no_parquet()),
        Format::Json => to_json(&rows)?,
        Format::Table => kernels::list_table(&rows).render(),
        Format::Csv => kernels::list_table(&rows).csv(),
    };
    print(&text)
}

fn show(a: ShowArgs) -> anyhow::Result<()> {
    let Some(op) = Op::from_name(&a.op) else {
        bail!(
            "unknown op `{}` (one of {})",
            a.op,
            Op::ALL.map(Op::name).join(", ")
        );
    };
    let c = catalog(a.dir.as_deref())?;
    let t = c.get(&a.gpu, op)?.table()?;
    let t = &t;
    if a.format == Format::Json {
        return print(&crate::common::to_json_of(
            "kernel-table",
            &kernels::show_json(t, op, a.rows),
        )?);
    }
    print(&kernels::show_text(t, op, a.rows, a.format == Format::Csv))
}
