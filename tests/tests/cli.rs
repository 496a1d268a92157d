//! The `ahp` command line's own contract: usage errors, the bounds and checks on what it
//! reads (events, registrations, trust roots, host options), the exit codes of `observe`
//! and `demo`, and logs fit for a file.

use ahp_tests::support::ahp_binary;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How one `ahp` run ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts the exit code, showing both streams when it is wrong.
    fn assert_exit(&self, code: i32, case: &str) {
        assert_eq!(
            self.code,
            Some(code),
            "{case}\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
    }
}

/// Runs `ahp` with `args`, stdin empty and `AHP_LOG` unset; `env` is set on top.
fn ahp(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(ahp_binary());
    command
        .args(args)
        .env_remove("AHP_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let output = command.output().expect("run ahp");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The upstream fixture of a valid registration (it sends nothing at load).
fn portable() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/upstream/fixtures/draft/registration/portable.valid.json"
    ))
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A usage error is "the call could not be made", exit 1, never 2 (a denial) — except
/// under `ahp hook HARNESS`, which a harness runs and which must answer it as a block
/// (exit 2). `--help` and `--version` are exit 0.
#[test]
fn a_usage_error_is_exit_1_and_a_block_only_under_a_harness_hook() {
    let reg = portable();
    let reg = path(&reg);
    let exit_1: [&[&str]; 6] = [
        &["intercept", "--registration", reg],
        &[
            "intercept",
            "--registration",
            reg,
            "--event",
            "-",
            "--effects",
            "nope",
        ],
        &["observe", "--registration", reg],
        &["check"],
        &["check", reg, "--retries", "many"],
        &["hook", "install", "claude-code"],
    ];
    for args in exit_1 {
        let run = ahp(args, &[]);
        run.assert_exit(1, &format!("{args:?}"));
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.starts_with("error: "),
            "{args:?}: {}",
            run.stderr
        );
    }
    let run = ahp(&["hook", "claude-code"], &[]);
    run.assert_exit(2, "hook without --registration");
    assert!(run.stderr.contains("--registration"), "{}", run.stderr);
    for args in [&["--help"][..], &["intercept", "--help"], &["--version"]] {
        let run = ahp(args, &[]);
        run.assert_exit(0, &format!("{args:?}"));
        assert!(!run.stdout.is_empty(), "{args:?}: printed on stdout");
    }
}
