//! Episodes and runs: concurrency, progress, resume, and the results store.

pub mod bench;
pub mod budget;
pub mod cache;
pub mod episode;
pub mod estimate;
pub mod frames;
pub mod merge;
mod merge_error;
mod merge_out;
pub mod replay;
pub mod runner;
pub mod shard;
pub mod shard_status;
pub mod startup;
