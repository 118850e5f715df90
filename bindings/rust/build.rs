//! Finds libckpt for linking: `CKPT_LIB_DIR` if set, otherwise the `libdir` that `pkg-config` reports for
//! `ckpt` (an installed ckpt.pc on `PKG_CONFIG_PATH`). Tests and examples of this crate get an rpath to that
//! directory, so they run without `LD_LIBRARY_PATH`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config_libdir() -> Result<PathBuf, String> {
    let output = Command::new("pkg-config")
        .args(["--variable=libdir", "ckpt"])
        .output()
        .map_err(|e| format!("running pkg-config failed: {e}"))?;
    if !output.status.success() {
        return Err(format!("pkg-config found no 'ckpt' package: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if dir.is_empty() {
        return Err("pkg-config reported an empty libdir for 'ckpt'".to_string());
    }
    Ok(PathBuf::from(dir))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CKPT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");

    let (dir, origin) = match env::var_os("CKPT_LIB_DIR") {
        Some(dir) if !dir.is_empty() => (PathBuf::from(dir), "CKPT_LIB_DIR".to_string()),
        _ => match pkg_config_libdir() {
            Ok(dir) => (dir, "pkg-config".to_string()),
            Err(why) => panic!(
                "\n\nckpt: cannot find libckpt.\n  {why}\n  Set CKPT_LIB_DIR to the directory holding \
                 libckpt.so, or add the directory holding ckpt.pc (<prefix>/lib/pkgconfig) to \
                 PKG_CONFIG_PATH.\n\n"
            ),
        },
    };
    // An absolute path, so the rpath holds wherever the binaries run from.
    let dir = dir.canonicalize().unwrap_or(dir);
    if !Path::new(&dir).join("libckpt.so").exists() {
        panic!(
            "\n\nckpt: {} (from {origin}) holds no libckpt.so.\n  Set CKPT_LIB_DIR to the directory holding \
             libckpt.so, or PKG_CONFIG_PATH to the one holding its ckpt.pc.\n\n",
            dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=ckpt");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // For crates that depend on this one (`DEP_CKPT_LIB_DIR` in their build scripts).
    println!("cargo:lib_dir={}", dir.display());
}
