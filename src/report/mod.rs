//! Everything that reads the results store: statistics, summaries, comparisons and the
//! regression gate.

pub mod baseline;
pub mod check;
pub mod compare;
pub mod run;
pub mod stats;
pub mod summary;
