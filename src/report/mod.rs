//! Everything that reads the results store: statistics, summaries and the HTML report.

pub mod html;
pub mod html_cmd;
mod html_episode;
pub mod run;
pub mod stats;
pub mod summary;
pub mod svg;
