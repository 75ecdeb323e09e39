//! perfcast-report: what each report of perfcast looks like, shared by the CLI and the Python
//! package (and, later, a web page). The drawing kit (tables, numbers, labels, figures, files)
//! is `perfcast-render`'s; here each report chooses its columns, notes and charts.
//!
//! - [`training`] and [`inference`]: the engines' reports as tables, CSV and notes (the
//!   engines compute; they do not format).
//! - [`charts`]: the CLI's charts of engine reports (`predict --plot`); [`predict`]: what
//!   `perfcast predict` writes beside the training report; [`infer`]: what `perfcast infer`
//!   writes beside the inference report.
//! - [`error_bars`]: a prediction's intervals beside its rows, in JSON and in CSV;
//!   [`reference`](mod@reference): a config's published figures beside the prediction.
//! - [`validation`]: a validation run's table and Parquet rows, a collectives file's table
//!   (`perfcast validate`), a calibration's report (`perfcast calibrate`).
//! - [`network`]: the network and strategies a training step ran on (`perfcast predict`).
//! - [`kernels`]: the kernel tables' catalog and one table (`perfcast kernels list|show`).
//! - [`roofline`]: a device's `[[ops]]` or a model's GEMMs on the roofline, as text, CSV and
//!   the log-log chart (`perfcast roofline`).
//! - [`search`]: a training-plan search's output (`perfcast search`); [`deployments`]: a
//!   deployment search's for serving (`perfcast search` with `[serving_search]`).
//! - [`serve`]: a serving simulation's output (`perfcast serve`).
//!
//! Invariant: this crate only formats: it computes nothing a report shows. It sits above the
//! engines and the applications whose results it renders (search, validation's error bars),
//! below the hosts.

#![warn(missing_docs)]

pub mod charts;
pub mod deployments;
pub mod error_bars;
pub mod infer;
pub mod inference;
pub mod kernels;
pub mod network;
pub mod predict;
pub mod reference;
pub mod roofline;
pub mod search;
pub mod serve;
pub mod training;
pub mod validation;
