//! The decentralized capability protocol of seed 001 (chapter 4) on real
//! threads: the runtime that runs its nodes ([`runtime`]), the cases of
//! the thesis's evaluation ([`cases`]) and the latency study of `retype
//! caps protocol-bench` ([`latency`]).

pub mod cases;
pub mod latency;
pub mod runtime;
