//! The `prewarm` binary itself, for the test binaries that run it whole (`#[path]`-included, so
//! it needs none of the stack fixtures in `common/mod.rs`).

/// Runs `prewarm` with `args`, fails the test with its stderr if it fails, returns its stdout.
pub fn run_prewarm(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_prewarm"))
        .args(args)
        .output()
        .expect("prewarm runs");
    assert!(
        out.status.success(),
        "prewarm {} failed: {}",
        args.first().unwrap_or(&""),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}
