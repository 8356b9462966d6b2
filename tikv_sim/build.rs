//! Generates PD and TiKV server stubs from the kvproto `.proto` files that the `tikv-client`
//! crate ships (its source tree in cargo's registry; `SAKER_KVPROTO_DIR` overrides), with the
//! protoc binary vendored by `protoc-bin-vendored`. Servers only: the client is `tikv-client`.

use std::path::PathBuf;

/// The `tikv-client` release whose protos we serve (the workspace pins it).
const CLIENT: &str = "tikv-client-0.4.0";

fn proto_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("SAKER_KVPROTO_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let registry = home.join("registry").join("src");
    let indexes =
        std::fs::read_dir(&registry).map_err(|e| format!("{}: {e}", registry.display()))?;
    for index in indexes.flatten() {
        let dir = index.path().join(CLIENT).join("proto");
        if dir.join("tikvpb.proto").exists() {
            return Ok(dir);
        }
    }
    Err(format!(
        "{CLIENT}/proto not found under {}; set SAKER_KVPROTO_DIR",
        registry.display()
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-env-changed=SAKER_KVPROTO_DIR");
    let dir = proto_dir()?;
    let include = dir.join("include");
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .generate_default_stubs(true)
        .compile_with_config(
            config,
            &[dir.join("tikvpb.proto"), dir.join("pdpb.proto")],
            &[dir, include],
        )?;
    Ok(())
}
