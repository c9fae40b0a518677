//! Planted protocol bugs, for the model checker's own tests: each must be
//! found. A node is given one (`Node::plant`) only with the `mutations`
//! feature, which only test builds turn on; otherwise `Node::mutated` is a
//! constant `false` and the bugs' branches compile away.

/// One bug a node can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, strum::VariantArray)]
pub enum Mutation {
    /// The owner retypes without asking the other nodes about descendants
    /// in the way.
    RetypeSkipsCheck,
    /// The owner deletes its last copy as if no other node held one.
    DeleteIgnoresForeignCopies,
    /// A revoke's commit deletes nothing.
    RevokeSkipsSweep,
    /// Ownership moves without telling the other nodes' copies.
    MoveWithoutUpdate,
    /// A copy that failed on the other node keeps its source slot locked.
    LockKeptOnError,
    /// The owner deleting its last copy takes the new owner's acceptance
    /// for a refusal and asks again, forever: a livelock.
    MoveRetriedForever,
}
