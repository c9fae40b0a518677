//! What a trace holds: allocation events, per-thread summaries and metadata,
//! and beside the heap the process's RSS samples and mapping calls.

/// A malloc-family operation. The numeric codes are the on-disk op codes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, strum::VariantArray,
)]
#[repr(u8)]
pub enum Op {
    #[default]
    Malloc = 1,
    Calloc = 2,
    Realloc = 3,
    Free = 4,
    PosixMemalign = 5,
    AlignedAlloc = 6,
    Memalign = 7,
    Valloc = 8,
    Pvalloc = 9,
}

impl Op {
    /// Every op, in code order.
    pub const ALL: &'static [Op] = <Op as strum::VariantArray>::VARIANTS;

    /// The op with on-disk code `code`, if any.
    pub fn from_code(code: u8) -> Option<Op> {
        Op::ALL.get(usize::from(code).wrapping_sub(1)).copied()
    }

    /// The C function name, also used in CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Op::Malloc => "malloc",
            Op::Calloc => "calloc",
            Op::Realloc => "realloc",
            Op::Free => "free",
            Op::PosixMemalign => "posix_memalign",
            Op::AlignedAlloc => "aligned_alloc",
            Op::Memalign => "memalign",
            Op::Valloc => "valloc",
            Op::Pvalloc => "pvalloc",
        }
    }

    /// The op whose [`Op::name`] is `name`.
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// Whether the op carries an explicit alignment argument.
    pub fn has_align(self) -> bool {
        matches!(self, Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign)
    }

    /// Whether the op takes a pointer argument (`ptr`).
    pub fn has_ptr(self) -> bool {
        matches!(self, Op::Realloc | Op::Free)
    }

    /// Whether the op has a size argument and returns a block (`ret`).
    pub fn allocates(self) -> bool {
        self != Op::Free
    }
}

/// One call of a malloc-family function.
///
/// Fields an op does not use are 0: `size`, `align` and `ret` for `free`,
/// `ptr` for the plain allocators, `align` for all but the aligned ones.
/// `calloc`'s size is the product of its two arguments. An address of 0 is
/// NULL: a failed allocation returns 0, `free(NULL)` has `ptr` 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Event {
    pub op: Op,
    /// The OS thread id (Linux tid), or 0 for traces without threads.
    pub thread: u32,
    /// When the call started, in ns on the trace's clock.
    pub time_ns: u64,
    /// Time spent inside the allocator for this call, in ns (0 if unknown).
    pub latency_ns: u64,
    /// The thread was switched out during the call (preempted, blocked, moved to
    /// another CPU or interrupted by a signal), so `latency_ns` may hold time it
    /// did not run. False if not known: see the trace's `descheduling` metadata.
    pub descheduled: bool,
    pub size: u64,
    pub align: u64,
    /// The pointer argument of `realloc` and `free`.
    pub ptr: u64,
    /// The returned block.
    pub ret: u64,
    /// The call stack the call was made from: in a [`Trace`](crate::Trace)
    /// `stacks[stack - 1]`, in a [`Record`] stream the id of a [`Record::Stack`]
    /// of the same segment; 0 = not recorded.
    pub stack: u32,
}

impl Event {
    /// The event with op `op` and all fields the op does not use set to 0.
    pub fn canonical(mut self) -> Event {
        let op = self.op;
        if !op.allocates() {
            self.size = 0;
            self.ret = 0;
        }
        if !op.has_align() {
            self.align = 0;
        }
        if !op.has_ptr() {
            self.ptr = 0;
        }
        self
    }
}

/// What one thread cost, measured when it exited (seed 003's TLM metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ThreadSummary {
    pub thread: u32,
    /// Thread start and end on the trace's clock, in ns.
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPU time in user and kernel mode, in ns.
    pub user_ns: u64,
    pub system_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl ThreadSummary {
    pub fn lifetime_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// TLM's wait time: lifetime − (user + system), never below 0.
    pub fn wait_ns(&self) -> u64 {
        self.lifetime_ns()
            .saturating_sub(self.user_ns.saturating_add(self.system_ns))
    }
}

/// An object (the program, a shared library) loaded in a recorded process, so
/// that return addresses can be symbolized offline.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Module {
    /// The file it was loaded from, as the loader names it.
    pub path: String,
    /// The load bias: an address in the process minus `base` is the address
    /// the object's own headers and debug information use.
    pub base: u64,
    /// The range of addresses it occupies in the process, `[start, end)`.
    pub start: u64,
    pub end: u64,
    /// The GNU build id (`NT_GNU_BUILD_ID`), empty if it has none.
    pub build_id: Vec<u8>,
    /// In a [`Trace`](crate::Trace): the index of the segment (program image)
    /// it belongs to; in a [`Record`] stream: the segment's number in the file.
    pub segment: u32,
}

/// A call stack: the return addresses of the calls that led to a
/// malloc-family call, innermost (the caller of `malloc`) first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stack {
    pub frames: Vec<u64>,
    /// The stack went deeper than the recorder's depth: its outer frames are missing.
    pub truncated: bool,
    /// As for [`Module::segment`].
    pub segment: u32,
}

impl Module {
    /// The build id in hex, as `file` and debuginfod spell it.
    pub fn build_id_hex(&self) -> String {
        self.build_id.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }
}

/// Where a trace that stops before its last end record stops: a recording
/// whose process was killed (SIGKILL) or whose disk filled up. What comes
/// before `at_byte` reads; the unfinished record after it, if any, does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutShort {
    /// The file offset where the readable part ends: the start of the record
    /// the file ends inside, or the file's length when it ends between records.
    pub at_byte: u64,
    /// The events read before it, all segments together.
    pub events: u64,
}

/// One item of a trace stream, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A key/value pair describing the trace (program, pid, allocator, source...).
    Meta(String, String),
    Event(Event),
    Thread(ThreadSummary),
    /// The end of the trace, with the number of events the writer wrote.
    End {
        events: u64,
    },
    /// A loaded object (format 2).
    Module(Module),
    /// A call stack and the id events of its segment name it by (format 2).
    Stack {
        id: u32,
        stack: Stack,
    },
    /// An aggregate recording's counters of the stack its segment names `id`
    /// (0: calls recorded without a stack).
    Counters {
        id: u32,
        counters: Counters,
    },
    /// An aggregate recording's live bytes at one moment.
    Snapshot(Snapshot),
    /// An RSS sample (tag 9).
    Rss(RssSample),
    /// A mapping call (tag 10); its stack is an id as an event's is.
    Mapping(Mapping),
}

/// What an aggregate recording (`retype record --aggregate`) keeps of one
/// call stack in one segment, instead of its events: the figures
/// [`sites`](crate::sites) would count from them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Allocating calls that returned a block, and the bytes they asked for.
    pub calls: u64,
    pub bytes: u64,
    /// Allocating calls that returned NULL.
    pub failed: u64,
    /// Its blocks freed (or moved by realloc) while recording.
    pub frees: u64,
    /// Its blocks and bytes live when the segment's live bytes peaked.
    pub peak_blocks: u64,
    pub peak_bytes: u64,
    /// Its blocks and bytes still live when the segment ended.
    pub leaked_blocks: u64,
    pub leaked_bytes: u64,
    /// Its blocks freed before their thread allocated anything else.
    pub temporary: u64,
}

impl Counters {
    /// The fields in file order.
    pub fn fields(&self) -> [u64; 9] {
        [
            self.calls,
            self.bytes,
            self.failed,
            self.frees,
            self.peak_blocks,
            self.peak_bytes,
            self.leaked_blocks,
            self.leaked_bytes,
            self.temporary,
        ]
    }

    /// The counters whose fields in file order are `f`.
    pub fn from_fields(f: [u64; 9]) -> Counters {
        let [calls, bytes, failed, frees, peak_blocks, peak_bytes, leaked_blocks, leaked_bytes, temporary] =
            f;
        Counters {
            calls,
            bytes,
            failed,
            frees,
            peak_blocks,
            peak_bytes,
            leaked_blocks,
            leaked_bytes,
            temporary,
        }
    }
}

/// A call outside the malloc family that maps or unmaps memory. The numeric
/// codes are the on-disk codes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, strum::VariantArray)]
#[repr(u8)]
pub enum MapOp {
    #[default]
    Mmap = 1,
    Munmap = 2,
    Mremap = 3,
    /// `brk` or `sbrk`: the program break moved.
    Brk = 4,
}

impl MapOp {
    /// The op with on-disk code `code`, if any.
    pub fn from_code(code: u64) -> Option<MapOp> {
        let ops = <MapOp as strum::VariantArray>::VARIANTS;
        ops.get(usize::try_from(code).ok()?.wrapping_sub(1))
            .copied()
    }

    /// The C function name (`brk` for both `brk` and `sbrk`), also used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            MapOp::Mmap => "mmap",
            MapOp::Munmap => "munmap",
            MapOp::Mremap => "mremap",
            MapOp::Brk => "brk",
        }
    }
}

/// The live bytes of an aggregate recording at one moment, for the whole
/// process and its stacks with the most live bytes then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// When, in ns on the trace's clock.
    pub time_ns: u64,
    /// Bytes live in the whole process.
    pub live_bytes: u64,
    /// `(stack, live bytes)` of the top stacks, most first: in a
    /// [`Trace`](crate::Trace) the stack's index + 1 (as `Event::stack`), in
    /// a [`Record`] stream its id (0 in both: the calls without a stack).
    pub stacks: Vec<(u32, u64)>,
}

/// One successful `mmap`, `munmap`, `mremap`, `brk` or `sbrk` call of the
/// program (failed calls change nothing and are not recorded).
///
/// | op | `addr` | `len` | `old_addr` | `old_len` |
/// |---|---|---|---|---|
/// | mmap | the mapping returned | length asked | 0 | 0 |
/// | munmap | the range unmapped | its length | 0 | 0 |
/// | mremap | the mapping returned | its new length | the old mapping | its length |
/// | brk | the break after the call | 0 | the break before | 0 |
///
/// `prot` and `flags` are mmap's (mremap's flags for mremap, 0 otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mapping {
    pub op: MapOp,
    pub thread: u32,
    /// When the call started, in ns on the trace's clock.
    pub time_ns: u64,
    pub addr: u64,
    pub len: u64,
    pub old_addr: u64,
    pub old_len: u64,
    pub prot: u32,
    pub flags: u32,
    /// As [`Event::stack`].
    pub stack: u32,
    /// As [`Module::segment`].
    pub segment: u32,
}

/// The process's resident set size at one moment (`/proc/self/statm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RssSample {
    /// In ns on the trace's clock.
    pub time_ns: u64,
    pub rss_bytes: u64,
    /// As [`Module::segment`].
    pub segment: u32,
}
