//! Episodes and runs: concurrency, progress, resume, and the results store.

pub mod bench;
pub mod episode;
pub mod runner;
pub mod store;
