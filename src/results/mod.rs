//! The run folder as data (DESIGN §4): its format types, the writer, the reader and the
//! summary computation. `eval` writes through it and `report` reads through it; it imports
//! neither.

pub mod formats;
pub mod frame_reader;
pub mod frames;
pub mod live;
pub mod lock;
pub mod metrics;
pub mod run;
pub mod store;
pub mod summary;
pub mod verify;
