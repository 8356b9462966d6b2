//! The root access key and the SSE master keys as the roles take them at start.

use std::sync::Arc;

use saker_client::master_keys::MasterKeys;

/// The root access key from `SAKER_ACCESS_KEY` / `SAKER_SECRET_KEY`, if both are set and not
/// empty.
pub(crate) fn env_root_key() -> Option<(String, String)> {
    match (
        std::env::var("SAKER_ACCESS_KEY"),
        std::env::var("SAKER_SECRET_KEY"),
    ) {
        (Ok(a), Ok(s)) if !a.is_empty() && !s.is_empty() => Some((a, s)),
        _ => None,
    }
}

/// How a generated root secret is shown at start: itself on a terminal; in a log (stdout
/// redirected) only where it is kept, `DATA_DIR/access-keys.json` (mode 0600).
pub(crate) fn shown_secret(secret: &str, data_dir: &std::path::Path) -> String {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        secret.to_string()
    } else {
        format!(
            "(not printed into a log: the root key's secret_key in {}, mode 0600)",
            data_dir.join("access-keys.json").display()
        )
    }
}

/// The master keys as the MNodes use them.
pub(crate) fn sse_keys(keys: Option<Arc<MasterKeys>>) -> Option<Arc<dyn saker_rpc::SseKeys>> {
    keys.map(|k| k as Arc<dyn saker_rpc::SseKeys>)
}
