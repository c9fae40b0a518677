//! One module per subcommand.

pub mod study;
