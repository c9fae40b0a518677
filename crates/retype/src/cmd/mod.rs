//! One module per subcommand.

pub mod bench;
pub mod caps;
pub mod cheri;
pub mod cheri_study;
pub mod record;
pub mod replay;
pub mod report;
pub mod study;
pub mod sweep;
pub mod tlm;
pub mod trace;
pub mod vm;
