//! The documentation's checks: what the README and `docs/` say that a
//! command or the tree can confirm.
//!
//! * Every relative link in `README.md` and `docs/**.md` reaches a file,
//!   and every `#anchor` a heading of its page; every page of `docs/` is
//!   listed in `docs/README.md`; every `docs/….md` a source file names
//!   exists.
//! * The README's crate map names every member of the workspace, and
//!   nothing that is not one.
//! * The matrix table of `docs/catalogue.md` is `racksim matrix --seeds 32
//!   --jobs 2 --markdown`, pasted whole. Its rows, and in each row the
//!   columns no run decides (scenario, strategy, era, expected), and the
//!   control plane of each era are checked here against the catalogue
//!   without running anything. The measured columns are checked by
//!   `tests/cells.rs`, which runs every cell anyway: a cell it runs at the
//!   table's 32 seeds (all but the 8-seed ones) must print the committed
//!   row exactly, so no row is measured twice (issue 40).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use racksim::{catalogue, matrix};

/// The workspace root (this package is `racksim/`).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the package has a parent directory")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.md` file under `dir`, sorted.
pub(crate) fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a readable entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(markdown_files(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines().enumerate().filter_map(move |(i, line)| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return None;
        }
        (!fenced).then_some((i + 1, line))
    })
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped
/// (but `-` and `_`), spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (a repeated heading's second anchor
/// is `slug-1`, as GitHub makes it).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The targets of a line's inline links, `[text](target)`, and of a
/// reference definition, `[name]: target`.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    if let Some(def) = line.strip_prefix('[') {
        if let Some((_, target)) = def.split_once("]: ") {
            out.push(target.trim().to_string());
        }
    }
    out
}

#[test]
fn every_link_in_the_docs_resolves() {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    pages.extend(markdown_files(&root.join("docs")));
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page);
        for (n, line) in prose(&text) {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().expect("a page has a directory").join(path)
                };
                let at = format!("{}:{n}: {target}", page.display());
                if !file.exists() {
                    broken.push(format!("{at}: no such file"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    if file.extension().is_some_and(|e| e == "md")
                        && !anchors(&read(&file)).contains(anchor)
                    {
                        broken.push(format!("{at}: no such heading in {}", file.display()));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_listed_in_the_index() {
    let root = root();
    let docs = root.join("docs");
    let index = read(&docs.join("README.md"));
    let listed: BTreeSet<PathBuf> = prose(&index)
        .flat_map(|(_, line)| links(line))
        .map(|t| docs.join(t.split('#').next().unwrap_or_default()))
        .collect();
    let missing: Vec<String> = markdown_files(&docs)
        .into_iter()
        .filter(|p| !p.ends_with("docs/README.md") && !listed.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages docs/README.md does not list: {missing:?}"
    );
    assert!(
        read(&root.join("README.md")).contains("](docs/README.md"),
        "the README links the index"
    );
}

/// Source files that point a reader at a page of `docs/` point at
/// one that exists.
#[test]
fn every_page_the_code_names_exists() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.expect("a readable entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if name != "target" && name != "vendor" && !name.starts_with('.') {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") || name.ends_with(".toml") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut files = Vec::new();
    for dir in [
        "reconciler",
        "fakes",
        "nexus",
        "sim",
        "scenarios",
        "upstream-clients",
        ".cargo",
        ".config",
    ] {
        walk(&root.join(dir), &mut files);
    }
    let mut missing = Vec::new();
    for file in files {
        let text = read(&file);
        let mut rest = text.as_str();
        while let Some(i) = rest.find("docs/") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || matches!(c, '/' | '.' | '-' | '_')))
                .unwrap_or(tail.len());
            let named = tail[..end].trim_end_matches('.');
            if named.ends_with(".md") && !root.join(named).exists() {
                missing.push(format!("{}: {named}", file.display()));
            }
            rest = &tail[end.max(5)..];
        }
    }
    assert!(missing.is_empty(), "pages named but missing: {missing:?}");
}

/// The committed matrix: the lines between the markers of
/// `docs/catalogue.md`.
fn committed_matrix() -> String {
    let page = read(&root().join("docs/catalogue.md"));
    matrix::committed_table(&page)
        .expect("docs/catalogue.md has the matrix's <!-- matrix: begin/end --> markers")
        .to_string()
}

/// A Markdown table row's cells.
fn cells(row: &str) -> Vec<String> {
    row.trim()
        .trim_start_matches('|')
        .trim_end_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_string())
        .collect()
}

/// The rows of a `racksim matrix --markdown` table, header and rule left out.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| l.starts_with("| "))
        .skip(1)
        .map(cells)
        .collect()
}

/// The committed table has a row for every cell of the catalogue, in the
/// matrix's order, and in each the scenario, strategy, era and expectation
/// the command prints today; the eras' control planes under it are
/// today's; every count is over the 32 seeds the page says.
#[test]
fn the_committed_matrix_is_the_catalogue_s() {
    let committed = committed_matrix();
    let today = matrix::markdown(&matrix::matrix(&catalogue::all(), &[], 1, &|_, _| {}));
    let regenerate = "regenerate it: cargo run -p racksim -- matrix --seeds 32 --jobs 2 --markdown";
    let header = |t: &str| t.lines().next().map(str::to_string);
    assert_eq!(
        header(&committed),
        header(&today),
        "the columns; {regenerate}"
    );
    let fixed = |t: &str| -> Vec<Vec<String>> {
        rows(t)
            .into_iter()
            .map(|r| r.into_iter().take(4).collect())
            .collect()
    };
    assert_eq!(
        fixed(&committed),
        fixed(&today),
        "the cells (scenario, strategy, era, expected); {regenerate}"
    );
    let eras = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("* era "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(eras(&committed), eras(&today), "the eras; {regenerate}");
    for row in rows(&committed) {
        for count in &row[4..7] {
            assert!(
                count.ends_with("/32"),
                "{row:?}: counts over 32 seeds; {regenerate}"
            );
        }
    }
    assert!(
        committed.contains("\n* testbed errors: none\n"),
        "no testbed errors"
    );
}

/// The Markdown form is the text table's: the same rows and notes.
#[test]
fn the_markdown_matrix_has_the_text_table_s_rows() {
    let cells = matrix::matrix(&catalogue::all(), &[], 1, &|_, _| {});
    let text = matrix::table(&cells);
    let markdown = matrix::markdown(&cells);
    assert_eq!(
        rows(&markdown).len(),
        cells.len(),
        "a row per cell:\n{markdown}"
    );
    for (line, row) in text.lines().skip(1).zip(rows(&markdown)) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let joined: Vec<String> = row
            .iter()
            .flat_map(|c| c.split_whitespace())
            .map(str::to_string)
            .collect();
        assert_eq!(words, joined, "{line}");
    }
    for note in text.lines().skip(1 + cells.len()) {
        assert!(markdown.contains(&format!("* {note}\n")), "{note}");
    }
}

/// The README's crate map ("The house") has a row for every workspace
/// member, by package name, and no row for a crate that is not one.
#[test]
fn the_crate_map_names_every_member() {
    let root = root();
    let workspace: toml::Table = toml::from_str(&read(&root.join("Cargo.toml"))).unwrap();
    let members = workspace["workspace"]["members"].as_array().unwrap();
    let names: BTreeSet<String> = members
        .iter()
        .map(|m| {
            let manifest: toml::Table =
                toml::from_str(&read(&root.join(m.as_str().unwrap()).join("Cargo.toml"))).unwrap();
            manifest["package"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    let readme = read(&root.join("README.md"));
    let map = readme
        .split("## The house\n")
        .nth(1)
        .expect("the README has a section \"The house\"")
        .split("\n## ")
        .next()
        .unwrap();
    let named: BTreeSet<String> = map
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let first = cells(l).into_iter().next().unwrap_or_default();
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|w| !w.contains('/'))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        named, names,
        "the crate map's crates against the workspace's members"
    );
}
