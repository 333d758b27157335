//! The store's answers as object_store defines them: ranges of inline and
//! referenced bytes, listings, refused writes.

use super::*;
use object_store::GetRange;

/// A set of an inline key, a range of `file` and the whole of it, and one
/// in a directory.
fn store(file: &std::path::Path) -> ReferenceStore {
    let json = serde_json::json!({
        "a/.zarray": "0123456789",
        "a/0": [file.to_str().unwrap(), 2, 5],
        "a/1": [file.to_str().unwrap()],
        "a/b/c": "x",
    });
    let refs = References::parse(json.to_string().as_bytes()).unwrap();
    ReferenceStore::new(refs, None, &HashMap::new()).unwrap()
}

async fn get(store: &ReferenceStore, key: &str, range: Option<GetRange>) -> object_store::Result<(Bytes, u64)> {
    let options = GetOptions {
        range,
        ..Default::default()
    };
    let got = store.get_opts(&Path::from(key), options).await?;
    let size = got.meta.size;
    Ok((got.bytes().await?, size))
}

#[tokio::test]
async fn keys_read_whole_and_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.bin");
    std::fs::write(&file, b"abcdefghij").unwrap();
    let store = store(&file);
    let bytes = |b: &[u8]| Bytes::copy_from_slice(b);
    assert_eq!(
        get(&store, "a/.zarray", None).await.unwrap(),
        (bytes(b"0123456789"), 10)
    );
    assert_eq!(get(&store, "a/0", None).await.unwrap(), (bytes(b"cdefg"), 5));
    assert_eq!(get(&store, "a/1", None).await.unwrap(), (bytes(b"abcdefghij"), 10));
    let bounded = Some(GetRange::Bounded(1..3));
    assert_eq!(get(&store, "a/0", bounded.clone()).await.unwrap().0, bytes(b"de"));
    assert_eq!(get(&store, "a/.zarray", bounded).await.unwrap().0, bytes(b"12"));
    let suffix = Some(GetRange::Suffix(2));
    assert_eq!(get(&store, "a/0", suffix).await.unwrap().0, bytes(b"fg"));
    assert_eq!(
        get(&store, "a/0", Some(GetRange::Offset(3))).await.unwrap().0,
        bytes(b"fg")
    );
    // Past the referenced bytes, though not past the file.
    assert!(get(&store, "a/0", Some(GetRange::Offset(6))).await.is_err());
    assert!(matches!(
        get(&store, "a/2", None).await,
        Err(object_store::Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn keys_list_by_directory_and_writes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.bin");
    std::fs::write(&file, b"abcdefghij").unwrap();
    let store = store(&file);
    let listed = store.list_with_delimiter(Some(&Path::from("a"))).await.unwrap();
    let mut objects: Vec<_> = listed
        .objects
        .iter()
        .map(|m| (m.location.to_string(), m.size))
        .collect();
    objects.sort();
    let expected = [("a/.zarray", 10), ("a/0", 5), ("a/1", 0)].map(|(k, n)| (k.to_string(), n));
    assert_eq!(objects, expected);
    assert_eq!(listed.common_prefixes, [Path::from("a/b")]);
    let all: Vec<_> = store.list(None).collect().await;
    assert_eq!(all.len(), 4);
    let put = store.put(&Path::from("a/2"), PutPayload::from_static(b"x")).await;
    assert!(matches!(put, Err(object_store::Error::NotSupported { .. })));
}
