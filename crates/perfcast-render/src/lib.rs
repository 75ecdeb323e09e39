//! perfcast-render: how perfcast draws and writes, for every report (`perfcast-report`), the
//! studies, the search and the validation harness. It knows no report of its own.
//!
//! - [`Format`]: table, JSON or CSV (`--format`; with the `clap` feature a `clap::ValueEnum`,
//!   and `Format::parser` for commands that accept only some formats).
//! - [`Table`]: rows rendered as aligned text or RFC 4180 CSV; [`num`](fn@num) (four significant
//!   digits, for tables) and [`num6`] (six, for data files).
//! - [`plan_label`]: a training plan as text, in the styles of [`PlanStyle`].
//! - [`svg`]: an SVG document written element by element, with text escaping; [`axis`]:
//!   linear and log axes (ranges, ticks, labels); [`marks`]: stacked bars, markers, lines and
//!   legend rows; [`palette`]: the colours.
//! - [`figure`]: figures of panels (stacked bars, waterfall, lines, x-y), drawn as SVG.
//! - [`file`](mod@file): output files written whole or not at all ([`file::OutFile`], [`file::write`]),
//!   and one writer per `--out` directory ([`file::DirLock`]).
//! - [`parquet`](mod@parquet): a results table as a Parquet file, its columns typed from
//!   their cells (`--format parquet`).
//!
//! Invariant: this crate only formats; it depends on `perfcast-core` and `perfcast-engine`
//! (for the plan types it labels) and on nothing above them.

#![warn(missing_docs)]

pub mod axis;
pub mod figure;
pub mod file;
pub mod format;
pub mod label;
pub mod marks;
pub mod num;
pub mod palette;
pub mod parquet;
#[cfg(feature = "png")]
pub mod png;
pub mod svg;
pub mod table;

pub use format::Format;
pub use label::{placed_plan_label, plan_fields, plan_label, PlanStyle};
pub use num::{fmt_factor, num, num6, pct};
pub use table::{csv_cell, set_terminal_width, Table};

/// Bytes in a gibibyte (2^30): memory per device is reported in GiB, as frameworks and
/// `nvidia-smi` report it. (`perfcast_core::Bytes::gib` where the value is a `Bytes`.)
pub const GIB: f64 = (1u64 << 30) as f64;
