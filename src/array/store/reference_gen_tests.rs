use serde_json::json;

use super::*;

fn expanded(gen: Value, templates: &[(&str, &str)]) -> Result<Vec<(String, Value)>, String> {
    let templates = templates.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    expand(&[gen], &templates)
}

#[test]
fn ranges_and_lists_make_every_combination_the_first_slowest() {
    let gen = json!({
        "key": "data/{{i}}.{{j}}",
        "url": "{{u}}/file_{{i}}.nc",
        "offset": "{{(j + 1) * 1000}}",
        "length": "{{ 10 * (i + 1) }}",
        "dimensions": {"i": {"stop": 2}, "j": [0, 5]},
    });
    let got = expanded(gen, &[("u", "s3://bucket/run")]).unwrap();
    let want = vec![
        ("data/0.0", json!(["s3://bucket/run/file_0.nc", 1000, 10])),
        ("data/0.5", json!(["s3://bucket/run/file_0.nc", 6000, 10])),
        ("data/1.0", json!(["s3://bucket/run/file_1.nc", 1000, 20])),
        ("data/1.5", json!(["s3://bucket/run/file_1.nc", 6000, 20])),
    ];
    let want: Vec<(String, Value)> = want.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    assert_eq!(got, want);
}

#[test]
fn whole_file_references_steps_strings_and_python_arithmetic() {
    let gen = json!({
        "key": "{{name + '/' + name}}/{{ i // 3 }}.{{ i % 3 }}.{{ -i // 4 }}",
        "url": "f{{i}}",
        "dimensions": {"i": {"start": 7, "stop": 0, "step": -3}, "name": ["a"]},
    });
    let got = expanded(gen, &[]).unwrap();
    let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    // i = 7, 4, 1; Python: -7 // 4 == -2, -4 // 4 == -1, -1 // 4 == -1.
    assert_eq!(keys, ["a/a/2.1.-2", "a/a/1.1.-1", "a/a/0.1.-1"]);
    assert_eq!(got[0].1, json!(["f7"]));
}

#[test]
fn what_is_not_read_is_refused_with_its_text() {
    let cases = [
        (
            json!({"key": "k{{i}}", "url": "u", "dimensions": {"i": {"stop": 2}}, "offset": "1"}),
            "without the other",
        ),
        (
            json!({"key": "k{{i | upper}}", "url": "u", "dimensions": {"i": [1]}}),
            "\"|\"",
        ),
        (
            json!({"key": "k{{i / 2}}", "url": "u", "dimensions": {"i": [1]}}),
            "\"/\"",
        ),
        (
            json!({"key": "k{{nope}}", "url": "u", "dimensions": {"i": [1]}}),
            "\"nope\"",
        ),
        (
            json!({"key": "k{{i // 0}}", "url": "u", "dimensions": {"i": [1]}}),
            "1 // 0",
        ),
        (
            json!({"key": "k", "url": "u", "dimensions": {"i": {"stop": 2, "step": 0}}}),
            "step of 0",
        ),
        (json!({"key": "k{{i", "url": "u", "dimensions": {"i": [1]}}), "unclosed"),
        (
            json!({"key": "k", "url": "u", "offset": "{{'x'}}", "length": "1", "dimensions": {"i": [1]}}),
            "\"x\"",
        ),
        (json!({"url": "u", "dimensions": {"i": [1]}}), "\"key\""),
        (json!({"key": "k", "url": "u"}), "\"dimensions\""),
        (
            json!({"key": "k", "url": "u", "dimensions": {"i": {"stop": 1 << 20}, "j": {"stop": 1 << 20}}}),
            "more than",
        ),
        (
            json!({"key": "k", "url": "u", "dimensions": {"i": {"stop": i64::MAX}}}),
            "more than",
        ),
    ];
    for (gen, why) in cases {
        let err = expanded(gen.clone(), &[]).expect_err(&gen.to_string());
        assert!(err.contains(why), "{gen}: {err}");
        assert!(err.starts_with("gen entry 0: "), "{err}");
    }
}
