//! Which program the host starts for a stdio backend: the component plans it, and the
//! host checks the plan against the registration by the same rule.

/// The program started for a registered `command`: a relative path (one with a `/`)
/// joined to the absolute `cwd` it is relative to, so that the host starts it by its
/// absolute path (how a program named relative to a child's changed directory is found
/// is platform-specific to Rust's `Command`); a bare name (found on `PATH`) or an
/// absolute path as written.
pub fn stdio_program(command: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(dir) if command.contains('/') && !command.starts_with('/') => {
            format!("{}/{command}", dir.trim_end_matches('/'))
        }
        _ => command.to_owned(),
    }
}
