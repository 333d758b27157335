//! Where the loader looks for nvCOMP, and what it reports. One test: the
//! loader's state is per process, and its steps depend on each other.

use std::path::Path;

#[test]
fn configured_path_comes_second_and_only_until_opened() {
    // The configured file comes right after NVCOMP_LIBRARY.
    let first = Path::new("/nonexistent/nvcomp-sys-test/libnvcomp.so.6");
    std::env::set_var("NVCOMP_LIBRARY", "/nonexistent/nvcomp-library-variable.so");
    nvcomp_sys::set_library_path(first).unwrap();
    let candidates = nvcomp_sys::candidates();
    assert_eq!(candidates[0], Path::new("/nonexistent/nvcomp-library-variable.so"));
    assert_eq!(candidates[1], first);
    std::env::remove_var("NVCOMP_LIBRARY");
    assert_eq!(nvcomp_sys::candidates()[0], first);

    // Opening tries it first: it is missing, so either a later candidate
    // (a wheel or system nvCOMP) opened or the error names it first.
    match nvcomp_sys::library_path() {
        Ok(path) => {
            assert_ne!(path, first);
            let properties = nvcomp_sys::library_properties().unwrap();
            assert_eq!(properties.version / 1000, nvcomp_sys::NVCOMP_VER_MAJOR);
        }
        Err(e) => {
            assert_eq!(e.tried[0], (first.display().to_string(), "no such file".to_string()));
            assert!(e.to_string().contains("nvidia-libnvcomp-cu13"), "{e}");
        }
    }

    // Setting a path once nvCOMP was looked for is an error naming what was opened.
    let err = nvcomp_sys::set_library_path("/elsewhere/libnvcomp.so.6").unwrap_err();
    assert_eq!(err.opened.as_deref(), nvcomp_sys::library_path().ok());
}
