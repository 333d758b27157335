//! The `gen` entries of a version-1 kerchunk reference set: references made
//! by templates over the product of ranges, as kerchunk's reference
//! specification defines them (and fsspec's `ReferenceFileSystem` expanded
//! them, with jinja2).
//!
//! ```text
//! { "key": "data/{{i}}.{{j}}", "url": "{{u}}/file_{{i}}.nc",
//!   "offset": "{{(j + 1) * 1000}}", "length": "1000",
//!   "dimensions": { "i": {"start": 0, "stop": 4, "step": 1}, "j": [0, 5, 9] } }
//! ```
//!
//! Each dimension is a range (`start` 0 and `step` 1 unless given) or a list
//! of values; every combination of their values, the first dimension
//! varying slowest, makes one reference: `[url, offset, length]`, or `[url]`
//! where the entry has neither `offset` nor `length` (one without the other
//! is an error). In `{{ ... }}` the dimensions and the set's templates are
//! names; the text is a jinja2 template, of which this reads
//! integers, strings, names, parentheses, unary minus and `+` `-` `*` `//`
//! `%` (`+` joins strings). Anything else is refused with its text, as is
//! a product of more than [`MAX_GENERATED`] references.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Most references the `gen` entries of one set may make: each costs about
/// a hundred bytes, so a set of a billion would take gigabytes before any
/// read.
pub(crate) const MAX_GENERATED: u64 = 1 << 24;

/// A value in a template's expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    Int(i64),
    Text(String),
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Text(text) => f.write_str(text),
        }
    }
}

/// The references of `gens` (the set's `gen` list), with the set's
/// `templates`: `(key, reference value)` pairs as a version-1 `refs` holds
/// them.
pub(crate) fn expand(gens: &[Value], templates: &HashMap<String, String>) -> Result<Vec<(String, Value)>, String> {
    let mut out = Vec::new();
    for (n, gen) in gens.iter().enumerate() {
        let at = |why: String| format!("gen entry {n}: {why}");
        let Value::Object(gen) = gen else {
            return Err(at("not an object".into()));
        };
        let dimensions = dimensions(gen).map_err(at)?;
        let count = dimensions
            .iter()
            .try_fold(1u64, |n, (_, values)| n.checked_mul(values.len() as u64))
            .filter(|n| out.len() as u64 + n <= MAX_GENERATED)
            .ok_or_else(|| at(format!("makes more than {MAX_GENERATED} references")))?;
        let text = |name: &str| match gen.get(name) {
            Some(Value::String(text)) => Ok(Some(text.as_str())),
            None => Ok(None),
            Some(_) => Err(at(format!("{name:?} is not a string"))),
        };
        let (key, url) = match (text("key")?, text("url")?) {
            (Some(key), Some(url)) => (key, url),
            _ => return Err(at("needs a \"key\" and a \"url\"".into())),
        };
        let range = match (text("offset")?, text("length")?) {
            (Some(offset), Some(length)) => Some((offset, length)),
            (None, None) => None,
            _ => return Err(at("has one of \"offset\" and \"length\" without the other".into())),
        };
        let mut names: HashMap<&str, Term> = templates
            .iter()
            .map(|(name, text)| (name.as_str(), Term::Text(text.clone())))
            .collect();
        for i in 0..count {
            // The first dimension varies slowest, as itertools.product's.
            let mut rest = i;
            for (name, values) in dimensions.iter().rev() {
                let len = values.len() as u64;
                names.insert(name, values[(rest % len) as usize].clone());
                rest /= len;
            }
            let render = |text: &str| render(text, &names).map_err(at);
            let url = Value::String(render(url)?);
            let reference = match range {
                Some((offset, length)) => {
                    let number = |what: &str, text: &str| {
                        let rendered = render(text)?;
                        rendered
                            .trim()
                            .parse::<u64>()
                            .map_err(|_| at(format!("{what} {rendered:?} is not a non-negative integer")))
                    };
                    let (offset, length) = (number("offset", offset)?, number("length", length)?);
                    Value::Array(vec![url, offset.into(), length.into()])
                }
                None => Value::Array(vec![url]),
            };
            out.push((render(key)?, reference));
        }
    }
    Ok(out)
}

/// The dimensions of one `gen` entry, in order, each with its values.
fn dimensions(gen: &Map<String, Value>) -> Result<Vec<(String, Vec<Term>)>, String> {
    let Some(Value::Object(dimensions)) = gen.get("dimensions") else {
        return Err("needs \"dimensions\", an object".into());
    };
    dimensions
        .iter()
        .map(|(name, dimension)| {
            let values = match dimension {
                Value::Array(values) => values.iter().map(term).collect::<Result<Vec<_>, _>>(),
                Value::Object(range) => range_values(range),
                _ => Err("is neither a list nor a range".into()),
            };
            values
                .map(|v| (name.clone(), v))
                .map_err(|why| format!("dimension {name:?} {why}"))
        })
        .collect()
}

/// The values of a range dimension (`{"start", "stop", "step"}`), as
/// Python's `range`.
fn range_values(range: &Map<String, Value>) -> Result<Vec<Term>, String> {
    let int = |name: &str, default: Option<i64>| match range.get(name) {
        Some(v) => v.as_i64().ok_or_else(|| format!("{name} is not an integer")),
        None => default.ok_or_else(|| format!("needs {name:?}")),
    };
    let (start, stop, step) = (int("start", Some(0))?, int("stop", None)?, int("step", Some(1))?);
    if step == 0 {
        return Err("has a step of 0".into());
    }
    let len = if step > 0 {
        (i128::from(stop) - i128::from(start) + i128::from(step) - 1) / i128::from(step)
    } else {
        (i128::from(start) - i128::from(stop) - i128::from(step) - 1) / -i128::from(step)
    };
    let len = u64::try_from(len.max(0)).unwrap_or(u64::MAX);
    if len > MAX_GENERATED {
        return Err(format!("has more than {MAX_GENERATED} values"));
    }
    Ok((0..len as i64).map(|k| Term::Int(start + k * step)).collect())
}

/// A list dimension's value.
fn term(value: &Value) -> Result<Term, String> {
    match value {
        Value::String(text) => Ok(Term::Text(text.clone())),
        Value::Number(n) => n
            .as_i64()
            .map(Term::Int)
            .ok_or_else(|| format!("has the value {n}, not an integer")),
        other => Err(format!("has the value {other}, neither a string nor an integer")),
    }
}

/// `text` with each `{{ expression }}` replaced by its value.
fn render(text: &str, names: &HashMap<&str, Term>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let end = rest[start..]
            .find("}}")
            .ok_or_else(|| format!("an unclosed {{{{ in {text:?}"))?;
        let expression = &rest[start + 2..start + end];
        let value = Parser::new(expression, names)
            .whole()
            .map_err(|why| format!("{{{{{expression}}}}} in {text:?}: {why}"))?;
        out.push_str(&rest[..start]);
        out.push_str(&value.to_string());
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A recursive-descent evaluator of one expression.
struct Parser<'a> {
    tokens: Vec<&'a str>,
    at: usize,
    names: &'a HashMap<&'a str, Term>,
}

impl<'a> Parser<'a> {
    fn new(expression: &'a str, names: &'a HashMap<&'a str, Term>) -> Self {
        Self {
            tokens: tokens(expression),
            at: 0,
            names,
        }
    }

    /// The expression's value, all of it read.
    fn whole(mut self) -> Result<Term, String> {
        let value = self.sum()?;
        match self.tokens.get(self.at) {
            None => Ok(value),
            Some(token) => Err(format!("unexpected {token:?}")),
        }
    }

    fn peek(&self) -> Option<&'a str> {
        self.tokens.get(self.at).copied()
    }

    fn sum(&mut self) -> Result<Term, String> {
        let mut value = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            self.at += 1;
            let right = self.product()?;
            value = match (op, value, right) {
                ("+", Term::Text(a), Term::Text(b)) => Term::Text(a + &b),
                (op, Term::Int(a), Term::Int(b)) => Term::Int(arithmetic(op, a, b)?),
                (op, a, b) => return Err(format!("{a:?} {op} {b:?}")),
            };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<Term, String> {
        let mut value = self.unary()?;
        while let Some(op @ ("*" | "//" | "%")) = self.peek() {
            self.at += 1;
            value = match (value, self.unary()?) {
                (Term::Int(a), Term::Int(b)) => Term::Int(arithmetic(op, a, b)?),
                (a, b) => return Err(format!("{a:?} {op} {b:?}")),
            };
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<Term, String> {
        if self.peek() == Some("-") {
            self.at += 1;
            return match self.unary()? {
                Term::Int(n) => n.checked_neg().map(Term::Int).ok_or_else(|| "overflow".into()),
                text => Err(format!("-{text:?}")),
            };
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Term, String> {
        let token = self.peek().ok_or("an expression ends early")?;
        self.at += 1;
        if token == "(" {
            let value = self.sum()?;
            if self.peek() != Some(")") {
                return Err("an unclosed (".into());
            }
            self.at += 1;
            return Ok(value);
        }
        if let Some(text) = token
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .or_else(|| token.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')))
        {
            return Ok(Term::Text(text.to_string()));
        }
        if token.bytes().all(|b| b.is_ascii_digit()) {
            return token.parse().map(Term::Int).map_err(|_| format!("{token} overflows"));
        }
        self.names
            .get(token)
            .cloned()
            .ok_or_else(|| format!("{token:?} is neither a name nor what this reader evaluates"))
    }
}

/// `a op b` of integers, as Python's (`//` and `%` round toward minus
/// infinity); overflow and division by zero are errors.
fn arithmetic(op: &str, a: i64, b: i64) -> Result<i64, String> {
    let value = match op {
        "+" => a.checked_add(b),
        "-" => a.checked_sub(b),
        "*" => a.checked_mul(b),
        "//" if b != 0 => a.checked_div(b).map(|q| {
            let inexact = a.checked_rem(b).is_some_and(|r| r != 0);
            if inexact && (a < 0) != (b < 0) {
                q - 1
            } else {
                q
            }
        }),
        "%" if b != 0 => a
            .checked_rem(b)
            .map(|r| if r != 0 && (r < 0) != (b < 0) { r + b } else { r }),
        _ => return Err(format!("{a} {op} {b}")),
    };
    value.ok_or_else(|| format!("{a} {op} {b} overflows"))
}

/// The tokens of an expression: integers, names, quoted strings, operators
/// and parentheses; anything else is one token of its own, which the
/// parser then refuses.
fn tokens(expression: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = expression.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b.is_ascii_alphanumeric() || b == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
        } else if b == b'"' || b == b'\'' {
            i += 1;
            while i < bytes.len() && bytes[i] != b {
                i += 1;
            }
            i = (i + 1).min(bytes.len());
        } else if expression[i..].starts_with("//") {
            i += 2;
        } else {
            i += expression[i..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(&expression[start..i]);
    }
    out
}

#[cfg(test)]
#[path = "reference_gen_tests.rs"]
mod tests;
