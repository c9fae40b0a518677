//! Names the user picks on the command line (heaps, policies, architectures)
//! are parsed here, once, into the enums the core keeps, with one error
//! message that lists the choices; past this edge no name travels as a string.

use std::fmt::Display;
use std::str::FromStr;

use strum::VariantArray;

/// The choices of `T`, separated by commas, for error messages.
pub fn choices<T: Display>(all: &[T]) -> String {
    all.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `name` as a `T`, or an error naming `what` and every choice.
pub fn one_of<T: FromStr + VariantArray + Display>(what: &str, name: &str) -> anyhow::Result<T> {
    name.parse().map_err(|_| {
        anyhow::anyhow!(
            "unknown {what} {name:?}: expected one of {}",
            choices(T::VARIANTS)
        )
    })
}

/// A comma-separated list of names of `T`, or `all`; each named once, in the
/// order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

/// What a [`List`] of `T` is called in messages.
pub trait Named {
    const WHAT: &'static str;
}

impl Named for retype_core::heap::HeapKind {
    const WHAT: &'static str = "heap";
}

impl<T> FromStr for List<T>
where
    T: FromStr + VariantArray + Display + Named + Copy + PartialEq,
{
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        parse_list(s, || T::VARIANTS.to_vec(), |name| one_of(T::WHAT, name)).map(List)
    }
}

/// A comma-separated list of items parsed by `one`, `all` standing for
/// `every`; each item once, in the order first given.
pub fn parse_list<T: PartialEq>(
    s: &str,
    every: impl Fn() -> Vec<T>,
    one: impl Fn(&str) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim) {
        let items = if name == "all" {
            every()
        } else {
            vec![one(name)?]
        };
        for item in items {
            if !out.contains(&item) {
                out.push(item);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use retype_core::heap::HeapKind;

    use super::*;

    #[test]
    fn lists_expand_all_drop_repeats_and_name_the_choices() {
        let l: List<HeapKind> = "tlsf, buddy,tlsf".parse().unwrap();
        assert_eq!(l.0, [HeapKind::Tlsf, HeapKind::Buddy]);
        let all: List<HeapKind> = "buddy,all".parse().unwrap();
        assert_eq!(all.0.len(), HeapKind::ALL.len());
        assert_eq!(all.0[0], HeapKind::Buddy);
        let e = "tlsf,quick-fit".parse::<List<HeapKind>>().unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("unknown heap \"quick-fit\"") && e.contains("indexed-best-fit"),
            "{e}"
        );
    }
}
