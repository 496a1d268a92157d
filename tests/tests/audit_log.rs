//! The audit log an embedder names (`Options::audit_path`), beyond what the `ahp` command
//! line shows of it: a file everybody can read or write is written to, and said to be
//! such among the interceptor's warnings, where an embedder looks (the log's default
//! filter shows errors only).

use ahp_tests::fault_backend::refused_url;
use ahp_tests::support::audited;
use std::os::unix::fs::PermissionsExt as _;

/// A log file of mode 0644 is named among the warnings, with its mode; one of 0600 is
/// not.
#[tokio::test]
async fn a_log_everybody_can_read_is_named_among_the_warnings() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let audit = dir.path().join("audit.jsonl");
    std::fs::write(&audit, "").expect("create the audit log");
    for (mode, warned) in [(0o644, true), (0o600, false)] {
        let permissions = std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(&audit, permissions).expect("chmod");
        let interceptor = audited(&audit, "com.example.gone", &refused_url(), "fail-open").await;
        let warning = format!(
            "audit log {}: its mode, {mode:o}, lets everybody read",
            audit.display()
        );
        let warnings = interceptor.warnings();
        let said = warnings.iter().any(|w| w.starts_with(&warning));
        assert_eq!(said, warned, "{mode:o}: {warnings:?}");
        // Unwarned, the log is named in no warning at all, whatever its wording.
        let named = warnings
            .iter()
            .any(|w| w.contains(&audit.display().to_string()));
        assert_eq!(named, warned, "{mode:o}: {warnings:?}");
        interceptor.shutdown_async().await;
    }
}
