//! The end-to-end tests of the `perfcast` binary, one test binary for all (each file below is
//! a module: one link of the CLI instead of thirteen). Run one file's tests with a filter:
//! `cargo test -p perfcast-cli --test e2e plugins::`.

mod common;

mod calibrate;
mod cli;
mod declared_axes;
mod execution_plugins;
mod golden;
mod kernels;
mod plots;
mod plugins;
mod predict_infer;
mod search_sweep;
mod serve;
mod strategy_plugins;
mod topology;
