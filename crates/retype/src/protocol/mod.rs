//! The decentralized capability protocol of seed 001 (chapter 4), whose
//! nodes are `retype_core::caps::protocol`'s: on real threads, the runtime
//! that runs them ([`runtime`]), the cases of the thesis's evaluation
//! ([`cases`]) and the latency study of `retype bench protocol`
//! ([`latency`]); and every interleaving of them model-checked by `retype
//! caps check` ([`check`], seed 001 chapter 5).

pub mod cases;
pub mod check;
pub mod latency;
pub mod runtime;
