//! Generates bindings to nvCOMP's C API with bindgen in dynamic-library mode,
//! so that nothing links against nvCOMP and the library is opened at run time.
//!
//! Headers are looked up, in order, in `NVCOMP_INCLUDE_DIR`, `NVCOMP_HOME/include`,
//! and the `nvidia/libnvcomp/include` folder of the `nvidia-libnvcomp-cu13` (or
//! `-cu12`) wheel installed for the Python named by `PYO3_PYTHON`, the
//! workspace's `.venv`, or `python3`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python_candidates() -> Vec<String> {
    let mut pythons = Vec::new();
    if let Ok(python) = env::var("PYO3_PYTHON") {
        pythons.push(python);
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    for dir in manifest.ancestors() {
        let venv_python = dir.join(".venv/bin/python");
        if venv_python.exists() {
            pythons.push(venv_python.display().to_string());
        }
    }
    pythons.push("python3".into());
    pythons
}

fn wheel_include_dir(python: &str) -> Option<PathBuf> {
    // `nvidia` is a namespace package: look for the wheel's folder on every path entry.
    let script = "import sys, os\nfor p in sys.path:\n    d = os.path.join(p, 'nvidia', 'libnvcomp', 'include')\n    if os.path.isfile(os.path.join(d, 'nvcomp.h')):\n        print(d); break";
    let out = Command::new(python).args(["-c", script]).output().ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

fn include_dir() -> PathBuf {
    for var in ["NVCOMP_INCLUDE_DIR", "NVCOMP_HOME", "PYO3_PYTHON"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if let Ok(dir) = env::var("NVCOMP_INCLUDE_DIR") {
        return PathBuf::from(dir);
    }
    if let Ok(home) = env::var("NVCOMP_HOME") {
        let dir = Path::new(&home).join("include");
        if dir.join("nvcomp.h").exists() {
            return dir;
        }
    }
    for python in python_candidates() {
        if let Some(dir) = wheel_include_dir(&python) {
            return dir;
        }
    }
    panic!(
        "nvCOMP headers not found: set NVCOMP_INCLUDE_DIR, or `pip install nvidia-libnvcomp-cu13` \
         (the README's `make` targets do this in .venv)"
    );
}

fn main() {
    let include = include_dir();
    println!("cargo:rerun-if-changed={}", include.join("nvcomp.h").display());
    println!("cargo:include={}", include.display());
    let bindings = bindgen::Builder::default()
        .header(include.join("nvcomp.h").display().to_string())
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg("-xc")
        .allowlist_function("nvcomp.*")
        .allowlist_type("nvcomp.*|bitcompMode_t")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .dynamic_library_name("NvcompLibrary")
        .dynamic_link_require_all(false)
        .layout_tests(false)
        .generate()
        .expect("bindgen failed on nvCOMP's headers");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(out).expect("cannot write bindings");
}
