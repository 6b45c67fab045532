//! The contract's rules are cited where they are kept. docs/CONTRACT.md gives every rule an
//! identifier, a tag `[C-NAME]` after its heading or at its bullet; the code that implements
//! a rule (Rust under `src/`, WGSL under `wgsl/`) and the tests that prove it (`tests/`,
//! `e2e/*.js`, `e2e/*.mjs`) cite it as `C-NAME` in a `//` comment. Every rule must be cited
//! by at least one implementation file and one test file, and every citation must name a rule.
//! No GPU, no regex crate: the scanner is the few lines below.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `c` is a word character (what a regex's `\b` looks at).
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier starting at char `i` of `s`, as `\bC-[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*\b`
/// reads it (taken whole: an identifier running on into a word character is none), and the
/// index just past it.
fn id_at(s: &[char], i: usize) -> Option<(String, usize)> {
    let upper_or_digit = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit();
    if s.get(i) != Some(&'C') || s.get(i + 1) != Some(&'-') {
        return None;
    }
    if i > 0 && is_word(s[i - 1]) {
        return None;
    }
    if !s.get(i + 2).is_some_and(|c| c.is_ascii_uppercase()) {
        return None;
    }
    let mut end = i + 3;
    while s.get(end).is_some_and(|&c| upper_or_digit(c)) {
        end += 1;
    }
    // Further groups: `-` and at least one upper-case letter or digit.
    while s.get(end) == Some(&'-') && s.get(end + 1).is_some_and(|&c| upper_or_digit(c)) {
        end += 2;
        while s.get(end).is_some_and(|&c| upper_or_digit(c)) {
            end += 1;
        }
    }
    if s.get(end).is_some_and(|&c| is_word(c)) {
        return None;
    }
    Some((s[i..end].iter().collect(), end))
}

/// Every identifier in `text`.
fn ids_in(text: &str) -> Vec<String> {
    let s: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match id_at(&s, i) {
            Some((id, end)) => {
                out.push(id);
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

/// The rules docs/CONTRACT.md defines: identifiers in `[C-NAME]` tags outside code spans
/// (so that a tag quoted in backticks defines nothing), each with how often it is defined.
fn defined_ids(markdown: &str) -> BTreeMap<String, usize> {
    let s: Vec<char> = markdown.chars().collect();
    let mut out = BTreeMap::new();
    let mut in_code = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            '`' => in_code = !in_code,
            '[' if !in_code => {
                if let Some((id, end)) = id_at(&s, i + 1) {
                    if s.get(end) == Some(&']') {
                        *out.entry(id).or_insert(0) += 1;
                        i = end;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The identifiers a source file cites, with their line numbers: those in its `//` comments
/// (Rust, WGSL and JavaScript alike; a `//` inside a string reads as a comment too, which at
/// worst finds a citation that is not one, never hides one).
fn cited_ids(source: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (n, line) in source.lines().enumerate() {
        if let Some(at) = line.find("//") {
            out.extend(ids_in(&line[at..]).into_iter().map(|id| (id, n + 1)));
        }
    }
    out
}

/// Files under `dir` (recursively when `deep`) whose names end with one of `exts`.
fn files(dir: &Path, deep: bool, exts: &[&str], out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if deep {
                files(&path, deep, exts, out);
            }
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| exts.iter().any(|e| n.ends_with(e)))
        {
            out.push(path);
        }
    }
}

/// Where each identifier is cited: `path:line` per file of `paths`.
fn citations(paths: &[PathBuf]) -> BTreeMap<String, Vec<String>> {
    let root = root();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in paths {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        for (id, line) in cited_ids(&text) {
            out.entry(id).or_default().push(format!("{name}:{line}"));
        }
    }
    out
}

#[test]
fn every_rule_is_cited_by_its_implementation_and_a_test() {
    let root = root();
    let contract = std::fs::read_to_string(root.join("docs/CONTRACT.md")).expect("CONTRACT.md");
    let defined = defined_ids(&contract);
    assert!(
        defined.len() >= 30,
        "docs/CONTRACT.md defines only {} rule identifiers ([C-NAME] tags): {:?}",
        defined.len(),
        defined.keys().collect::<Vec<_>>()
    );

    let mut implementation = Vec::new();
    files(&root.join("src"), true, &[".rs"], &mut implementation);
    files(&root.join("wgsl"), false, &[".wgsl"], &mut implementation);
    let mut tests = Vec::new();
    files(&root.join("tests"), true, &[".rs"], &mut tests);
    tests.retain(|p| !p.ends_with("tests/contract_ids.rs"));
    files(&root.join("e2e"), false, &[".js", ".mjs"], &mut tests);
    assert!(
        implementation.len() > 50 && tests.len() > 20,
        "{} implementation and {} test files found",
        implementation.len(),
        tests.len()
    );
    let in_code = citations(&implementation);
    let in_tests = citations(&tests);

    let mut problems = Vec::new();
    for (id, &times) in &defined {
        if times > 1 {
            problems.push(format!(
                "{id} is defined {times} times in docs/CONTRACT.md (once only)"
            ));
        }
        if !in_code.contains_key(id) {
            problems.push(format!(
                "{id} has no implementation citing it: put `{id}` in a comment where \
                 src/**/*.rs or wgsl/*.wgsl implements the rule"
            ));
        }
        if !in_tests.contains_key(id) {
            problems.push(format!(
                "{id} has no test citing it: put `{id}` in a comment at a test that proves \
                 the rule (tests/**/*.rs, e2e/*.js, e2e/*.mjs)"
            ));
        }
    }
    let cited: BTreeSet<&String> = in_code.keys().chain(in_tests.keys()).collect();
    for id in cited {
        if !defined.contains_key(id) {
            let places: Vec<&str> = in_code
                .get(id)
                .into_iter()
                .chain(in_tests.get(id))
                .flatten()
                .map(String::as_str)
                .collect();
            problems.push(format!(
                "{id} is cited ({}) but docs/CONTRACT.md defines no such rule",
                places.join(", ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) with the contract's rule identifiers:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_scanner_reads_identifiers_and_nothing_else() {
    assert_eq!(
        ids_in("zeroed (C-BAD), see C-BAD-FOUND; C-BOUND-IDPC."),
        ["C-BAD", "C-BAD-FOUND", "C-BOUND-IDPC"]
    );
    // Not identifiers: lower case after `C-`, a word before, a word running on.
    assert!(ids_in("C-style ABC-DEF xC-BAD C-BADx C-1 C-").is_empty());
    // A trailing hyphen or lower-case group ends the identifier before it.
    assert_eq!(ids_in("C-BAD- C-BIN-compose"), ["C-BAD", "C-BIN"]);
    // Only comments cite.
    assert_eq!(
        cited_ids("let s = \"C-BAD\";\nzero(k); // C-BAD: the sentinel\n"),
        [("C-BAD".to_string(), 2)]
    );
    // Tags define; a tag in a code span, or a citation without brackets, does not.
    let defined = defined_ids("## Masks [C-MASK]\n- [C-RING] rings; `[C-NAME]` and C-BIN\n");
    assert_eq!(
        defined.into_iter().collect::<Vec<_>>(),
        [("C-MASK".to_string(), 1), ("C-RING".to_string(), 1)]
    );
}
