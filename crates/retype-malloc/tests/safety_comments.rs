//! Every `unsafe` block and `unsafe impl` of the crate carries a `// SAFETY:` comment directly
//! above it, at its own indentation. `clippy::undocumented_unsafe_blocks` (denied in lib.rs)
//! accepts a SAFETY comment that rustfmt has pushed under the trailing comment of the line
//! before, where it reads as part of that comment; this test does not.

use std::path::Path;

/// `line` without the contents of its string literals and without its comment.
fn code_of(line: &str) -> String {
    let (mut code, mut in_string, mut escaped) = (String::new(), false, false);
    for c in line.chars() {
        match (in_string, escaped, c) {
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, _, _) => escaped = false,
            (false, _, '"') => in_string = true,
            (false, _, _) => code.push(c),
        }
    }
    code.split("//").next().unwrap_or("").to_string()
}

/// The `line:` and text of every unsafe block or impl in `source` without a SAFETY comment
/// directly above it at the same indentation.
fn undocumented(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = code_of(line);
        if !(code.contains("unsafe {") || code.contains("unsafe impl")) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let documented = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.trim_start().starts_with("//"))
            .any(|l| {
                l.len() - l.trim_start().len() == indent && l.trim_start().starts_with("// SAFETY:")
            });
        if !documented {
            found.push(format!("{}: {}", i + 1, line.trim()));
        }
    }
    found
}

#[test]
fn every_unsafe_block_has_a_safety_comment_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut files = 0;
    for dir in ["src", "tests", "examples"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let source = std::fs::read_to_string(&path).unwrap();
                missing.extend(
                    undocumented(&source)
                        .into_iter()
                        .map(|m| format!("{}:{m}", path.display())),
                );
            }
        }
    }
    assert!(files > 15, "sources not found under {}", root.display());
    assert!(
        missing.is_empty(),
        "unsafe without a SAFETY comment above it:\n{}",
        missing.join("\n")
    );
}

/// The check can fail: the defect it was written for (a SAFETY comment that rustfmt moved
/// under a trailing comment) and a missing comment are both reported.
#[test]
fn misplaced_and_missing_comments_are_reported() {
    let moved = concat!(
        "    let class = class.max(1); // malloc(0) is class 1\n",
        "                              // SAFETY: the heap is ours.\n",
        "    unsafe {\n",
    );
    assert_eq!(undocumented(moved), ["3: unsafe {"]);
    let missing = "    // The heap is ours.\n    let x = unsafe { f() };\n";
    assert_eq!(undocumented(missing), ["2: let x = unsafe { f() };"]);
    let fine = "    // SAFETY: the heap is ours.\n    let x = unsafe { f() };\n";
    assert!(undocumented(fine).is_empty());
}
