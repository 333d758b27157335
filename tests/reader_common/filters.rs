//! Arrays of filter chains written by zarrs, for the reader's filter tests:
//! big-endian `bytes` and v2 data types of every multi-byte type,
//! `transpose` (composed, 2-D and 3-D), numcodecs `delta` of integers and
//! floats, `bitround`, numcodecs `fixedscaleoffset`, zarr v2 `order: "F"`,
//! together and over blosc and sharding; and chains whose filters the reader
//! leaves to zarrs. zarrs, the reference here, fails on a transpose over
//! delta (v3, or v2 order F): the Python tests compare those with
//! zarr-python.

use std::sync::Arc;

use object_store::ObjectStore;
use serde_json::{json, Value};
use zarrs::array::Array;

use super::*;

/// `dtype` stored big endian in zarr v2 (its `dtype` string starting `>`).
fn big_endian_v2(dtype: &Dtype) -> Dtype {
    Dtype {
        v2: Box::leak(format!(">{}", &dtype.v2[1..]).into_boxed_str()),
        fill_v3: dtype.fill_v3.clone(),
        fill_v2: dtype.fill_v2.clone(),
        ..*dtype
    }
}

fn find(v3: &str) -> Dtype {
    dtypes().into_iter().find(|d| d.v3 == v3).expect("a tested data type")
}

fn big_bytes() -> Value {
    json!({"name": "bytes", "configuration": {"endian": "big"}})
}

fn zstd() -> Value {
    json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}})
}

fn transpose(order: &[usize]) -> Value {
    json!({"name": "transpose", "configuration": {"order": order}})
}

fn delta(dtype: &Dtype) -> Value {
    json!({"name": "numcodecs.delta", "configuration": {"dtype": dtype.v2}})
}

fn blosc(typesize: usize) -> Value {
    json!({"name": "blosc", "configuration": {
        "cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": typesize, "blocksize": 0}})
}

/// One filter case: a description, the array's data type, its shape and
/// chunk shape, its metadata, whether the reader batches it, and its
/// elements where they are not [`data`]'s (of a number of elements and a seed).
struct Case {
    what: String,
    dtype: Dtype,
    shape: &'static [u64],
    chunks: &'static [u64],
    metadata: Value,
    batched: bool,
    values: Option<Values>,
}

/// Makes the elements of an array: their number and a seed give the bytes.
type Values = Box<dyn Fn(usize, u64) -> Vec<u8>>;

fn v3(what: &str, dtype: Dtype, (shape, chunks): (&'static [u64], &'static [u64]), codecs: Value) -> Case {
    Case {
        what: format!("v3 {what} {}", dtype.v3),
        metadata: v3_metadata(shape, chunks, &dtype, codecs),
        dtype,
        shape,
        chunks,
        batched: true,
        values: None,
    }
}

fn v2(what: &str, dtype: Dtype, filters: Value, compressor: Value, order: &str) -> Case {
    let (shape, chunks): (&[u64], &[u64]) = (&[20, 28], &[10, 14]);
    let mut metadata = v2_metadata(shape, chunks, &dtype, compressor, order);
    metadata["filters"] = filters;
    Case {
        what: format!("v2 {what} {}", dtype.v2),
        dtype,
        shape,
        chunks,
        metadata,
        batched: true,
        values: None,
    }
}

const PLANE: (&[u64], &[u64]) = (&[20, 28], &[10, 14]);
const CUBE: (&[u64], &[u64]) = (&[9, 10, 11], &[4, 5, 3]);

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let multi_byte: Vec<Dtype> = dtypes().into_iter().filter(|d| d.size > 1).collect();
    for dtype in &multi_byte {
        let dtype = || find(dtype.v3);
        cases.push(v3("big endian", dtype(), PLANE, json!([big_bytes(), zstd()])));
        let zstd_v2 = json!({"id": "zstd", "level": 1});
        cases.push(v2("big endian", big_endian_v2(&dtype()), json!(null), zstd_v2, "C"));
    }
    for v3_name in ["int32", "float64", "uint8", "complex64"] {
        cases.push(v3(
            "transpose 1 0",
            find(v3_name),
            PLANE,
            json!([transpose(&[1, 0]), bytes_codec(), zstd()]),
        ));
        cases.push(v3(
            "transpose 2 0 1 + crc32c",
            find(v3_name),
            CUBE,
            json!([transpose(&[2, 0, 1]), bytes_codec(), {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}]),
        ));
    }
    cases.push(v3(
        "two transposes, big endian",
        find("uint16"),
        CUBE,
        json!([transpose(&[1, 2, 0]), transpose(&[0, 2, 1]), big_bytes(), zstd()]),
    ));
    for v3_name in ["int8", "uint16", "int32", "int64", "float32", "float64"] {
        let dtype = find(v3_name);
        cases.push(v3(
            "delta",
            find(v3_name),
            PLANE,
            json!([delta(&dtype), bytes_codec(), zstd()]),
        ));
        // zarrs fails on a transpose over delta (an indexer error): the
        // Python tests compare those chains with zarr-python.
        // The edge chunks of CUBE are padded with the fill value: float32's
        // NaN makes NaN sums, whose bits the device matches to the host's.
        cases.push(v3(
            "delta, big endian, blosc",
            find(v3_name),
            CUBE,
            json!([delta(&dtype), big_bytes(), blosc(dtype.size)]),
        ));
        cases.push(v3(
            "delta over padded edge chunks",
            find(v3_name),
            CUBE,
            json!([delta(&dtype), bytes_codec(), zstd()]),
        ));
        cases.push(v3(
            "transpose, big endian, blosc",
            find(v3_name),
            CUBE,
            json!([transpose(&[2, 1, 0]), big_bytes(), blosc(dtype.size)]),
        ));
        let v2_delta = json!([{"id": "delta", "dtype": dtype.v2, "astype": dtype.v2}]);
        let zstd_v2 = json!({"id": "zstd", "level": 1});
        // zarrs fails on v2 order F over delta (its transpose over a filter
        // registered by this crate): the Python tests compare that case with
        // zarr-python.
        cases.push(v2("delta", find(v3_name), v2_delta, zstd_v2, "C"));
        if dtype.size > 1 {
            let big = big_endian_v2(&dtype);
            let big_delta = json!([{"id": "delta", "dtype": big.v2}]);
            let blosc_v2 = json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0});
            cases.push(v2("big-endian delta, blosc", big, big_delta, blosc_v2, "C"));
        }
    }
    cases.push(v3(
        "bitround",
        find("float32"),
        PLANE,
        json!([{"name": "bitround", "configuration": {"keepbits": 9}}, bytes_codec(), zstd()]),
    ));
    cases.push(v2(
        "bitround, delta",
        find("float32"),
        json!([{"id": "bitround", "keepbits": 9}, {"id": "delta", "dtype": "<f4"}]),
        json!({"id": "zstd", "level": 1}),
        "C",
    ));
    cases.push(v2(
        "order F",
        find("complex128"),
        json!(null),
        json!({"id": "gzip", "level": 1}),
        "F",
    ));
    let int32 = find("int32");
    cases.push(v3(
        "sharded: delta, big endian",
        find("int32"),
        PLANE,
        json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [5, 7],
            "codecs": [delta(&int32), big_bytes(), zstd()],
            "index_codecs": [bytes_codec(), {"name": "crc32c"}], "index_location": "end"}}]),
    ));
    cases.push(v3(
        "sharded: transpose, big endian",
        find("float64"),
        PLANE,
        json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [5, 7],
            "codecs": [transpose(&[1, 0]), big_bytes(), blosc(8)],
            "index_codecs": [bytes_codec(), {"name": "crc32c"}], "index_location": "end"}}]),
    ));
    // Left to zarrs: a delta before a transpose sums in the other order; a
    // narrowing astype; a filter of no batched decoder.
    let mut zarrs = vec![
        v3(
            "delta before transpose",
            find("int32"),
            PLANE,
            json!([delta(&int32), transpose(&[1, 0]), bytes_codec(), zstd()]),
        ),
        v3(
            "delta astype int16",
            find("int32"),
            PLANE,
            json!([{"name": "numcodecs.delta", "configuration": {"dtype": "<i4", "astype": "<i2"}}, bytes_codec(), zstd()]),
        ),
        v2(
            "delta after quantize",
            find("float64"),
            json!([{"id": "quantize", "digits": 3, "dtype": "<f8"}, {"id": "delta", "dtype": "<f8"}]),
            json!({"id": "zstd", "level": 1}),
            "C",
        ),
    ];
    zarrs.iter_mut().for_each(|case| case.batched = false);
    cases.extend(zarrs);
    cases.extend(scale_offset_cases());
    cases
}

/// numcodecs `fixedscaleoffset` of `scale` and `offset`, to `dtype` (`<f4`
/// or `<f8`) from `astype`: its v2 filter, or its v3 codec's configuration.
fn fixedscaleoffset(scale: f64, offset: f64, dtype: &str, astype: &str) -> Value {
    json!({"scale": scale, "offset": offset, "dtype": dtype, "astype": astype})
}

/// Floats `offset + k / scale` of `size` bytes for pseudo-random integers
/// `k` below `2^bits` (negative too where `signed`): values numcodecs'
/// encoding stores exactly, whose decoding zarrs computes exactly as
/// numcodecs does for scales that are powers of two (zarrs holds `scale`
/// and `offset` as float32 and widens the integers through float32, so
/// other cases differ; the Python tests compare those with numcodecs).
fn scaled(size: usize, (scale, offset): (f64, f64), bits: u32, signed: bool) -> Values {
    Box::new(move |elements, seed| {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..elements)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x >> (64 - bits)) as i64;
                let k = if signed { k - (1 << (bits - 1)) } else { k };
                let x = offset + k as f64 / scale;
                if size == 8 {
                    x.to_le_bytes().to_vec()
                } else {
                    (x as f32).to_le_bytes().to_vec()
                }
            })
            .collect()
    })
}

/// `fixedscaleoffset` chains: integer types of every width under floats of
/// both widths, little and big endian, v2 and v3, with transpose, blosc and
/// sharding; and those left to zarrs. (zarrs opens no signed one-byte
/// `astype`, nor `|u1`: the one-byte case is spelled `u1`.)
fn scale_offset_cases() -> Vec<Case> {
    let fso = |config: Value| json!({"name": "numcodecs.fixedscaleoffset", "configuration": config});
    let v2_fso = |config: Value| {
        let mut filter = config;
        filter["id"] = json!("fixedscaleoffset");
        json!([filter])
    };
    let mut cases = vec![
        (
            v3(
                "fixedscaleoffset u2",
                find("float32"),
                CUBE,
                json!([fso(fixedscaleoffset(4.0, -1.5, "<f4", "<u2")), bytes_codec(), zstd()]),
            ),
            scaled(4, (4.0, -1.5), 16, false),
            -1.5 + 3.0 / 4.0,
        ),
        (
            v3(
                "fixedscaleoffset i2, transpose",
                find("float32"),
                PLANE,
                json!([
                    transpose(&[1, 0]),
                    fso(fixedscaleoffset(0.5, 3.0, "<f4", "<i2")),
                    bytes_codec(),
                    zstd()
                ]),
            ),
            scaled(4, (0.5, 3.0), 16, true),
            3.0 + 3.0 / 0.5,
        ),
        (
            v3(
                "fixedscaleoffset i4, big endian, blosc",
                find("float64"),
                CUBE,
                json!([fso(fixedscaleoffset(0.25, 7.0, "<f8", "<i4")), big_bytes(), blosc(4)]),
            ),
            scaled(8, (0.25, 7.0), 20, true),
            7.0 + 3.0 / 0.25,
        ),
        (
            v3(
                "fixedscaleoffset u8, big endian",
                find("float64"),
                PLANE,
                json!([fso(fixedscaleoffset(2.0, -100.0, "<f8", "<u8")), big_bytes(), zstd()]),
            ),
            scaled(8, (2.0, -100.0), 20, false),
            -100.0 + 3.0 / 2.0,
        ),
        (
            v3(
                "sharded: fixedscaleoffset u2, big endian",
                find("float64"),
                PLANE,
                json!([{"name": "sharding_indexed", "configuration": {
                    "chunk_shape": [5, 7],
                    "codecs": [fso(fixedscaleoffset(16.0, 0.5, "<f8", "<u2")), big_bytes(), zstd()],
                    "index_codecs": [bytes_codec(), {"name": "crc32c"}], "index_location": "end"}}]),
            ),
            scaled(8, (16.0, 0.5), 16, false),
            0.5 + 3.0 / 16.0,
        ),
        (
            v2(
                "fixedscaleoffset i2, blosc",
                find("float64"),
                v2_fso(fixedscaleoffset(8.0, -2.0, "<f8", "<i2")),
                json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}),
                "C",
            ),
            scaled(8, (8.0, -2.0), 16, true),
            -2.0 + 3.0 / 8.0,
        ),
        (
            v2(
                "fixedscaleoffset u1, order F",
                find("float32"),
                v2_fso(fixedscaleoffset(1.0, 0.25, "<f4", "u1")),
                json!({"id": "zstd", "level": 1}),
                "F",
            ),
            scaled(4, (1.0, 0.25), 8, false),
            0.25 + 3.0 / 1.0,
        ),
    ];
    // Left to zarrs: a float astype, and a delta besides.
    let mut zarrs = vec![
        (
            v3(
                "fixedscaleoffset f4 astype",
                find("float32"),
                PLANE,
                json!([fso(fixedscaleoffset(4.0, 1.0, "<f4", "<f4")), bytes_codec(), zstd()]),
            ),
            scaled(4, (4.0, 1.0), 12, false),
            1.0 + 3.0 / 4.0,
        ),
        (
            v2(
                "fixedscaleoffset with delta",
                find("float32"),
                json!([{"id": "delta", "dtype": "<f4"}, {"id": "fixedscaleoffset", "scale": 4.0, "offset": 1.0, "dtype": "<f4", "astype": "<u2"}]),
                json!({"id": "zstd", "level": 1}),
                "C",
            ),
            scaled(4, (4.0, 1.0), 12, false),
            1.0 + 3.0 / 4.0,
        ),
    ];
    zarrs.iter_mut().for_each(|(case, _, _)| case.batched = false);
    cases.extend(zarrs);
    // A fill value the filter stores exactly: zarrs' partial decoder gives
    // a missing chunk's elements as the fill value encoded and decoded
    // again (a NaN fill reads as `offset` there, as NaN in whole reads).
    cases
        .into_iter()
        .map(|(mut case, values, fill)| {
            case.metadata["fill_value"] = json!(fill);
            Case {
                values: Some(values),
                ..case
            }
        })
        .collect()
}

/// Every case written into `store`: the array, its description, and
/// whether the reader batches it.
pub(crate) async fn filter_arrays(store: &Arc<dyn ObjectStore>) -> Vec<(Array<Store>, String, bool)> {
    let mut arrays = Vec::new();
    for (i, case) in cases().into_iter().enumerate() {
        let path = format!("filters/{i}");
        let array = match &case.values {
            Some(values) => write_array_with(store, &path, &case.metadata, |n| values(n, i as u64)).await,
            None => write_array(store, &path, &case.metadata, &case.dtype, i as u64).await,
        };
        assert_eq!(array.shape(), case.shape, "{}", case.what);
        let what = format!("{} {:?}/{:?}", case.what, case.shape, case.chunks);
        arrays.push((array, what, case.batched));
    }
    arrays
}
