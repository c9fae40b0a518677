//! One module per subcommand.

pub mod replay;
pub mod record;
pub mod trace;
