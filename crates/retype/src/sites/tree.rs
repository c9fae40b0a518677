//! Call stacks as a tree weighted by bytes: each node holds the bytes of the stacks that pass
//! through it, its children by frame label. Built from the innermost frame it is massif's heap
//! tree (callers below); from the outermost, the flame graph (callees above).

use std::collections::BTreeMap;

/// A node of the tree (the root: every stack).
#[derive(Default)]
pub struct StackTree {
    pub bytes: u64,
    pub children: BTreeMap<String, StackTree>,
}

impl StackTree {
    /// Adds `bytes` along `path`, from this node down.
    pub fn add(&mut self, path: &[String], bytes: u64) {
        self.bytes += bytes;
        if let Some((first, rest)) = path.split_first() {
            self.children
                .entry(first.clone())
                .or_default()
                .add(rest, bytes);
        }
    }
}
