//! Everything that reads the results store: statistics and summaries.

pub mod run;
pub mod stats;
pub mod summary;
