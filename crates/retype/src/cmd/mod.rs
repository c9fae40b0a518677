//! One module per subcommand.

pub mod bench;
pub mod replay;
pub mod study;
