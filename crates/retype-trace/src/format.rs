//! The file formats `retype trace convert` reads and writes, and how a file's
//! format is recognised.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use strum::{Display, EnumString, VariantArray};

use crate::requests::{from_events, to_events, Requests};
use crate::trace::Trace;
use crate::{codec, csv, malloclab, valgrind, wee_alloc};

/// A trace format, named on the command line as `FromStr` and `Display`
/// spell it (`rtr`, `rep`, `wee_alloc` or `wee`, `valgrind`, `csv`).
#[derive(Display, EnumString, VariantArray)]
#[strum(serialize_all = "lowercase")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The retype binary trace (`.rtr`).
    Rtr,
    /// wee_alloc's `Alloc(N),` / `Free(K),` traces (`.trace`).
    #[strum(to_string = "wee_alloc", serialize = "wee")]
    WeeAlloc,
    /// `valgrind --trace-malloc=yes` stderr.
    Valgrind,
    Csv,
    /// CS:APP malloc-lab request traces (`.rep`).
    Rep,
}

impl Format {
    /// The format called `name`, or an error that names every format.
    pub fn from_name(name: &str) -> anyhow::Result<Format> {
        name.parse().map_err(|_| {
            anyhow::anyhow!("unknown trace format {name:?} (known: {})", Format::names())
        })
    }

    /// Every format's name, for messages.
    fn names() -> String {
        let names: Vec<String> = Format::VARIANTS.iter().map(ToString::to_string).collect();
        names.join(", ")
    }

    /// The format of an existing file: the magic number, else the extension,
    /// else the look of its first lines.
    pub fn detect(path: &Path, head: &[u8]) -> anyhow::Result<Format> {
        if head.starts_with(&codec::MAGIC) {
            return Ok(Format::Rtr);
        }
        if let Some(f) = Format::from_extension(path) {
            return Ok(f);
        }
        let text = String::from_utf8_lossy(&head[..head.len().min(4096)]);
        if text
            .lines()
            .any(|l| l.starts_with("--") && l.contains("-- malloc("))
        {
            return Ok(Format::Valgrind);
        }
        if text.starts_with("Alloc(") {
            return Ok(Format::WeeAlloc);
        }
        if text.starts_with(csv::HEADER) {
            return Ok(Format::Csv);
        }
        bail!(
            "{}: cannot tell the trace format; name it with --from ({})",
            path.display(),
            Format::names()
        )
    }

    /// The format an output file name asks for.
    pub fn from_extension(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "rtr" => Some(Format::Rtr),
            "trace" => Some(Format::WeeAlloc),
            "csv" => Some(Format::Csv),
            "rep" => Some(Format::Rep),
            "vg" => Some(Format::Valgrind),
            _ => None,
        }
    }
}

/// A file read whole: its bytes and its format.
struct Loaded {
    file: String,
    bytes: Vec<u8>,
    format: Format,
}

impl Loaded {
    /// Reads `path`, in format `format` (detected when `None`).
    fn read(path: &Path, format: Option<Format>) -> anyhow::Result<Loaded> {
        let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let format = match format {
            Some(f) => f,
            None => Format::detect(path, &bytes)?,
        };
        Ok(Loaded {
            file: path.display().to_string(),
            bytes,
            format,
        })
    }

    /// The trace of events the file holds (a `.rep` file's requests as events).
    fn events(&self) -> anyhow::Result<Trace> {
        let text = || {
            std::str::from_utf8(&self.bytes)
                .with_context(|| format!("{}: not UTF-8 text", self.file))
        };
        // Text formats' errors name the file; the binary reader's name the byte.
        Ok(match self.format {
            Format::Rtr => Trace::read(&self.bytes[..]).with_context(|| self.file.clone())?,
            Format::WeeAlloc => wee_alloc::parse(&self.file, text()?)?,
            Format::Valgrind => valgrind::parse(&self.file, text()?)?,
            Format::Csv => csv::parse(&self.file, text()?)?,
            Format::Rep => to_events(
                &malloclab::parse(&self.file, &self.bytes)?,
                "malloc-lab .rep",
            ),
        })
    }
}

/// Reads a trace in format `format` (detected when `None`).
pub fn load(path: &Path, format: Option<Format>) -> anyhow::Result<Trace> {
    Loaded::read(path, format)?.events()
}

/// Reads any trace as the requests a replay runs, with the trace of events it came from
/// (`None` for a `.rep` file, which holds requests already).
pub fn load_requests(
    path: &Path,
    format: Option<Format>,
) -> anyhow::Result<(Requests, Option<Trace>)> {
    let loaded = Loaded::read(path, format)?;
    if loaded.format == Format::Rep {
        return Ok((malloclab::parse(&loaded.file, &loaded.bytes)?, None));
    }
    let trace = loaded.events()?;
    Ok((from_events(&trace).0, Some(trace)))
}

/// Writes `trace` to `path` in format `format`.
pub fn save(trace: &Trace, path: &Path, format: Format) -> anyhow::Result<()> {
    let file =
        fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let out = std::io::BufWriter::new(file);
    let r = match format {
        Format::Rtr => trace.write(out),
        Format::Csv => csv::write(trace, out),
        Format::Rep => {
            let (mut requests, _) = from_events(trace);
            malloclab::clamp_alignments(&mut requests.requests);
            let mut out = out;
            malloclab::write(&mut out, 0, 1, &requests.requests).and_then(|()| out.flush())
        }
        Format::WeeAlloc | Format::Valgrind => {
            bail!("{format:?} is an input format only; write rtr or csv")
        }
    };
    r.with_context(|| format!("cannot write {}", path.display()))
}
