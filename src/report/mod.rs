//! Everything that reads the results store: statistics, summaries and the SFT export.

pub mod run;
pub mod sft;
pub mod sft_cmd;
pub mod stats;
pub mod summary;
