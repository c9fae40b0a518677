//! What an error must say (issue #46): the file it is about, and where in
//! it: a line (`line 7`, `file:7:`) or a byte offset (`at byte 12`, the
//! UTF-8 check's `from index 12`).

use std::fmt::Display;
use std::path::Path;

/// Panics unless `err` (with its causes) names `file` and a place in it.
pub fn assert_names_place(err: &anyhow::Error, file: &Path) {
    let message = format!("{err:#}");
    assert_names_file(&message, file);
    assert!(
        names_place(&message),
        "the error names no line or byte offset: {message}"
    );
}

/// Panics unless `message` names `file`.
pub fn assert_names_file(message: &str, file: &Path) {
    assert!(
        message.contains(&file.display().to_string()),
        "the error does not name the file {}: {message}",
        file.display()
    );
}

/// Panics unless `err`'s message names a place in its input.
pub fn assert_names_line_or_byte(err: &impl Display) {
    let message = err.to_string();
    assert!(
        names_place(&message),
        "the error names no line or byte offset: {message}"
    );
}

/// Whether `message` holds a line number or a byte offset.
fn names_place(message: &str) -> bool {
    ["line ", "at byte ", "from index "].iter().any(|word| {
        message
            .match_indices(word)
            .any(|(i, _)| digit_at(message, i + word.len()))
    }) || message
        .match_indices(':')
        .any(|(i, _)| digit_at(message, i + 1) && then_colon(message, i + 1))
}

fn digit_at(s: &str, i: usize) -> bool {
    s.as_bytes().get(i).is_some_and(u8::is_ascii_digit)
}

/// Whether the digits from `i` are followed by a colon (`file:7:`).
fn then_colon(s: &str, i: usize) -> bool {
    let rest = &s.as_bytes()[i..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    rest.get(digits) == Some(&b':')
}

#[cfg(test)]
mod tests {
    use super::names_place;

    #[test]
    fn lines_and_offsets_are_places() {
        assert!(names_place("x.rep:7: bad number"));
        assert!(names_place("x.csv: line 3: bad op"));
        assert!(names_place("x.rtr: at byte 12: corrupt trace"));
        assert!(names_place(
            "x: not UTF-8 text: invalid utf-8 sequence of 1 bytes from index 4"
        ));
        assert!(!names_place("x.rep: bad number"));
        assert!(!names_place("x.rep: line : bad"));
        assert!(!names_place("time 10:30 is late"));
    }
}
