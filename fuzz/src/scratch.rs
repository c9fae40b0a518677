//! Files for the entry points that read a path (`format::load`, a study's
//! `log:PATH`, the symbolizer's objects): a directory of this thread's under
//! the temporary directory (`TMPDIR`), its files rewritten for each input and
//! removed when the thread ends.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The directory, removed on drop.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

thread_local! {
    static DIR: RefCell<Option<Dir>> = const { RefCell::new(None) };
}

/// This thread's directory, made on first use.
pub fn dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    DIR.with(|d| {
        d.borrow_mut()
            .get_or_insert_with(|| {
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let dir =
                    std::env::temp_dir().join(format!("retype-fuzz-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&dir).expect("the temporary directory is writable");
                Dir(dir)
            })
            .0
            .clone()
    })
}

/// File `name` of this thread's directory, holding `data`.
pub fn file(name: &str, data: &[u8]) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, data).expect("the temporary directory is writable");
    path
}

/// File `name` of this thread's directory, gone.
pub fn remove(name: &str) -> PathBuf {
    let path = dir().join(name);
    if let Err(e) = std::fs::remove_file(&path) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::NotFound,
            "{}: {e}",
            path.display()
        );
    }
    path
}
