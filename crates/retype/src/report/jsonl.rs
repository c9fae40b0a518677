//! Results read back from the JSON lines a command printed with `--json`.

use std::path::Path;

use anyhow::{bail, Context};

/// The rows of `path`, one JSON value a line (blank lines skipped), each made by `row`. A
/// bad line is named by file and line, and a file without rows is an error; `what` names
/// the command whose output the file should hold.
pub fn read<T>(
    path: &Path,
    what: &str,
    row: impl Fn(serde_json::Value) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<T>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let rows = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(anyhow::Error::from)
                .and_then(&row)
                .with_context(|| {
                    format!("{}: line {}: not a line of {what}", path.display(), i + 1)
                })
        })
        .collect::<anyhow::Result<Vec<T>>>()?;
    if rows.is_empty() {
        bail!("{}: no results of {what}", path.display());
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `text` as a file of `--json` lines of numbers.
    fn numbers(name: &str, text: &str) -> anyhow::Result<Vec<u64>> {
        let path = std::env::temp_dir().join(format!("retype-jsonl-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let rows = read(&path, "a test --json", |v| {
            v.as_u64().ok_or_else(|| anyhow::anyhow!("not a count"))
        });
        std::fs::remove_file(&path).unwrap();
        rows
    }

    #[test]
    fn rows_in_order_blank_lines_skipped() {
        assert_eq!(numbers("ok", "1\n\n  \n2\n3").unwrap(), [1, 2, 3]);
    }

    #[test]
    fn a_bad_line_is_named_and_no_rows_is_an_error() {
        for (name, text, line) in [("syntax", "1\n{\n", 2), ("row", "1\n2\n\n\"x\"\n", 4)] {
            let e = format!("{:#}", numbers(name, text).unwrap_err());
            assert!(
                e.contains(&format!(": line {line}: not a line of a test --json")),
                "{e}"
            );
        }
        let e = format!("{:#}", numbers("empty", "\n \n").unwrap_err());
        assert!(e.ends_with("no results of a test --json"), "{e}");
        let missing = read(
            Path::new("/no/such/file.jsonl"),
            "a test --json",
            |_| Ok(()),
        );
        assert!(
            format!("{:#}", missing.unwrap_err()).starts_with("cannot read /no/such/file.jsonl")
        );
    }
}
