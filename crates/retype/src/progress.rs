//! Progress bars for commands that run longer than a second.
//!
//! A bar stays hidden for its first second and whenever standard error is
//! not a terminal, so scripts, pipes and tests see nothing of it.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a command runs before its bar appears.
const DELAY: Duration = Duration::from_secs(1);

pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: bool,
}

impl Progress {
    /// A bar of `len` steps labelled `what`.
    pub fn new(len: u64, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(what.to_string());
        Progress {
            bar,
            start: Instant::now(),
            shown: false,
        }
    }

    /// One step done; `msg` says what comes next.
    pub fn step(&mut self, msg: &str) {
        if !self.shown && self.start.elapsed() >= DELAY && std::io::stderr().is_terminal() {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar.set_message(msg.to_string());
        self.bar.inc(1);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
