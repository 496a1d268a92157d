//! The `ahp` command line; see `ahp --help`.

fn main() -> std::process::ExitCode {
    ahp_host::cli::main()
}
