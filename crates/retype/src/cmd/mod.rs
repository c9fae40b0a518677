//! One module per subcommand.

pub mod caps;
