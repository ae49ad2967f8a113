//! What a run records of its frames (docs/FORMATS.md): the `--frames` modes, the frame hashes
//! and the episode's hash over them (`episode.json`'s `frames`), and a frame's file name inside
//! its episode folder. Reading a frame back (its file, else a replay) is `frame_reader.rs`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
