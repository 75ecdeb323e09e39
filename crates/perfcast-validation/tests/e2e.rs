//! The integration tests of perfcast-validation, one test binary for all (each file below is a
//! module). One file's tests: `cargo test -p perfcast-validation --test e2e calibrate::`.

mod calibrate;
mod cases_file;
mod collectives;
mod kernels;
mod mapping;
