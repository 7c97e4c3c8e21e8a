//! No import cycles between the top-level modules of any crate of the workspace.
//!
//! For each member of host-agent/Cargo.toml, every `.rs` file under `src/` is read for
//! `crate::X` (in `use` trees and in paths), `super::X` and `self::X`; each reference is
//! resolved to the top-level module it lands in (a name the crate root re-exports counts as
//! its module) and becomes an edge of the crate's module graph. A cycle fails the test,
//! printed with the file and line of each edge. Tests, benches and examples outside `src/`
//! are crates of their own and are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles tolerated until their crate is restructured: (crate, the modules of the cycle).
/// Empty: flexpass-core and flexpass-agent, which are being restructured under issue #25,
/// had none when this test came. A cycle not covered by an entry fails the test, and so does
/// an entry whose cycle is gone (delete it then).
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

#[test]
fn no_crate_has_an_import_cycle() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut failures = vec![];
    for member in members(&workspace) {
        let dir = workspace.join(&member);
        let name = package_name(&dir);
        let graph = module_graph(&dir.join("src"));
        let known: Vec<BTreeSet<&str>> = KNOWN_CYCLES
            .iter()
            .filter(|(c, _)| *c == name)
            .map(|(_, m)| m.iter().copied().collect())
            .collect();
        let found = cycles(&graph);
        for cycle in &found {
            let modules: BTreeSet<&str> = cycle.iter().map(|m| m.as_str()).collect();
            if !known.iter().any(|k| modules.is_subset(k)) {
                failures.push(format!("{name}: {}", describe(&graph, cycle)));
            }
        }
        for k in &known {
            let still = found
                .iter()
                .any(|c| c.iter().all(|m| k.contains(m.as_str())));
            if !still {
                failures.push(format!(
                    "{name}: the known cycle {k:?} is gone: remove it from KNOWN_CYCLES"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_scanner_sees_paths_not_comments_or_strings() {
    let src = r##"
        use crate::{a::B, c, self};
        // crate::commented
        /* crate::blocked /* nested */ crate::still */
        let s = "crate::quoted \" crate::escaped";
        let r = br#"crate::raw"#;
        let q = '\'';
        fn f<'x>(v: &'x u8) -> u8 { super::d::e(v) }
        mod inner {
            use super::super::g;
        }
        pub(crate) fn h() { crate::k::call(); }
    "##;
    let p = parse(&tokens(&strip(src)), &["m".to_string()]);
    let refs: Vec<(String, String)> = p
        .refs
        .iter()
        .map(|r| (r.from.join("::"), r.target.join("::")))
        .collect();
    let want = [
        ("m", "a"),
        ("m", "c"),
        ("m", "d"),
        ("m::inner", "g"),
        ("m", "k"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(refs, want);
}

/// The workspace's member directories.
fn members(workspace: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(workspace.join("Cargo.toml")).unwrap();
    let t: toml::Table = toml::from_str(&text).unwrap();
    t["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

fn package_name(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let t: toml::Table = toml::from_str(&text).unwrap();
    t["package"]["name"].as_str().unwrap().to_string()
}

/// An edge's evidence: the file and line of the first reference.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// Edges between the top-level modules of the crate whose sources are in `src`.
fn module_graph(src: &Path) -> Graph {
    let mut files = vec![];
    rs_files(src, &mut files);
    let parsed: Vec<(PathBuf, Vec<String>, Parsed)> = files
        .into_iter()
        .filter(|f| !f.starts_with(src.join("bin")))
        .map(|f| {
            let path = module_path(src, &f);
            let text = strip(&std::fs::read_to_string(&f).unwrap());
            let p = parse(&tokens(&text), &path);
            (f, path, p)
        })
        .collect();
    let mut top: BTreeSet<String> = BTreeSet::new();
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    for (_, path, p) in &parsed {
        if let Some(m) = path.first() {
            top.insert(m.clone());
        } else {
            top.extend(p.inline_modules.iter().cloned());
        }
    }
    for (_, path, p) in &parsed {
        if path.is_empty() {
            for (name, module) in &p.root_uses {
                if top.contains(module) {
                    reexports.insert(name.clone(), module.clone());
                }
            }
        }
    }
    let mut graph = Graph::new();
    for (file, _, p) in &parsed {
        for r in &p.refs {
            let Some(from) = r.from.first() else { continue };
            let to = match r.target.as_slice() {
                [m, ..] if top.contains(m) => m.clone(),
                [name, ..] => match reexports.get(name) {
                    Some(m) => m.clone(),
                    None => continue,
                },
                [] => continue,
            };
            if *from != to {
                let at = format!(
                    "{}:{}",
                    file.strip_prefix(src.parent().unwrap()).unwrap().display(),
                    r.line
                );
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert(at);
            }
        }
    }
    graph
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` is `a::b`, `src/a/mod.rs` and `src/a.rs` are `a`, the crate roots are empty.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod") | Some("lib") | Some("main")
    ) {
        parts.pop();
    }
    parts
}

/// The source with comments, strings and character literals blanked (lines kept).
fn strip(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r' && (next == Some('"') || next == Some('#')) && raw_start(&c, i) {
            // Raw string r"…", r#"…"#, br"…".
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, c[j]);
                j += 1;
            }
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if let Some(&ch) = c.get(i) {
                    blank(&mut out, ch);
                }
                i += 1;
            }
            i += 1;
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime.
            let end = if next == Some('\\') {
                (i + 3..c.len()).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => i = e + 1,
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The `r` at `i` starts a raw string (it does not end an identifier, `br` aside).
fn raw_start(c: &[char], i: usize) -> bool {
    let ident_at = |j: usize| c[j].is_alphanumeric() || c[j] == '_';
    match i {
        0 => true,
        _ if c[i - 1] == 'b' => i == 1 || !ident_at(i - 2),
        _ => !ident_at(i - 1),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens with their line numbers.
fn tokens(s: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = s.chars().collect();
    let (mut out, mut line, mut i) = (vec![], 1, 0);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// A reference from the module `from` to the (absolute) path `target`.
struct Ref {
    from: Vec<String>,
    target: Vec<String>,
    line: usize,
}

#[derive(Default)]
struct Parsed {
    refs: Vec<Ref>,
    /// `mod x { … }` blocks of the file's own module.
    inline_modules: Vec<String>,
    /// Crate root only: `use m::{A, B}` as (A, m), (B, m).
    root_uses: Vec<(String, String)>,
}

fn parse(toks: &[(Tok, usize)], file_path: &[String]) -> Parsed {
    let ident = |i: usize| match toks.get(i) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let is = |i: usize, t: Tok| toks.get(i).is_some_and(|(x, _)| *x == t);
    let mut p = Parsed::default();
    let mut path = file_path.to_vec();
    // (brace depth inside the block, module name) of the inline modules we are in.
    let mut open: Vec<usize> = vec![];
    let mut pending: Option<String> = None;
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        let line = toks[i].1;
        match &toks[i].0 {
            Tok::Punct('{') => {
                depth += 1;
                if let Some(m) = pending.take() {
                    if path.len() == file_path.len() {
                        p.inline_modules.push(m.clone());
                    }
                    path.push(m);
                    open.push(depth);
                }
            }
            Tok::Punct('}') => {
                if open.last() == Some(&depth) {
                    open.pop();
                    path.pop();
                }
                depth -= 1;
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some(name), true) = (ident(i + 1), is(i + 2, Tok::Punct('{'))) {
                    pending = Some(name.to_string());
                }
            }
            Tok::Ident(k) if k == "use" && path.is_empty() => {
                // Crate root: the names a `use m::…` brings in.
                if let Some(m) = ident(i + 1).filter(|m| *m != "crate" && *m != "self") {
                    let mut j = i + 1;
                    while j < toks.len() && !is(j, Tok::Punct(';')) {
                        let last = is(j + 1, Tok::Punct(','))
                            || is(j + 1, Tok::Punct('}'))
                            || is(j + 1, Tok::Punct(';'));
                        if let (Some(name), true) = (ident(j), last) {
                            p.root_uses.push((name.to_string(), m.to_string()));
                        }
                        j += 1;
                    }
                }
            }
            Tok::Ident(k) if matches!(k.as_str(), "crate" | "super" | "self") => {
                let mut base = match k.as_str() {
                    "crate" => vec![],
                    _ => path.clone(),
                };
                let mut j = i;
                if k == "super" {
                    while ident(j) == Some("super") && is(j + 1, Tok::Path) {
                        base.pop();
                        j += 2;
                    }
                } else if is(j + 1, Tok::Path) {
                    j += 2;
                } else {
                    i += 1;
                    continue;
                }
                if j == i {
                    i += 1;
                    continue;
                }
                for first in first_segments(toks, j) {
                    let mut target = base.clone();
                    target.push(first);
                    p.refs.push(Ref {
                        from: path.clone(),
                        target,
                        line,
                    });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    p
}

/// The first segment of a path at `i`, or of each item of a `{…}` group there.
fn first_segments(toks: &[(Tok, usize)], i: usize) -> Vec<String> {
    match toks.get(i) {
        Some((Tok::Ident(s), _)) if s != "self" => vec![s.clone()],
        Some((Tok::Punct('{'), _)) => {
            let mut out = vec![];
            let (mut depth, mut at_item) = (0, true);
            for (t, _) in &toks[i..] {
                match t {
                    Tok::Punct('{') => {
                        depth += 1;
                        at_item = depth == 1;
                    }
                    Tok::Punct('}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Tok::Punct(',') if depth == 1 => at_item = true,
                    Tok::Ident(s) if at_item => {
                        if s != "self" {
                            out.push(s.clone());
                        }
                        at_item = false;
                    }
                    _ => at_item = false,
                }
            }
            out
        }
        _ => vec![],
    }
}

/// The strongly connected components with more than one module, each as a cycle through
/// all of its modules where one exists, else as the component.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = g
        .iter()
        .flat_map(|(a, to)| std::iter::once(a).chain(to.keys()))
        .collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in g.get(&n).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> = nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = vec![];
    for n in &nodes {
        if done.contains(*n) || !reach[n].contains(*n) {
            continue;
        }
        let scc: Vec<String> = nodes
            .iter()
            .filter(|m| reach[n].contains(**m) && reach[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        done.extend(scc.iter().cloned());
        out.push(scc);
    }
    out
}

/// A cycle with its edges: "a -> b (src/a.rs:3), b -> a (src/b.rs:5)".
fn describe(g: &Graph, scc: &[String]) -> String {
    // The shortest way from the first module back to it, inside the component.
    let start = &scc[0];
    let mut prev: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    'bfs: while let Some(n) = queue.pop_front() {
        for m in g.get(&n).into_iter().flat_map(|t| t.keys()) {
            if !scc.contains(m) || prev.contains_key(m) {
                continue;
            }
            prev.insert(m.clone(), n.clone());
            if m == start {
                break 'bfs;
            }
            queue.push_back(m.clone());
        }
    }
    let mut cycle = vec![start.clone()];
    let mut at = prev[start].clone();
    while at != *start {
        cycle.push(at.clone());
        at = prev[&at].clone();
    }
    cycle.push(start.clone());
    cycle.reverse();
    let edges: Vec<String> = cycle
        .windows(2)
        .map(|w| format!("  {} -> {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
        .collect();
    format!(
        "import cycle {} (modules in it: {})\n{}",
        cycle.join(" -> "),
        scc.join(", "),
        edges.join("\n")
    )
}
