//! Generates the tonic service for `proto/saker.proto` with the protoc binary vendored by
//! `protoc-bin-vendored`, so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        .bytes(".")
        .compile_with_config(config, &["proto/saker.proto"], &["proto"])?;
    Ok(())
}
