//! The `perfcast` binary: everything is in the library (`perfcast_cli::main`).

fn main() -> std::process::ExitCode {
    perfcast_cli::main()
}
