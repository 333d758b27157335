//! The committed bindings (`src/bindings.rs`) are what bindgen generates from
//! nvCOMP's headers today.
//!
//! Headers are looked up in `NVCOMP_INCLUDE_DIR`, `NVCOMP_HOME/include`, then
//! the `nvidia/libnvcomp/include` folder of the `nvidia-libnvcomp-cu13` wheel
//! of the Python named by `PYO3_PYTHON`, the workspace's `.venv` or `python3`.
//! Without libclang or headers the test skips, printing why.
//!
//! `NVCOMP_SYS_WRITE_BINDINGS=1` rewrites the committed file instead of
//! comparing (`scripts/regenerate-bindings.sh`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python_candidates() -> Vec<PathBuf> {
    let mut pythons: Vec<PathBuf> = env::var_os("PYO3_PYTHON").map(PathBuf::from).into_iter().collect();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    pythons.extend(
        manifest
            .ancestors()
            .map(|dir| dir.join(".venv/bin/python"))
            .filter(|p| p.exists()),
    );
    pythons.push("python3".into());
    pythons
}

fn wheel_include_dir(python: &Path) -> Option<PathBuf> {
    // `nvidia` is a namespace package: look for the wheel's folder on every path entry.
    let script = "import sys, os\nfor p in sys.path:\n    d = os.path.join(p, 'nvidia', 'libnvcomp', 'include')\n    if os.path.isfile(os.path.join(d, 'nvcomp.h')):\n        print(d); break";
    let out = Command::new(python).args(["-c", script]).output().ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

fn include_dir() -> Option<PathBuf> {
    if let Some(dir) = env::var_os("NVCOMP_INCLUDE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = env::var_os("NVCOMP_HOME") {
        let dir = Path::new(&home).join("include");
        if dir.join("nvcomp.h").exists() {
            return Some(dir);
        }
    }
    python_candidates().iter().find_map(|python| wheel_include_dir(python))
}

fn generate(include: &Path) -> Result<String, bindgen::BindgenError> {
    let bindings = bindgen::Builder::default()
        .header(include.join("nvcomp.h").display().to_string())
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg("-xc")
        .allowlist_function("nvcomp.*")
        .allowlist_type("nvcomp.*|bitcompMode_t")
        .allowlist_var("NVCOMP_VER_(MAJOR|MINOR|PATCH)")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .dynamic_library_name("NvcompLibrary")
        .dynamic_link_require_all(false)
        .layout_tests(false)
        .generate()?;
    Ok(bindings.to_string())
}

#[test]
fn committed_bindings_match_the_headers() {
    let Some(include) = include_dir() else {
        eprintln!("skipped: nvCOMP headers not found (set NVCOMP_INCLUDE_DIR or `pip install nvidia-libnvcomp-cu13`)");
        return;
    };
    if let Err(why) = clang_sys::load() {
        eprintln!("skipped: bindgen needs libclang (`apt-get install libclang-dev`): {why}");
        return;
    }
    let generated = generate(&include).expect("bindgen failed on nvCOMP's headers");
    let committed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bindings.rs");
    if env::var_os("NVCOMP_SYS_WRITE_BINDINGS").is_some() {
        std::fs::write(&committed_path, &generated).expect("cannot write src/bindings.rs");
        eprintln!("wrote {}", committed_path.display());
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).expect("src/bindings.rs is missing");
    assert!(
        committed == generated,
        "src/bindings.rs differs from the bindings of the headers in {}: run scripts/regenerate-bindings.sh",
        include.display()
    );
}
