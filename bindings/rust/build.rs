// SPDX-License-Identifier: Apache-2.0
//! Finds libckpt for linking: `CKPT_LIB_DIR` if set, otherwise the `libdir` that `pkg-config` reports for
//! `ckpt` (an installed ckpt.pc on `PKG_CONFIG_PATH`). Tests and examples of this crate get an rpath to that
//! directory, so they run without `LD_LIBRARY_PATH`.
//!
//! With the `s3` feature, libckpt_s3 too: from `CKPT_LIB_DIR` (an install puts it beside libckpt), otherwise
//! from the `libdir` of pkg-config's `ckpt-s3`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config_libdir(package: &str) -> Result<PathBuf, String> {
    let output = Command::new("pkg-config")
        .args(["--variable=libdir", package])
        .output()
        .map_err(|e| format!("running pkg-config failed: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "pkg-config found no '{package}' package: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if dir.is_empty() {
        return Err(format!("pkg-config reported an empty libdir for '{package}'"));
    }
    Ok(PathBuf::from(dir))
}

/// The directory holding `lib<name>.so`, from `CKPT_LIB_DIR` or else pkg-config's `package`; absolute, so the
/// rpath holds wherever the binaries run from.
fn find_library(name: &str, package: &str) -> PathBuf {
    let (dir, origin) = match env::var_os("CKPT_LIB_DIR") {
        Some(dir) if !dir.is_empty() => (PathBuf::from(dir), "CKPT_LIB_DIR".to_string()),
        _ => match pkg_config_libdir(package) {
            Ok(dir) => (dir, "pkg-config".to_string()),
            Err(why) => panic!(
                "\n\nckpt: cannot find lib{name}.\n  {why}\n  Set CKPT_LIB_DIR to the directory holding \
                 lib{name}.so, or add the directory holding {package}.pc (<prefix>/lib/pkgconfig) to \
                 PKG_CONFIG_PATH.\n\n"
            ),
        },
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    if !Path::new(&dir).join(format!("lib{name}.so")).exists() {
        panic!(
            "\n\nckpt: {} (from {origin}) holds no lib{name}.so.\n  Set CKPT_LIB_DIR to the directory holding \
             lib{name}.so, or PKG_CONFIG_PATH to the one holding its {package}.pc.{}\n\n",
            dir.display(),
            if name == "ckpt_s3" {
                "\n  (The `s3` feature needs libckpt_s3, which ckpt builds when libcurl and expat are found.)"
            } else {
                ""
            }
        );
    }
    dir
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CKPT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");

    let dir = find_library("ckpt", "ckpt");
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=ckpt");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // For crates that depend on this one (`DEP_CKPT_LIB_DIR` in their build scripts).
    println!("cargo:lib_dir={}", dir.display());

    if env::var_os("CARGO_FEATURE_S3").is_some() {
        let s3_dir = find_library("ckpt_s3", "ckpt-s3");
        if s3_dir != dir {
            println!("cargo:rustc-link-search=native={}", s3_dir.display());
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", s3_dir.display());
        }
        println!("cargo:rustc-link-lib=dylib=ckpt_s3");
    }
}
