//! Everything that reads the results store: statistics, summaries, comparisons, the
//! regression gate, the HTML report and the SFT export.

pub mod baseline;
pub mod check;
pub mod compare;
pub mod html;
mod html_episode;
pub mod run;
pub mod sft;
pub mod stats;
pub mod summary;
pub mod svg;
