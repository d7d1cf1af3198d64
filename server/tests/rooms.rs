//! The server's rooms form a stack: a room imports only the rooms below it (see `src/lib.rs`),
//! and inside `pg/` the same holds for its own rooms. A path written in code (not in a
//! comment) that points up the stack fails this test, naming the file and the line.

use std::fs;
use std::path::{Path, PathBuf};

/// The crate's rooms and top-level modules, from the client down. Equal ranks may not import
/// each other either: each name here is its own room.
const ROOMS: &[&str] = &[
    "wire",
    "session",
    "demo",
    "context",
    "catalogs",
    "database",
    "query",
    "pg",
    "metrics",
    "error",
    "data_errors",
    "restore",
    "limits",
];

/// The rooms of `pg/`, from SQL text down to values.
const PG_ROOMS: &[&str] = &[
    "ast",
    "plan",
    "functions",
    "types",
    "settings",
    "catalog_oids",
    "empty_catalogs",
];

/// Files that may use every room: they put the rooms together.
const ABOVE_ALL: &[&str] = &["lib.rs", "main.rs", "allocator.rs"];

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read the source folder") {
        let path = entry.expect("read a folder entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The first two names of a path relative to `src`: `pg/functions/json.rs` is
/// `("pg", Some("functions"))`, `error.rs` is `("error", None)`.
fn room_of(relative: &Path) -> (String, Option<String>) {
    let mut parts = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string());
    let room = parts.next().unwrap_or_default();
    (room, parts.next())
}

/// Every `crate::a::b` path in a line of code, as `(a, b)`; `crate::{a, b::c}` gives each.
fn crate_paths(line: &str) -> Vec<(String, Option<String>)> {
    let mut paths = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `eddy_crate::`, not this crate
        }
        let group = if let Some(inner) = rest.strip_prefix('{') {
            inner.split('}').next().unwrap_or_default()
        } else {
            rest.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default()
        };
        for item in group.split(',') {
            let mut names = item.trim().split("::").map(str::trim);
            if let Some(first) = names.next().filter(|n| !n.is_empty()) {
                paths.push((first.to_string(), names.next().map(str::to_string)));
            }
        }
    }
    paths
}

fn rank(list: &[&str], name: &str) -> Option<usize> {
    list.iter().position(|r| *r == name)
}

#[test]
fn rooms_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("a file under src");
        if ABOVE_ALL.iter().any(|f| relative == Path::new(f)) {
            continue;
        }
        let (room, pg_room) = room_of(relative);
        let own_rank = rank(ROOMS, &room)
            .unwrap_or_else(|| panic!("{} is in no room listed here", relative.display()));
        let text = fs::read_to_string(file).expect("read a source file");
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for (target, target_pg) in crate_paths(code) {
                let Some(target_rank) = rank(ROOMS, &target) else {
                    continue; // a macro or an item of lib.rs
                };
                let up = if target == room {
                    // Inside pg, its own rooms keep the same order.
                    match (room.as_str(), &pg_room, &target_pg) {
                        ("pg", Some(from), Some(to)) => {
                            match (rank(PG_ROOMS, from), rank(PG_ROOMS, to)) {
                                (Some(from), Some(to)) => to < from,
                                _ => false,
                            }
                        }
                        _ => false,
                    }
                } else {
                    target_rank <= own_rank
                };
                if up {
                    upward.push(format!(
                        "{}:{}: {}",
                        relative.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "{} imports point up the stack of rooms:\n{}",
        upward.len(),
        upward.join("\n")
    );
}

#[test]
fn every_room_is_listed() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut top = Vec::new();
    for entry in fs::read_dir(&src).expect("read src") {
        let path = entry.expect("an entry").path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if ABOVE_ALL.contains(&name.as_str()) {
            continue;
        }
        let room = name.trim_end_matches(".rs").to_string();
        assert!(
            rank(ROOMS, &room).is_some(),
            "src/{name} is in no room listed here"
        );
        if path.is_file() {
            top.push(name);
        }
    }
    // A newcomer sees the rooms, not a flat list of files.
    let files = top.len() + ABOVE_ALL.len();
    assert!(files <= 12, "src has {files} files at its top: {top:?}");
}

#[test]
fn paths_are_read_from_code() {
    assert_eq!(
        crate_paths("use crate::{copy, pg::types::uuid};"),
        vec![
            ("copy".to_string(), None),
            ("pg".to_string(), Some("types".to_string()))
        ]
    );
    assert_eq!(
        crate_paths("let x = crate::wire::frame::read(eddy_crate::y);"),
        vec![("wire".to_string(), Some("frame".to_string()))]
    );
}
