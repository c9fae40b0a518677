//! The allocators a program can be run on (`retype record --allocator`,
//! `study tlm --allocators`): glibc, the Debian packages of the peers,
//! retype-malloc's preload library, or any malloc `.so`; where each one's
//! shared object is, and the `LD_PRELOAD` that puts it under a program.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use strum::{Display, EnumString, VariantArray};

use crate::names;

/// The allocators `--allocator` names; any other value is the path of a malloc `.so`.
#[derive(Display, EnumString, VariantArray)]
#[strum(serialize_all = "lowercase")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    Glibc,
    Jemalloc,
    Mimalloc,
    Tcmalloc,
    /// libretype_malloc_preload.so, built beside the `retype` binary.
    Retype,
}

/// What the recorded program runs on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Allocator {
    Named(Named),
    Library(PathBuf),
}

impl FromStr for Allocator {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        if let Ok(named) = s.parse() {
            return Ok(Allocator::Named(named));
        }
        if !(s.contains('/') || s.ends_with(".so") || s.contains(".so.")) {
            bail!(
                "unknown allocator {s:?}: use {}, or the path of a .so",
                names::choices(Named::VARIANTS)
            );
        }
        let path = Path::new(s);
        if !path.is_file() {
            bail!("{s}: no such shared object");
        }
        Ok(Allocator::Library(std::fs::canonicalize(path)?))
    }
}

impl fmt::Display for Allocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Allocator::Named(n) => n.fmt(f),
            Allocator::Library(p) => p.display().fmt(f),
        }
    }
}

/// Debian's shared object of a peer allocator and the package that has it.
fn debian_library(peer: Named) -> (&'static str, &'static str) {
    match peer {
        Named::Jemalloc => ("libjemalloc.so.2", "libjemalloc2"),
        Named::Mimalloc => ("libmimalloc.so.2", "libmimalloc2.0"),
        Named::Tcmalloc => ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
        Named::Glibc | Named::Retype => unreachable!("{peer} is not a Debian library"),
    }
}

const LIB_DIRS: [&str; 4] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// A library built by this workspace, beside the running `retype` binary.
pub fn beside_exe(name: &str, package: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot locate the retype binary")?;
    let dir = exe.parent().context("the retype binary has no directory")?;
    // Test binaries live one level down, in deps/.
    let candidates = [dir.join(name), dir.join("..").join(name)];
    candidates.iter().find(|p| p.is_file()).cloned().with_context(|| {
        format!("{name} is not built (looked in {}); build it with `cargo build --release -p {package}`", dir.display())
    })
}

/// The shared object that provides `allocator`, or `None` for glibc.
pub(crate) fn allocator_lib(allocator: &Allocator) -> Result<Option<PathBuf>> {
    let peer = match allocator {
        Allocator::Library(path) => return Ok(Some(path.clone())),
        Allocator::Named(Named::Glibc) => return Ok(None),
        Allocator::Named(Named::Retype) => {
            return beside_exe("libretype_malloc_preload.so", "retype-malloc-preload").map(Some)
        }
        Allocator::Named(peer) => *peer,
    };
    let (file, package) = debian_library(peer);
    LIB_DIRS
        .iter()
        .map(|d| Path::new(d).join(file))
        .find(|p| p.exists())
        .map(Some)
        .with_context(|| {
            format!(
                "{peer}: {file} not found in {}; install the Debian package {package}",
                LIB_DIRS.join(", ")
            )
        })
}

/// `LD_PRELOAD` for a program run on `libs` in this order (the recorder
/// before the allocator), followed by the caller's own `LD_PRELOAD`.
pub(crate) fn ld_preload<'a>(libs: impl IntoIterator<Item = Option<&'a Path>>) -> OsString {
    let old = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty());
    let parts: Vec<OsString> = libs
        .into_iter()
        .flatten()
        .map(OsString::from)
        .chain(old)
        .collect();
    parts.join(std::ffi::OsStr::new(":"))
}
