//! `CliError`: a one-line message and the exit code it ends the program with. A leaf: it
//! imports no command.

/// Exit code for bad usage or input.
pub const EXIT_USAGE: i32 = 2;

/// An error that ends the program with a specific exit code and a one-line message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    /// Process exit code.
    pub code: i32,
    /// One-line message.
    pub message: String,
}

impl CliError {
    /// A usage/input error (exit 2).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }
}
