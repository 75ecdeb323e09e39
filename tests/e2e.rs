//! perfcast's cross-crate tests, one test binary for all (each file below is a module). One
//! file's tests: `cargo test -p perfcast-tests --test e2e accuracy::`.

mod abi_compat;
mod accuracy;
mod fuzz;
mod layering;
mod properties;
mod strategy_plugins;
mod tidy;
mod topology_plugins;
