//! Seed 000's study: memory-manager workloads run under placement policies,
//! summarised as the thesis's tables and compared with its logs.

pub mod cantrip;
pub mod cheri;
pub mod data;
pub mod latency;
pub mod log;
pub mod logcheck;
pub mod run;
pub mod series;
pub mod spec;
pub mod summary;
pub mod tables;
pub mod thesis;
