//! The integration tests of perfcast-scenario, one test binary for all (each file below is a
//! module). One file's tests: `cargo test -p perfcast-scenario --test e2e moe_presets::`.

mod moe_presets;
mod roofline;
mod stacks;
