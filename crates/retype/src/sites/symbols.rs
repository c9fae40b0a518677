//! Offline symbolization of recorded return addresses with addr2line (gimli):
//! function, file and line, inlined functions expanded, names demangled
//! (Rust and C++); functions without DWARF get their symbol-table name (the
//! dynamic one too, so a stripped library still names its exports). Each
//! address is looked up in the object the trace's module records place it
//! in, at its address relative to the object's load bias (programs built as
//! PIE and shared libraries load at a random base). The object is read from
//! the recorded path, or from its separate debug file under
//! `/usr/lib/debug/.build-id/` when there is one; an object whose build id
//! differs from the recorded one (rebuilt or upgraded since) is not trusted.
//! What cannot be resolved is shown as `module+0xoffset`, never dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use addr2line::Loader;
use object::{CompressionFormat, Object, ObjectSection};
use retype_trace::{Module, Stack, Trace};

/// One function of a stack, innermost first when a return address expands
/// into inlined calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Demangled; `module+0xoffset` when unresolved.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The object's file name (`libc.so.6`), or `?` outside every recorded object.
    pub module: String,
    /// The return address in the object's own terms (minus its load bias).
    pub offset: u64,
    /// Whether the function was found (in DWARF or a symbol table).
    pub resolved: bool,
}

impl Frame {
    /// `function (file:line)`, or the function alone.
    pub fn label(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{} ({}:{l})", self.function, short(f)),
            (Some(f), None) => format!("{} ({})", self.function, short(f)),
            _ => self.function.clone(),
        }
    }
}

/// A source path's last two components (`src/main.rs`).
fn short(path: &str) -> &str {
    let mut cut = path.rmatch_indices('/').map(|(i, _)| i);
    match (cut.next(), cut.next()) {
        (Some(_), Some(i)) => &path[i + 1..],
        _ => path,
    }
}

/// Symbolizes the stacks of one trace, caching objects and addresses.
pub struct Symbolizer<'t> {
    trace: &'t Trace,
    /// Per (path, build id): the loaded object, or `None` if it cannot be used.
    objects: HashMap<(String, Vec<u8>), Option<Loader>>,
    addresses: HashMap<(u32, u64), Rc<[Frame]>>,
    /// Objects that could not be read, and why (each said once).
    pub warnings: Vec<String>,
}

impl<'t> Symbolizer<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        Symbolizer {
            trace,
            objects: HashMap::new(),
            addresses: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The frames of `stack`, innermost first, inlined functions expanded.
    pub fn stack(&mut self, stack: &Stack) -> Vec<Frame> {
        stack
            .frames
            .iter()
            .flat_map(|&ret| self.frames(stack.segment, ret).to_vec())
            .collect()
    }

    /// The frames of return address `ret` in segment `segment`: the call
    /// one byte before it, innermost inlined function first.
    pub fn frames(&mut self, segment: u32, ret: u64) -> Rc<[Frame]> {
        if let Some(f) = self.addresses.get(&(segment, ret)) {
            return f.clone();
        }
        let trace = self.trace;
        let module = trace
            .modules
            .iter()
            .rev()
            .find(|m| m.segment == segment && m.contains(ret));
        let frames: Rc<[Frame]> = match module {
            None => vec![unresolved("?", ret)].into(),
            Some(m) => {
                // Wrapping: a recording may hold any address (fuzz target symbolize).
                let offset = ret.wrapping_sub(m.base);
                let name = file_name(&m.path);
                let mut found = self
                    .loader(m)
                    .map(|l| lookup(l, offset, name))
                    .unwrap_or_default();
                if found.is_empty() {
                    found.push(unresolved(name, offset));
                }
                found.into()
            }
        };
        self.addresses.insert((segment, ret), frames.clone());
        frames
    }

    /// The loader of module `m`'s object, loaded once.
    fn loader(&mut self, m: &Module) -> Option<&Loader> {
        let key = (m.path.clone(), m.build_id.clone());
        if !self.objects.contains_key(&key) {
            let loaded = open(m).map_err(|why| self.warnings.push(why)).ok();
            self.objects.insert(key.clone(), loaded);
        }
        self.objects[&key].as_ref()
    }
}

/// A frame known only by its object and offset.
fn unresolved(module: &str, offset: u64) -> Frame {
    Frame {
        function: format!("{module}+{offset:#x}"),
        file: None,
        line: None,
        module: module.to_string(),
        offset,
        resolved: false,
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The loader of module `m`: its separate debug file if installed, else the
/// object itself, provided its build id is the recorded one.
fn open(m: &Module) -> Result<Loader, String> {
    let path = Path::new(&m.path);
    if !path.is_absolute() {
        return Err(format!(
            "{}: not a file (frames in it stay module+offset)",
            m.path
        ));
    }
    let data = std::fs::read(path)
        .map_err(|e| format!("{}: {e} (frames in it stay module+offset)", m.path))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", m.path))?;
    let id = file.build_id().ok().flatten().unwrap_or_default();
    if !m.build_id.is_empty() && id != m.build_id {
        return Err(format!(
            "{}: its build id is {} but the recording's was {}: the file changed since (frames in it stay module+offset)",
            m.path,
            hex(id),
            m.build_id_hex()
        ));
    }
    let debug = debug_file(&m.build_id).filter(|_| !has_dwarf(&file));
    match &debug {
        Some(d) => {
            let name = d.display().to_string();
            let data = std::fs::read(d).map_err(|e| format!("{name}: {e}"))?;
            let file = object::File::parse(&*data).map_err(|e| format!("{name}: {e}"))?;
            check_compressed(&file, &name)?;
        }
        None => check_compressed(&file, &m.path)?,
    }
    Loader::new(debug.as_deref().unwrap_or(path)).map_err(|e| format!("{}: {e}", m.path))
}

/// Refuses an object whose compressed section claims more bytes than its compressed ones
/// can give: the loader reserves and clears all it claims before it inflates a byte (the
/// fuzzer's `symbolize` found a `.debug_info` of 280 compressed bytes claiming 2.5 GB, which took 2.5 GB).
/// A deflate stream expands at most 1032 times (258 bytes from about two bits); zstd's
/// blocks of one repeated byte, 128 KiB from 4 bytes, about 32,768 times.
fn check_compressed(file: &object::File, path: &str) -> Result<(), String> {
    for section in file.sections() {
        let Ok(range) = section.compressed_file_range() else {
            continue;
        };
        let most = match range.format {
            CompressionFormat::None => continue,
            CompressionFormat::Zlib => 1032,
            _ => 32 << 10,
        };
        if range.uncompressed_size > range.compressed_size.saturating_mul(most) {
            return Err(format!(
                "{path}: section {} claims {} bytes uncompressed from {} compressed, more than they can give: the file is corrupt (frames in it stay module+offset)",
                section.name().unwrap_or("?"),
                range.uncompressed_size,
                range.compressed_size
            ));
        }
    }
    Ok(())
}

fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info").is_some()
}

/// Debian's separate debug file of build id `id`, if installed.
fn debug_file(id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    let p = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{first:02x}/{}.debug",
        hex(rest)
    ));
    p.is_file().then_some(p)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The functions of the call before return address `offset` in `loader`'s
/// object, innermost first.
fn lookup(loader: &Loader, offset: u64, module: &str) -> Vec<Frame> {
    let probe = offset.wrapping_sub(1);
    let mut out = Vec::new();
    if let Ok(mut it) = loader.find_frames(probe) {
        while let Ok(Some(f)) = it.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.demangle().ok())
                .map(|n| n.into_owned());
            let (file, line) = f
                .location
                .map_or((None, None), |l| (l.file.map(str::to_string), l.line));
            out.push(Frame {
                resolved: function.is_some(),
                function: function.unwrap_or_default(),
                file,
                line,
                module: module.to_string(),
                offset,
            });
        }
    }
    // The outermost function from the symbol table when DWARF has no name
    // for it (or there is no DWARF).
    let symbol = || {
        loader
            .find_symbol(probe)
            .map(|s| addr2line::demangle_auto(s.into(), None).into_owned())
    };
    match out.last_mut() {
        Some(f) if !f.resolved => {
            if let Some(name) = symbol() {
                f.function = name;
                f.resolved = true;
            }
        }
        None => {
            if let Some(function) = symbol() {
                out.push(Frame {
                    function,
                    file: None,
                    line: None,
                    module: module.to_string(),
                    offset,
                    resolved: true,
                });
            }
        }
        _ => {}
    }
    // Inlined levels without a name keep their place as module+offset.
    for f in out.iter_mut().filter(|f| !f.resolved) {
        f.function = format!("{module}+{offset:#x}");
    }
    out
}
