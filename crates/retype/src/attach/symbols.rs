//! Where things are in another process: the objects it has loaded (from
//! `/proc/PID/maps`) and the address of a function an object exports (from
//! the object's file, its dynamic symbols, plus the address it was loaded at).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol};

/// An object loaded in a process.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Its file, as the process's maps name it.
    pub path: PathBuf,
    /// Where its first byte (file offset 0) is mapped.
    pub start: u64,
    /// Its executable ranges.
    pub code: Vec<(u64, u64)>,
}

/// Every file-backed object process `pid` has mapped, in the order of first appearance.
pub fn loaded(pid: i32) -> Result<Vec<Loaded>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .with_context(|| format!("cannot read /proc/{pid}/maps"))?;
    let mut objects: Vec<Loaded> = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        let (Some(range), Some(perms), Some(offset), Some(path)) =
            (f.first(), f.get(1), f.get(2), f.get(5).map(|p| p.trim()))
        else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi), Ok(offset)) = (
            u64::from_str_radix(lo, 16),
            u64::from_str_radix(hi, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        let path = PathBuf::from(path);
        let i = match objects.iter().position(|o| o.path == path) {
            Some(i) => i,
            None => {
                objects.push(Loaded {
                    path,
                    start: lo - offset,
                    code: Vec::new(),
                });
                objects.len() - 1
            }
        };
        if offset == 0 {
            objects[i].start = lo;
        }
        if perms.contains('x') {
            objects[i].code.push((lo, hi));
        }
    }
    Ok(objects)
}

/// The object whose file name satisfies `is`.
pub fn find(objects: &[Loaded], is: impl Fn(&str) -> bool) -> Option<&Loaded> {
    objects
        .iter()
        .find(|o| o.path.file_name().is_some_and(|n| is(&n.to_string_lossy())))
}

/// The address in process `pid` of function `name` exported by `object`, if
/// it exports one.
pub fn address(pid: i32, object: &Loaded, name: &str) -> Result<Option<u64>> {
    // The file as the process sees it (its mount namespace), else as we do.
    let inside = Path::new(&format!("/proc/{pid}/root")).join(object.path.strip_prefix("/")?);
    let data = std::fs::read(&inside)
        .or_else(|_| std::fs::read(&object.path))
        .with_context(|| format!("cannot read {}", object.path.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{} is not an ELF object", object.path.display()))?;
    // The lowest loaded address the file's own headers give, mapped at `start`.
    let first = file
        .segments()
        .map(|s| s.address() & !0xfff)
        .min()
        .unwrap_or(0);
    let bias = object.start.wrapping_sub(first);
    Ok(file
        .dynamic_symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
        .map(|s| bias.wrapping_add(s.address())))
}
