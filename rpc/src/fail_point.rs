//! Fail points: crash and fault tests stop a process at a named point of a protocol by
//! starting it with `SAKER_FAILPOINT=<name>`. They exist in debug builds (the ones the tests
//! run) and with the `failpoints` feature; a release build leaves them out, so no variable in a
//! production environment can make it abort or misbehave.

/// Whether the fail point `name` is armed for this process.
#[cfg(any(debug_assertions, feature = "failpoints"))]
pub fn armed(name: &str) -> bool {
    std::env::var("SAKER_FAILPOINT").is_ok_and(|v| v == name)
}

/// Whether the fail point `name` is armed for this process: never, in a release build.
#[cfg(not(any(debug_assertions, feature = "failpoints")))]
pub fn armed(_name: &str) -> bool {
    false
}

/// Aborts the process at fail point `name` if it is armed (between two durable steps of a
/// protocol, as a crash there would).
pub fn abort_at(name: &str) {
    if armed(name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}
