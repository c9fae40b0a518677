//! One module per subcommand.

pub mod record;
pub mod replay;
pub mod trace;
