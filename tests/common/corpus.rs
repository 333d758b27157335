//! The GPU fuzz corpus (`fuzz/gpu_corpus`): cases `fuzz/gpu_fuzz.py` found,
//! read by the crate's unit tests and by the integration tests.

/// A case of the GPU fuzz corpus (`fuzz/gpu_corpus`): its file name, its
/// batch and the valid batch it was mutated from.
pub(crate) type CorpusCase = (String, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// The cases of the GPU fuzz corpus for `algorithm`, in file name order.
pub(crate) fn gpu_corpus(algorithm: &str) -> Vec<CorpusCase> {
    use base64::prelude::{Engine as _, BASE64_STANDARD};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/gpu_corpus");
    let decode = |v: &serde_json::Value| -> Vec<Vec<u8>> {
        let items = v.as_array().unwrap().iter();
        items
            .map(|b| BASE64_STANDARD.decode(b.as_str().unwrap()).unwrap())
            .collect()
    };
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let case: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        if case["algorithm"] == algorithm {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            cases.push((name, decode(&case["batch"]), decode(&case["valid"])));
        }
    }
    cases.sort();
    cases
}
