//! libretype_recorder.so: an LD_PRELOAD library that records every call of the
//! malloc family into a retype trace while forwarding each call to the next
//! allocator in line (`dlsym(RTLD_NEXT)`), so it measures whichever allocator
//! the program runs on (seed 003's TLM).
//!
//! Environment ([`settings`], read once at start): `RETYPE_TRACE_FILE` names
//! the trace (no variable, no recording); `RETYPE_ALLOCATOR` is copied into the
//! trace's metadata; `RETYPE_STACK_DEPTH` is the most frames a call stack keeps
//! (default 32; 0: no stacks); `RETYPE_PAUSED` and `RETYPE_TOGGLE_SIGNAL`
//! start paused and name the signal that starts and stops recording;
//! `RETYPE_AGGREGATE`, `RETYPE_SNAPSHOT_MS`, `RETYPE_SAMPLE_BYTES` and
//! `RETYPE_SAMPLE_SEED` make it an aggregate or a sampled recording.
//! `RETYPE_RSS_MS` is the interval between RSS samples (0: none).
//! `retype record` sets them. A forked child writes
//! `FILE.PID` (`FILE.PID.N` if taken); an exec'd image goes on appending to its
//! process's file. When the file cannot be written (a full disk, the file-size
//! limit, the program closed its descriptor), recording stops with one line on
//! stderr and the program runs on.
//!
//! The modules, bottom-up: each imports only those listed before it.
//!
//! - [`sys`]: small wrappers over raw system calls and clocks;
//! - [`coarse`]: each thread's coarse clock (an aggregate recording's
//!   clock read every N calls);
//! - [`settings`]: the environment, read once at start;
//! - [`sample`]: sampling by bytes, each thread's countdown to its next sample;
//! - [`recording`]: whether events are recorded now;
//! - [`real`]: the next allocator's functions and the bootstrap arena used while dlsym runs;
//! - [`rseq`]: whether the thread was descheduled during a call (the kernel's rseq area);
//! - [`output`]: the trace file: naming, header, continuation across exec,
//!   and the stop, for good, when it cannot be written;
//! - [`gate`]: records written straight to the trace, never after its end record;
//! - [`rss`]: RSS samples, taken on the program's calls at an interval;
//! - [`control`]: recording windows: a paused start, the toggle signal, and
//!   the `window_start`/`window_stop` records;
//! - [`stack_table`]: each distinct stack once, with its id;
//! - [`blocks`]: the live blocks an aggregate or sampled recording follows, by address;
//! - [`cfi`]: the rule that leads from a frame to its caller's, from an
//!   object's call-frame information (gimli);
//! - [`modules`]: the loaded objects, for the unwinder and for offline symbolization;
//! - [`stacks`]: each call's stack, walked with per-thread cached rules;
//! - [`tally`]: an aggregate recording's per-stack counters, each thread's
//!   own, and those of threads that exited;
//! - [`thread`]: each thread's start and cost, its event buffer (mmap'd, no
//!   allocation inside the hooks, encoded a batch at a time), its state (one
//!   thread-local) and its exit;
//! - [`aggregate`]: an aggregate recording: each call counted into its
//!   thread's tally, the process's peak, snapshots, the counters written at the end;
//! - [`kept`]: what the recording keeps of each call: its event, counters, or a sample;
//! - [`phase_stats`]: the running phase's figures, kept by the hooks while a
//!   phase is active, for the program to read about itself;
//! - [`mark`]: the markers API (`retype_mark`, `retype_phase_stats`,
//!   declared in `include/retype.h`) and the `phase` records;
//! - [`process`]: start, fork, exec, `_exit`, fatal signals, process exit
//!   (`execl`, `execlp` and `execle`, C-variadic, are in `c/exec_variadic.c`,
//!   built by `build.rs`);
//! - [`hooks`]: the exported malloc family;
//! - [`mapping`]: the exported mapping calls (`mmap`, `munmap`, `mremap`,
//!   `brk`, `sbrk`), recorded beside the heap;
//! - [`got`]: a running process's calls redirected to the hooks (GOT slots rewritten);
//! - [`attach`]: the recorder loaded into a running process (`retype record
//!   --pid`): `retype_attach` and `retype_detach`, which the CLI calls in it.
//!
//! This crate exports `malloc`: nothing may link it as a Rust dependency.

// It has no public API: its documentation is read with `--document-private-items`, where the
// links above resolve.
#![allow(rustdoc::private_intra_doc_links)]

mod aggregate;
mod attach;
mod blocks;
mod cfi;
mod coarse;
mod control;
mod gate;
mod got;
mod hooks;
mod kept;
mod mapping;
mod mark;
mod modules;
mod output;
mod phase_stats;
mod process;
mod real;
mod recording;
mod rseq;
mod rss;
mod sample;
mod settings;
mod stack_table;
mod stacks;
mod sys;
mod tally;
mod thread;
