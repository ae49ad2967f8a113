//! vlm-eval: a fast, seed-exact Crafter engine and an evaluation harness for vision-language
//! models.

pub mod agent;
pub mod bench;
pub mod checkcmd;
pub mod cli;
pub mod comparecmd;
pub mod crafter;
pub mod eval;
pub mod formats;
pub mod framescmd;
pub mod localbenchcmd;
pub mod mergecmd;
pub mod model;
pub mod report;
pub mod reportcmd;
pub mod runcmd;
pub mod runmodel;
pub mod serve;
pub mod sftcmd;
