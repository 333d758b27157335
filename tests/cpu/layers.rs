//! The crate's layering: no module of `src/` refers to a module of a higher
//! layer (see the crate documentation in `src/lib.rs`), and modules of one
//! layer refer to each other without cycles; of the siblings on the array core,
//! the reader never refers to the writer and the writer names few of the reader's
//! items.
//!
//! A codec's module ([`CODECS`]) holds its parts of several layers: each
//! of its submodules is placed on its own, as `codec::part`.
//!
//! Every `crate::X` path in code (comments and literals skipped; `use
//! crate::{a, b}` groups, `super::` paths that climb to the crate root, and
//! names the crate root re-exports, such as `crate::Error`, resolved to their
//! module) is checked against [`LAYERS`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first; a module may refer to its own layer and the
/// ones below.
const LAYERS: &[&[&str]] = &[
    &[
        "error",
        "builder",
        "batch",
        "limits",
        "fork",
        "host_memory",
        "profile",
        "pool",
    ],
    &["format", "blosc", "blosc::format", "blosc::format_tests"],
    &["algorithm"],
    &["cpu", "blosc::cpu"],
    &["cuda"],
    &["codec"],
    &["zarrs_codec", "data_types", "zarrs_plugins"],
    &["array", "blosc::plan", "blosc::plan_tests"],
    &["reader", "writer"],
];

/// The modules of one codec whose parts lie in several layers (its format,
/// its CPU decoder, its GPU plan): their submodules are placed one by one.
const CODECS: &[&str] = &["blosc"];

/// The module a path names, from its segments after the crate root: the
/// first, or for a codec of [`CODECS`] the first two (`blosc::format`).
fn module_named<'a>(mut segments: impl Iterator<Item = &'a str>) -> String {
    let first = segments.next().unwrap_or_default();
    match segments.next() {
        Some(part) if CODECS.contains(&first) && !part.is_empty() => format!("{first}::{part}"),
        _ => first.to_string(),
    }
}

/// One reference of a file to a top-level module.
#[derive(Debug)]
struct Reference {
    file: PathBuf,
    line: usize,
    from: String,
    to: String,
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with comments, string and char literals blanked to spaces (line
/// breaks kept, so that offsets keep their line numbers).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (!ident_byte(b, i) || (b[i - 1] == b'b' && !ident_byte(b, i - 1)))
        {
            // A raw string r"..." or r#"..."# (or br"...").
            let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i = (i + close.len()).min(b.len());
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) is left.
            let end = if b.get(i + 1) == Some(&b'\\') {
                // The escaped character may itself be a quote: '\''.
                b[i + 3..].iter().position(|c| *c == b'\'').map(|p| i + 3 + p)
            } else {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len)
            };
            match end {
                Some(end) => i = end + 1,
                None => {
                    i += 1;
                    continue;
                }
            }
        } else {
            i += 1;
            continue;
        }
        blank(&mut out, start, i);
    }
    String::from_utf8(out).unwrap()
}

/// Whether the byte before `i` continues an identifier (so `b[i]` does not
/// start a token).
fn ident_byte(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The identifier at the start of `s` (after blanks).
fn ident(s: &str) -> &str {
    let s = s.trim_start();
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first names of the top-level items of a `{a, b::c, d::{e}}` group
/// starting at `s` (just after its `{`).
fn group_heads(s: &str) -> Vec<&str> {
    let mut heads = vec![ident(s)];
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => heads.push(ident(&s[i + 1..])),
            _ => {}
        }
    }
    heads.retain(|h| !h.is_empty());
    heads
}

/// The byte ranges of the bodies of inline modules (`mod tests { ... }`),
/// where `super::` climbs one level less far.
fn inline_mod_bodies(code: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = code.as_bytes();
    let mut bodies = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if ident_byte(bytes, at) {
            continue;
        }
        let name = ident(&code[at + 4..]);
        let after = code[at + 4..].trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        bodies.push(open..open + i);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    bodies
}

/// Names the crate root re-exports (`pub use module::{A, B}`), with their module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let code = code_only(lib);
    let mut names = BTreeMap::new();
    for statement in code.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let head = ident(path);
        let rest = path.trim_start()[head.len()..].trim_start_matches("::");
        let (module, rest) = match CODECS.contains(&head) {
            true => {
                let part = ident(rest);
                (format!("{head}::{part}"), rest[part.len()..].trim_start_matches("::"))
            }
            false => (head.to_string(), rest),
        };
        let items: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![rest.rsplit("::").next().unwrap_or(rest)],
        };
        for item in items {
            names.insert(ident(item).to_string(), module.clone());
        }
    }
    names
}

/// The module path of `file` below `src`: `src/reader/store.rs` is
/// `[reader, store]`, `src/reader/mod.rs` `[reader]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .strip_prefix(src)
        .unwrap()
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Every reference of `file` to a top-level module, by the first name after
/// the crate root.
fn references(src: &Path, file: &Path, reexports: &BTreeMap<String, String>) -> Vec<Reference> {
    let text = std::fs::read_to_string(file).unwrap();
    let code = code_only(&text);
    let path = module_path(src, file);
    let from = module_named(path.iter().map(String::as_str));
    let mut found = Vec::new();
    let mut push = |at: usize, name: &str| {
        let to = reexports.get(name).map_or(name, String::as_str);
        found.push(Reference {
            file: file.strip_prefix(src.parent().unwrap()).unwrap_or(file).to_path_buf(),
            line: code[..at].matches('\n').count() + 1,
            from: from.clone(),
            to: to.to_string(),
        });
    };
    let bytes = code.as_bytes();
    // `crate::` (also `$crate::`), and `super::` repeated up to the root.
    let mut roots = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if !ident_byte(bytes, at) {
            roots.push((at, at + "crate::".len()));
        }
    }
    let inline_mods = inline_mod_bodies(&code);
    for (at, _) in code.match_indices("super::") {
        if ident_byte(bytes, at) || code[..at].ends_with("super::") {
            continue;
        }
        let climbs = code[at..].len() - code[at..].trim_start_matches("super::").len();
        let depth = path.len() + inline_mods.iter().filter(|body| body.contains(&at)).count();
        if climbs / "super::".len() == depth {
            roots.push((at, at + climbs));
        }
    }
    for (at, after) in roots {
        let rest = code[after..].trim_start();
        match rest.strip_prefix('{') {
            Some(group) => group_heads(group).into_iter().for_each(|name| push(at, name)),
            None => push(at, &module_named(rest.split("::").map(ident))),
        }
    }
    found
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every reference between two different top-level modules in `src/`
/// (`src/bin/` holds programs, not the library's modules).
fn all_references() -> Vec<Reference> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| !f.starts_with(src.join("bin")) && f != &src.join("lib.rs"));
    files.sort();
    let reexports = root_reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    files
        .iter()
        .flat_map(|f| references(&src, f, &reexports))
        .filter(|r| r.from != r.to)
        .collect()
}

#[test]
fn every_module_has_a_layer() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter(|f| !f.starts_with(src.join("bin")) && **f != src.join("lib.rs"))
        .map(|f| module_named(module_path(&src, f).iter().map(String::as_str)))
        .collect();
    let unplaced: Vec<&String> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules without a layer in LAYERS: {unplaced:?}");
    for r in all_references() {
        assert!(
            layer_of(&r.to).is_some(),
            "{}:{}: module {} refers to `{}`, which is neither a module nor a name the crate root re-exports",
            r.file.display(),
            r.line,
            r.from,
            r.to
        );
    }
}

/// Most paths through the reader in the writer's code (`crate::reader::x`
/// or a `crate::reader::{x, y}` group): it reads the partly covered chunks
/// of a wave through the reader, and shares everything else with it through
/// the array core.
const WRITER_PATHS_THROUGH_THE_READER: usize = 3;

#[test]
fn the_reader_and_the_writer_are_siblings() {
    let references = all_references();
    // A group's names share their path's place.
    let between = |from: &str, to: &str| -> BTreeSet<String> {
        references
            .iter()
            .filter(|r| r.from == from && r.to == to)
            .map(|r| format!("{}:{}", r.file.display(), r.line))
            .collect()
    };
    let back = between("reader", "writer");
    assert!(back.is_empty(), "the reader refers to the writer at {back:?}");
    let paths = between("writer", "reader");
    assert!(
        paths.len() <= WRITER_PATHS_THROUGH_THE_READER,
        "the writer names the reader {} times, at most {WRITER_PATHS_THROUGH_THE_READER} allowed: {paths:?}",
        paths.len()
    );
}

#[test]
fn no_module_refers_to_a_higher_layer() {
    let upward: Vec<String> = all_references()
        .iter()
        .filter(|r| layer_of(&r.to) > layer_of(&r.from))
        .map(|r| {
            format!(
                "{}:{}: module {} (layer {}) refers to module {} (layer {})",
                r.file.display(),
                r.line,
                r.from,
                layer_of(&r.from).unwrap(),
                r.to,
                layer_of(&r.to).unwrap()
            )
        })
        .collect();
    assert!(upward.is_empty(), "upward references:\n{}", upward.join("\n"));
}

#[test]
fn modules_of_one_layer_refer_to_each_other_without_cycles() {
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for r in all_references() {
        if layer_of(&r.from) == layer_of(&r.to) {
            let at = format!("{}:{}", r.file.display(), r.line);
            edges.entry(r.from).or_default().entry(r.to).or_insert(at);
        }
    }
    // Depth-first search from every module; a module met again on the path is a cycle.
    fn visit(
        module: &str,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == module) {
            let mut cycle = path[start..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if !done.insert(module.to_string()) {
            return None;
        }
        path.push(module.to_string());
        for next in edges.get(module).into_iter().flat_map(BTreeMap::keys) {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in edges.keys() {
        if let Some(cycle) = visit(module, &edges, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]]))
                .collect();
            panic!(
                "modules of one layer refer to each other in a cycle:\n{}",
                steps.join("\n")
            );
        }
    }
}

#[test]
fn the_scanner_sees_paths_in_code_only() {
    let code = code_only(
        "let a = \"crate::x\"; // crate::y\n/* crate::z */ let c = ('c', '\\'', b'\"'); crate::w::f(); \
         r#\"crate::v\"#; br\"crate::u\\\"; fn f<'a>(x: &'a str) {}",
    );
    assert_eq!(code.matches("crate::").count(), 1, "{code}");
    assert!(code.contains("crate::w::f()") && code.contains("<'a>"), "{code}");
    assert_eq!(group_heads("a, b::{c, d}, e::f}; crate::g"), ["a", "b", "e"]);
    assert_eq!(
        inline_mod_bodies("mod a;\nmod tests { fn f() {} }\nmod b { }"),
        [17..29, 37..39]
    );
    let lib = "pub use codec::{Backend, BatchCodec};\npub use error::Error;";
    let names = root_reexports(lib);
    assert_eq!(names["BatchCodec"], "codec");
    assert_eq!(names["Error"], "error");
}
