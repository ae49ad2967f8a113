//! A run's frames, wherever they come from: the PNG file when the run saved it, else the game
//! replayed from the trajectory's actions. Every reader (report GIFs and thumbnails,
//! `export-sft`, previews) goes through [`FrameReader::load`]. Replaying needs the agent's
//! protocol and the textures, which `results` may not import (it imports only `crafter`), so the
//! replay engine lives in `eval::replay` and reaches readers as a [`Replayer`].
//!
//! Also here: the `--frames` modes and the hashes a run records for its frames (docs/FORMATS.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Which frame files a run writes (`--frames`); the trajectory records every frame's hash
/// whichever is chosen, and a frame not written can be replayed (`vlm-eval replay`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum FramesMode {
    /// Every env step's frame (`step_0000` = after reset).
    #[default]
    All,
    /// Only the frames the model was shown.
    Sent,
    /// No frame files.
    None,
}

impl FramesMode {
    /// The name run.json and episode.json use (`all`, `sent`, `none`).
    pub fn as_str(self) -> &'static str {
        match self {
            FramesMode::All => "all",
            FramesMode::Sent => "sent",
            FramesMode::None => "none",
        }
    }

    /// Whether a frame is written at the step it is rendered (`all` only; `sent` writes a
    /// frame when it is sent).
    pub fn writes_every_step(self) -> bool {
        self == FramesMode::All
    }
}

/// Lower-case hex sha256 of some bytes (a frame's PNG).
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// A frame's hash over its raw pixels (`rgb-sha256`, docs/FORMATS.md): sha256 of the width
/// and the height as little-endian u32, then the `height × width × 3` RGB bytes, row by row.
pub fn rgb_sha256(rgb: &[u8], width: usize, height: usize) -> String {
    let mut h = Sha256::new();
    h.update((width as u32).to_le_bytes());
    h.update((height as u32).to_le_bytes());
    h.update(rgb);
    format!("{:x}", h.finalize())
}

/// What a run's frame hashes cover (`episode.json` `frames.hash`, run.json `frame_hash`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FrameHashKind {
    /// sha256 of the frame's PNG bytes as the run encoded them (runs written before
    /// `rgb-sha256`; an episode.json without `frames.hash` holds these).
    #[serde(rename = "png-sha256")]
    #[default]
    Png,
    /// [`rgb_sha256`]: sha256 of the size and the raw RGB pixels (every run written now).
    #[serde(rename = "rgb-sha256")]
    Rgb,
}

impl FrameHashKind {
    /// The hash new runs record.
    pub const CURRENT: FrameHashKind = FrameHashKind::Rgb;

    /// The name files use (`png-sha256`, `rgb-sha256`).
    pub fn as_str(self) -> &'static str {
        match self {
            FrameHashKind::Png => "png-sha256",
            FrameHashKind::Rgb => "rgb-sha256",
        }
    }

    /// The hash of a frame given as its PNG file (decoded for `rgb-sha256`); an error is one
    /// line saying why the bytes are not a readable RGB PNG.
    pub fn of_png(self, png: &[u8]) -> Result<String, String> {
        match self {
            FrameHashKind::Png => Ok(sha256_hex(png)),
            FrameHashKind::Rgb => {
                let img = image::load_from_memory_with_format(png, image::ImageFormat::Png)
                    .map_err(|e| format!("not a readable PNG ({e})"))?;
                let (w, h) = (img.width() as usize, img.height() as usize);
                let rgb = img.into_rgb8();
                Ok(rgb_sha256(rgb.as_raw(), w, h))
            }
        }
    }
}

/// One frame's hash: its env step and its sha256 (of the kind the episode records).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameHash {
    /// Env step (0 = after reset).
    pub step: u32,
    /// The frame's hash (written or not), of the episode's [`FrameHashKind`].
    pub sha256: String,
}

/// `episode.json`'s `frames`: which files were written and a hash over every frame's hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeFrames {
    /// The `--frames` mode the files were written under.
    pub saved: FramesMode,
    /// Frames of the episode (env steps + 1).
    pub count: u32,
    /// [`frames_sha256`] over every frame in step order.
    pub sha256: String,
    /// The frames rendered before the first turn (step 0, and step 1 after a preset's reset
    /// Noop); later frames' hashes are in the trajectory.
    pub reset: Vec<FrameHash>,
    /// What every frame hash of the episode covers; absent (read as `png-sha256`) in files
    /// written before `rgb-sha256`.
    #[serde(default)]
    pub hash: FrameHashKind,
}

/// run.json's `frame_hash`: the kind every episode's frames record (`rgb-sha256` for a run
/// written now, and for one with no episode yet), or `mixed` when a resumed or merged folder
/// holds episodes of both kinds.
pub fn run_frame_hash<'a>(episodes: impl IntoIterator<Item = &'a EpisodeFrames>) -> &'static str {
    let mut kinds = episodes.into_iter().map(|f| f.hash);
    let Some(first) = kinds.next() else {
        return FrameHashKind::CURRENT.as_str();
    };
    if kinds.all(|k| k == first) {
        first.as_str()
    } else {
        "mixed"
    }
}

/// The hash over an episode's frame hashes: sha256 of each frame's lower-case hex sha256
/// followed by `\n`, in step order.
pub fn frames_sha256<'a>(hashes: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = Sha256::new();
    for x in hashes {
        h.update(x.as_bytes());
        h.update(b"\n");
    }
    format!("{:x}", h.finalize())
}

/// `frames/step_NNNN.png`: a frame's path inside its episode folder.
pub fn frame_rel(step: u32) -> String {
    format!("frames/step_{step:04}.png")
}

/// The step of a `frames/step_NNNN.png` path, if it is one.
pub fn step_of_rel(rel: &str) -> Option<u32> {
    rel.strip_prefix("frames/step_")?
        .strip_suffix(".png")?
        .parse()
        .ok()
}

/// Renders the frames of a complete episode again from its recorded actions, checking each
/// against the run's hashes (`eval::replay` implements it).
pub trait Replayer: Send + Sync {
    /// Every frame's PNG bytes as the run saves them, indexed by env step; an error is one
    /// line naming the episode, the step and what differs (or why it cannot replay).
    fn replay(&self, run: &Path, seed: i64) -> Result<Vec<Vec<u8>>, String>;
}

/// Why a frame could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// No file, and no way to replay it.
    #[error("{path}: {why}")]
    Missing {
        /// The frame file's path.
        path: String,
        /// Why it is missing and what to do.
        why: String,
    },
    /// The file exists but could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The frame file's path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Replaying the episode failed (one line naming the episode and step).
    #[error("{0}")]
    Replay(String),
}

impl FrameError {
    /// What went wrong, without the path.
    pub fn reason(&self) -> String {
        match self {
            FrameError::Missing { why, .. } => why.clone(),
            FrameError::Io { source, .. } => source.to_string(),
            FrameError::Replay(m) => m.clone(),
        }
    }
}

/// Where a frame was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its PNG file.
    File,
    /// Replayed from the trajectory.
    Replayed,
}

type Replayed = Result<Arc<Vec<Vec<u8>>>, String>;

/// Reads the frames of one run: the file when present, else a replay of the episode (done once
/// per episode and kept while that episode's frames are read).
pub struct FrameReader<'a> {
    run: PathBuf,
    replayer: Option<&'a dyn Replayer>,
    cached: Option<(i64, Replayed)>,
}

impl<'a> FrameReader<'a> {
    /// A reader of the run folder `run`; without a replayer a missing file is an error.
    pub fn new(run: &Path, replayer: Option<&'a dyn Replayer>) -> FrameReader<'a> {
        FrameReader {
            run: run.to_path_buf(),
            replayer,
            cached: None,
        }
    }

    /// The PNG bytes of one frame and where they came from.
    pub fn load(&mut self, seed: i64, step: u32) -> Result<(Vec<u8>, Origin), FrameError> {
        let path = super::run::episode_dir(&self.run, seed).join(frame_rel(step));
        match std::fs::read(&path) {
            Ok(bytes) => return Ok((bytes, Origin::File)),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(FrameError::Io {
                    path: path.display().to_string(),
                    source: e,
                })
            }
            Err(_) => {}
        }
        let Some(replayer) = self.replayer else {
            return Err(FrameError::Missing {
                path: path.display().to_string(),
                why: "no such file, and this reader cannot replay it (run `vlm-eval replay RUN` to write the frames)".into(),
            });
        };
        if self.cached.as_ref().map(|(s, _)| *s) != Some(seed) {
            self.cached = Some((seed, replayer.replay(&self.run, seed).map(Arc::new)));
        }
        let Some((_, replayed)) = &self.cached else {
            unreachable!("just filled")
        };
        let frames = replayed
            .as_ref()
            .map_err(|e| FrameError::Replay(e.clone()))?;
        match frames.get(step as usize) {
            Some(png) => Ok((png.clone(), Origin::Replayed)),
            None => Err(FrameError::Missing {
                path: path.display().to_string(),
                why: format!(
                    "no such file, and the episode has only {} frames",
                    frames.len()
                ),
            }),
        }
    }
}

/// One frame of a run: its file when present, else replayed (see [`FrameReader`]).
pub fn load(
    run: &Path,
    seed: i64,
    step: u32,
    replayer: Option<&dyn Replayer>,
) -> Result<Vec<u8>, FrameError> {
    FrameReader::new(run, replayer)
        .load(seed, step)
        .map(|(png, _)| png)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    impl Replayer for Counting {
        fn replay(&self, _run: &Path, seed: i64) -> Result<Vec<Vec<u8>>, String> {
            self.0.fetch_add(1, Ordering::Relaxed);
            if seed == 9 {
                return Err("seed 9 step 3: frame sha256 differs".into());
            }
            Ok((0..4u8).map(|i| vec![i, seed as u8]).collect())
        }
    }

    #[test]
    fn files_first_then_one_replay_per_episode() {
        let d = std::env::temp_dir().join(format!("vlm-eval-frames-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let ep = super::super::run::episode_dir(&d, 2);
        std::fs::create_dir_all(ep.join("frames")).unwrap();
        std::fs::write(ep.join(frame_rel(1)), b"file").unwrap();
        let r = Counting(AtomicUsize::new(0));
        let mut reader = FrameReader::new(&d, Some(&r));
        assert_eq!(reader.load(2, 1).unwrap(), (b"file".to_vec(), Origin::File));
        assert_eq!(r.0.load(Ordering::Relaxed), 0);
        assert_eq!(reader.load(2, 0).unwrap(), (vec![0, 2], Origin::Replayed));
        assert_eq!(reader.load(2, 3).unwrap(), (vec![3, 2], Origin::Replayed));
        assert_eq!(r.0.load(Ordering::Relaxed), 1, "one replay per episode");
        let e = reader.load(2, 7).unwrap_err().to_string();
        assert!(
            e.contains("step_0007.png") && e.contains("only 4 frames"),
            "{e}"
        );
        let e = reader.load(9, 0).unwrap_err().to_string();
        assert_eq!(e, "seed 9 step 3: frame sha256 differs");
        let e = load(&d, 2, 0, None).unwrap_err().to_string();
        assert!(e.contains("vlm-eval replay"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn names_hashes_and_modes() {
        assert_eq!(frame_rel(12), "frames/step_0012.png");
        assert_eq!(step_of_rel("frames/step_0012.png"), Some(12));
        assert_eq!(step_of_rel("frames/x.png"), None);
        // sha256("a\nb\n") computed independently (Python hashlib).
        assert_eq!(
            frames_sha256(["a", "b"]),
            "911169ddaaf146aff539f58c26c489af3b892dff0fe283c1c264c65ae5aa59a2"
        );
        for m in [FramesMode::All, FramesMode::Sent, FramesMode::None] {
            let j = serde_json::to_value(m).unwrap();
            assert_eq!(j.as_str(), Some(m.as_str()));
        }
        assert_eq!(FramesMode::default(), FramesMode::All);
    }
}
