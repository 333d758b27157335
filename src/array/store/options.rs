//! Checks of the storage options whose values are durations, counts or
//! booleans, before anything parses them: object_store's parsers name the
//! value but not the option, the HTTP/2 library asserts on a frame size out
//! of its range, and a duration too long for an `Instant` panics where a
//! deadline is computed from it. Every such value is checked here, naming
//! the option; a duration or retry count past its documented maximum
//! ([`MAX_DURATION`], [`MAX_RETRIES`]) is an error too, naming the range,
//! rather than quietly taken as the maximum.

use std::collections::HashMap;
use std::time::Duration;

use crate::array::error::ReadError;

/// The longest duration an option takes (no deadline computed from it
/// overflows); a longer one (`"1e300"` to mean "never") is an error.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most retries of one request (the retries stop at `retry_timeout`
/// anyway); more is an error.
pub const MAX_RETRIES: usize = 1000;

/// Options whose values are durations (object_store's client keys, and
/// this crate's `retry_timeout`).
const DURATIONS: [&str; 7] = [
    "timeout",
    "connect_timeout",
    "read_timeout",
    "pool_idle_timeout",
    "http2_keep_alive_interval",
    "http2_keep_alive_timeout",
    "retry_timeout",
];

/// Options whose values are booleans, in object_store's spellings.
const BOOLEANS: [&str; 14] = [
    "allow_http",
    "allow_invalid_certificates",
    "disable_system_certificates",
    "http1_only",
    "http2_only",
    "http2_keep_alive_while_idle",
    "randomize_addresses",
    "skip_signature",
    "virtual_hosted_style_request",
    "unsigned_payload",
    "s3_express",
    "imdsv1_fallback",
    "disable_tagging",
    "request_payer",
];

/// The frame sizes HTTP/2 allows (RFC 9113, 6.5.2).
const HTTP2_FRAME_SIZES: std::ops::RangeInclusive<u64> = 16_384..=16_777_215;

/// `reason` about option `key` as an error.
fn invalid(key: &str, reason: String) -> ReadError {
    ReadError::Config {
        reason: format!("storage option {key}: {reason}"),
        source: None,
    }
}

/// Parses `1.5s`, `250ms`, `2m`, `1h` (or `ns`, `us`, `min`) or a plain
/// number of seconds: finite, not negative and at most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let units = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("min", 60.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    let (number, scale) = units
        .iter()
        .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or((t, 1.0));
    let seconds = number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|v| v * scale)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("{text:?} is not a duration (e.g. 30s, 250ms, 2m, 1h)"))?;
    // Compared before converting: `Duration::from_secs_f64` panics past its range.
    if seconds > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "{text:?} is longer than the longest duration taken, {} s (7 days)",
            MAX_DURATION.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Whether `value` is one of object_store's spellings of a boolean.
fn is_boolean(value: &str) -> bool {
    let lower = value.trim().to_ascii_lowercase();
    ["1", "true", "on", "yes", "y", "0", "false", "off", "no", "n"].contains(&lower.as_str())
}

/// The duration option `key`'s value `text` means.
pub(super) fn duration(key: &str, text: &str) -> Result<Duration, ReadError> {
    parse_duration(text).map_err(|reason| invalid(key, reason))
}

/// The retry count `text` means: 0 to [`MAX_RETRIES`].
pub(super) fn max_retries(text: &str) -> Result<usize, ReadError> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: a count, however long, compared without overflow.
        return match t.parse::<usize>() {
            Ok(count) if count <= MAX_RETRIES => Ok(count),
            _ => Err(invalid(
                "max_retries",
                format!("{text:?} is more than the most retries taken, {MAX_RETRIES}"),
            )),
        };
    }
    Err(invalid(
        "max_retries",
        format!("{text:?} is not a count (0, 1, 2, ...)"),
    ))
}

/// The bound on metadata documents' size the option `max_metadata_size`
/// of `options` (lower-case keys) gives: a count of bytes, at least 1;
/// [`DEFAULT_MAX_METADATA_SIZE`](crate::array::store::metadata_document::DEFAULT_MAX_METADATA_SIZE) where
/// it is absent.
pub(super) fn max_metadata_size(options: &HashMap<String, String>) -> Result<u64, ReadError> {
    let Some(text) = options.get(MAX_METADATA_SIZE) else {
        return Ok(crate::array::store::metadata_document::DEFAULT_MAX_METADATA_SIZE);
    };
    match text.trim().parse::<u64>() {
        Ok(bytes) if bytes > 0 => Ok(bytes),
        _ => Err(invalid(
            MAX_METADATA_SIZE,
            format!("{text:?} is not a size in bytes (1 to {})", u64::MAX),
        )),
    }
}

/// The option of the bound on metadata documents' size: this crate's, not
/// a store's.
pub(super) const MAX_METADATA_SIZE: &str = "max_metadata_size";

/// `options` (lower-case keys) with every duration checked and written as
/// object_store parses it, and every count and boolean checked.
pub(super) fn checked(options: &HashMap<String, String>) -> Result<HashMap<String, String>, ReadError> {
    let mut checked = options.clone();
    for (key, value) in &mut checked {
        // The S3 builder takes the client's keys with an `aws_` prefix too.
        let name = key.strip_prefix("aws_").unwrap_or(key);
        if DURATIONS.contains(&name) {
            *value = format!("{}ns", duration(key, value)?.as_nanos());
        } else if name == "max_retries" {
            max_retries(value)?;
        } else if key == MAX_METADATA_SIZE {
            max_metadata_size(&HashMap::from([(key.clone(), value.clone())]))?;
        } else if BOOLEANS.contains(&name) {
            if !is_boolean(value) {
                return Err(invalid(key, format!("{value:?} is not true or false")));
            }
        } else if name == "pool_max_idle_per_host" {
            value
                .trim()
                .parse::<usize>()
                .map_err(|_| invalid(key, format!("{value:?} is not a count (0, 1, 2, ...)")))?;
        } else if name == "http2_max_frame_size" {
            match value.trim().parse::<u64>() {
                Ok(size) if HTTP2_FRAME_SIZES.contains(&size) => {}
                _ => {
                    return Err(invalid(
                        key,
                        format!(
                            "{value:?} is not a frame size HTTP/2 allows ({} to {})",
                            HTTP2_FRAME_SIZES.start(),
                            HTTP2_FRAME_SIZES.end()
                        ),
                    ))
                }
            }
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_long_ones_are_refused() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1500000000ns"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20us"), Ok(Duration::from_micros(20)));
        assert_eq!(parse_duration("604800"), Ok(MAX_DURATION));
        for long in ["1e300", "1e19", "1e19s", "1e300m", "999999999h", "604800.5", "169h"] {
            let err = parse_duration(long).expect_err(long);
            assert!(err.contains("604800 s"), "{long}: {err}");
        }
        for bad in [
            "soon",
            "",
            "NaN",
            "nan",
            "inf",
            "-inf",
            "-1",
            "-0.5s",
            "1e400",
            "30 seconds",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_checked_value_names_its_option() {
        let check = |key: &str, value: &str| {
            checked(&HashMap::from([(key.to_string(), value.to_string())])).map(|o| o[key].clone())
        };
        assert_eq!(check("timeout", "1.5").unwrap(), "1500000000ns");
        assert_eq!(check("aws_connect_timeout", "7").unwrap(), "7000000000ns");
        assert_eq!(check("allow_http", "TRUE").unwrap(), "TRUE");
        assert_eq!(check("http2_max_frame_size", "16384").unwrap(), "16384");
        assert_eq!(check("region", "nan").unwrap(), "nan");
        for (key, value) in [
            ("timeout", "NaN"),
            ("read_timeout", "-1"),
            ("retry_timeout", "forever"),
            ("max_retries", "-1"),
            ("max_retries", "1e3"),
            ("max_retries", ""),
            ("allow_http", "maybe"),
            ("aws_skip_signature", "2"),
            ("pool_max_idle_per_host", "-3"),
            ("http2_max_frame_size", "1"),
            ("http2_max_frame_size", "99999999999"),
            ("timeout", "1e300"),
            ("aws_connect_timeout", "1e300"),
            ("retry_timeout", "604801"),
            ("max_retries", "1001"),
            ("max_retries", "99999999999"),
            ("max_retries", "99999999999999999999999"),
            ("max_metadata_size", "0"),
            ("max_metadata_size", "1e9"),
            ("max_metadata_size", "-5"),
        ] {
            let err = check(key, value).expect_err(value);
            assert!(matches!(err, ReadError::Config { .. }), "{err:?}");
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
        assert_eq!(max_retries("1000").unwrap(), MAX_RETRIES);
        assert_eq!(check("max_metadata_size", "4096").unwrap(), "4096");
        let size = |text: &str| max_metadata_size(&HashMap::from([(MAX_METADATA_SIZE.to_string(), text.to_string())]));
        assert_eq!(size(" 4096 ").unwrap(), 4096);
        assert_eq!(
            max_metadata_size(&HashMap::new()).unwrap(),
            crate::array::store::metadata_document::DEFAULT_MAX_METADATA_SIZE
        );
        assert_eq!(max_retries(" 3 ").unwrap(), 3);
    }
}
