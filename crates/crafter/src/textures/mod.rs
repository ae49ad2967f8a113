//! Textures for rendering Crafter observations.
//!
//! Crafter 1.8.3 draws every tile, creature and inventory icon from a small set of 16×16 PNG
//! files in its `assets/` folder. This module provides two interchangeable [`TextureSet`]s:
//!
//! * **official** — crafter's own files, loaded from a directory and verified byte-for-byte
//!   against the sha256 table of crafter 1.8.3 ([`TextureSet::load_official`]). Pixels are the
//!   raw 8-bit samples as stored (RGB stays 3 channels, RGBA stays 4; gamma and ICC profiles are
//!   ignored), exactly what `imageio` hands crafter. Only this set reproduces crafter's
//!   observations bit-for-bit.
//! * **builtin** — our own hand-drawn 16×16 sprites compiled into the binary
//!   ([`TextureSet::builtin`]), using the same names and channel counts. Good for running
//!   without crafter installed; the pictures differ from crafter's.
//!
//! [`TextureSet::discover`] picks the official set from an explicit folder, `$CRAFTER_ASSETS`,
//! the per-user cache filled by [`fetch_official`] (`vlm-eval assets fetch`), or an installed
//! `crafter` Python package, and falls back to the builtin set with a warning.
//! [`TextureSet::fingerprint`] identifies the set in results files.

mod discover;
mod fetch;
mod machine;
mod sprites;

pub use discover::FetchPolicy;
pub use fetch::fetch_official;
pub use machine::cache_dir;

use std::collections::HashMap;
use std::fmt;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::Duration;

use image::codecs::png::PngDecoder;
use image::{ColorType, DynamicImage, ImageDecoder};
use sha2::{Digest, Sha256};

/// The crafter release whose textures are pinned by this module.
pub const CRAFTER_VERSION: &str = "1.8.3";

/// Name of the folder under [`cache_dir`] that [`fetch_official`] fills.
pub const CACHE_SUBDIR: &str = "crafter-1.8.3-assets";

/// Side length in pixels of every texture crafter ships.
const SIZE: usize = 16;

/// How long `discover` waits for the Python interpreter to locate an installed crafter.
const PYTHON_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The fix suggested by every "these are not the right textures" error.
const FIX: &str = "point --assets at crafter's assets folder or run `vlm-eval assets fetch`";

/// sha256 of every file in crafter 1.8.3's `crafter/assets/` folder (all 56, used or not), in
/// `sha256sum` format.
const OFFICIAL_SHA256SUMS: &str = "\
120231d0a7a982b2d7fda7b39f04f23d4b98dfd69f083921f5b1ba5c23447351  1.png\n\
1efeccfbf03d411f650e76ea35c2435f6042ef6d9c74f81e7413772104b84685  2.png\n\
b698f244fb4f64cfb5c2b06b6a4c7990419633aac7d6b03dabd637a473105e4d  3.png\n\
3acbe8a49a15f5053e43fc4198cd9021da42b85bb8454c154cbccdc540d0c3a1  4.png\n\
ac1935cf69770cac7ca75b1e39a2cf0b6ff553e313cd85eb13177a3850fddd91  5.png\n\
3ccbedf1d8b7aac4056f69410337636c12bddd336818bdff00940bf21719eda1  6.png\n\
d77c6fe75de68aa7e9f83a7baeb0aa3b6dae53197b30eaafa539e0b4b0c65cc0  7.png\n\
5af948de69d2d8d34b54dd25a014f268329bf69d3a55f0b5d2761dcb6ff02e5a  8.png\n\
17c5890d6f2c2f7afd53acab573c5c090d32b03f0d038e7556f1a90d8f862a8c  9.png\n\
10116ec9d829bc708dd330ecd634706eef244069339964b07d6d5fb9e6dbeabc  arrow-down.png\n\
5ea30987e2aba7ea66c3a2b06a442663afec3ecdf239aca4c23c3f760068c67a  arrow-left.png\n\
93e8aa79ee3226f878a1abf705b11acfcc4c4ff9675cf9e402f72cb1dd5fcd68  arrow-right.png\n\
d00bf0b856a879efa5bb5a4ad31ee6ead5047ae1a19ba72b6a41b0af24e18e9a  arrow-up.png\n\
b2f97fe4bcd099464a15c9b64b3d60a3260b5adde5c1501b509129bb7f283fbe  coal.png\n\
e2f4229e756ef169770a68ba74e826fcdbb4ff87e8dd6addc32a4653e53ad4ea  cow.png\n\
c2ed38b43accb5891a1b994c44b4922fea818ccf26c3bca07ade627ccb2a4c90  debug-2.png\n\
533085d8459425783246ec160d09c7b6c8305b7875dcdd89fddd201c36606305  debug-3.png\n\
6d3dfdfa59b006aeade48e8737239e987e84f8ec7aae101864588971ce093e7d  debug.png\n\
bf829ffe6da2745bb4c33c28c08da89857632c6b40275eb13a6a2ad12b111ea3  diamond.png\n\
2f41572d8f2a32f3527c012999bc289a41f00c8c057b8262f9ce7561dc00a6a1  drink.png\n\
6cf2ba191225dd41fcbf0f7d19592f80c48dd75254792826bd06017d65f04b10  energy.png\n\
833eddb225c7f7951bf5ed920310c07ae295ce82ba37d11824f9c337e9060059  fence.png\n\
d68036a77b8e4a39cb19ffa8b68cb41a6da1a0445eda6750c511b9340d7e654c  food.png\n\
50e534adaba8b20473f87dabc34f2b41a091ad438a80c71e28f3533317316b4c  furnace.png\n\
7472c8bde25fa151fb44390b7ac138d4befe8cb25cd4f51fc394e48f7077050f  grass.png\n\
bdec6a406466e2f67c9fab2e234fd3309e7d5f7b73770371b09c204688867510  health.png\n\
f008b904df2dc96b2c279ae66d035676c31e59e3fc7a216f9f9279c9aa6ca911  iron.png\n\
f7aa1a76ac1a679b2b871a79787ae1e2085000dd731927f1b549ad0850c7a3c1  iron_pickaxe.png\n\
97838202afa0aadf79de1f80a9b0530698bbe6409e88aea6687ade12f1a962ab  iron_sword.png\n\
c1055f45abfb586adcd83e3d45bfe56ade2c5f4bcf3f7b559b0f1aae10aea2a6  lava.png\n\
3c3082108f7b304202eb32d31e888fccab275e0801b89f7f8e9ff6731659df83  leaves.png\n\
7e46d49a17c40b122ba222ab2427387b87be9a24aab2761db4ca81d57139955d  log.png\n\
97f1f7d5e059f74727becf46043cf8555adafe5b6a613cad9f406580c12b405f  path.png\n\
c81d02dfc8e04356b1ce4833f5493ea37fe834eecf666276abb2116a8fcc7bc0  plant-ripe.png\n\
ad8137230ce5299ad613858aaa1514d044965570f2426f33d99a3a0ee72df4f5  plant-young.png\n\
5fb13d8db6b845f08c0232f367694f7bc514a772d9daa0dae7414892c8da37ed  plant.png\n\
a8080519b7dc3e25f48a86cc009ed9d8f566ab3be6585edea04396c8b3307a1a  player-down.png\n\
3dc10f41b6d9de35fbf187198fbd12ec7063999778c69fe0610b46be7e580e42  player-left.png\n\
4819936965bfea9d6e49f0a982524707d20ce0169502fd58ea93d2eb45a18105  player-right.png\n\
2e1ee4820df89238cb2c05b0908c58950225a39799768534517b1269e6d881d7  player-sleep.png\n\
add9d032dbb89dbf5c8ea8ed1e216f5d6cb674af8cea5c8187cdbafca5793ac2  player-up.png\n\
7888aeb07c336d1a46c8e800bb18ed4abb0411b23a9d89f365cf80d9fe8e116c  player.png\n\
0597e7be6eed69794298245776ce0c715bfd709be510e5dde39a57925f529c96  sand.png\n\
f9d0e32b4b1e8e5add1dd3d4f8c16c281c5801b634e599c4821d7f81e7e47a3d  sapling.png\n\
f101847fc480fb1a466b88747a2716f768e92a886621b0f78adb3781c1017d6e  skeleton.png\n\
b583094301e6040472e0cce41d33e2907cd3fcb6725d440dbcbafb74aa3b7522  stone.png\n\
9278c34d104f54f859c10fb639f4ad1e98c74d420e5e05de74b59bf26b2af01c  stone_pickaxe.png\n\
5f730b59d737691b1d72346178253f830e947c00d395d96a52c17d5f4d3ccc27  stone_sword.png\n\
1f0486085a197cc9331aa7f38e08d16cc34a00d147a5f7d4211e3b4ee7c2b3fe  table.png\n\
6980c8bc2d440799f25e83e2c7fa1c9ee4716f49657c379468e99e47bd096af1  tree.png\n\
e1348e977678022203289715d0a753daf4ef10184d7ff0d8b511c1256ca74194  unknown.png\n\
71a1c90fbd6cf37993149e07f1cca9cdd85f7e427298d8cdf7a37b53d2a2f280  water.png\n\
1111de9fc2ebf2d23bda6c95db617b860531db56344a13f129b2d8969140b8e4  wood.png\n\
d4e967445261e455e888f8d27f6c5331d8e880c11bacd9387fcf11508a9ddcc4  wood_pickaxe.png\n\
5af5aca75b7dba454c7176481b71c2e35d2fb1619acced88b14ca3732488e9ce  wood_sword.png\n\
676685319782495aca2ad3a92c28add81353898292574eac2e6fc867d33bfa0a  zombie.png
";

/// `(file name, sha256 hex)` of every file in crafter 1.8.3's assets folder.
fn official_files() -> impl Iterator<Item = (&'static str, &'static str)> {
    OFFICIAL_SHA256SUMS.lines().filter_map(|line| {
        let (sha, file) = line.split_once("  ")?;
        Some((file.trim(), sha.trim()))
    })
}

/// Expected sha256 of an official asset file, if it belongs to crafter 1.8.3.
fn official_sha256(file: &str) -> Option<&'static str> {
    official_files()
        .find(|(name, _)| *name == file)
        .map(|(_, sha)| sha)
}

/// One 16x16 (or any size) texture, pixels row-major [y][x][c] as in the PNG, channels 3 or 4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Texture {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Samples per pixel: 3 (RGB) or 4 (RGBA).
    pub channels: usize,
    /// `height * width * channels` samples, row-major `[y][x][c]`.
    pub data: Vec<u8>,
}

impl Texture {
    /// The samples of pixel (x, y): 3 or 4 bytes.
    pub fn pixel(&self, x: usize, y: usize) -> &[u8] {
        let i = (y * self.width + x) * self.channels;
        &self.data[i..i + self.channels]
    }
}

/// Where a [`TextureSet`] came from.
#[derive(Clone, Debug, PartialEq)]
pub enum TextureSource {
    /// Crafter's own PNG files, verified against crafter 1.8.3's sha256 table.
    Official {
        /// The folder the files were read from.
        dir: PathBuf,
    },
    /// Our own sprites compiled into the binary.
    Builtin,
}

/// Errors from loading, discovering or fetching textures; every message is one line that names
/// the file or folder and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TextureError {
    /// The textures folder does not exist or is not a folder.
    #[error("textures folder {} does not exist or is not a folder ({FIX})", dir.display())]
    MissingDir {
        /// The folder that was asked for.
        dir: PathBuf,
    },
    /// A required texture file is missing from the folder.
    #[error("texture '{file}' is missing from {}: not crafter's assets folder ({FIX})", dir.display())]
    MissingFile {
        /// File name, e.g. `cow.png`.
        file: String,
        /// Folder searched.
        dir: PathBuf,
    },
    /// A texture file exists but cannot be read.
    #[error("cannot read texture '{file}' in {}: {err} (check the file's permissions, or {FIX})", dir.display())]
    Unreadable {
        /// File name.
        file: String,
        /// Folder.
        dir: PathBuf,
        /// The I/O error.
        err: std::io::Error,
    },
    /// A texture file's bytes are not crafter 1.8.3's.
    #[error("texture '{file}' in {} has sha256 {}…, expected {}…: not crafter 1.8.3's textures ({FIX})", dir.display(), short(actual), short(expected))]
    Checksum {
        /// File name.
        file: String,
        /// Folder.
        dir: PathBuf,
        /// sha256 of the file found (hex).
        actual: String,
        /// sha256 crafter 1.8.3 ships (hex).
        expected: String,
    },
    /// A texture file is not a decodable PNG.
    #[error("texture '{file}' in {} is not a valid PNG ({reason}); {FIX}", dir.display())]
    Decode {
        /// File name.
        file: String,
        /// Folder.
        dir: PathBuf,
        /// What the decoder reported.
        reason: String,
    },
    /// A texture decodes but is not 16×16.
    #[error("texture '{file}' in {} is {width}x{height}, expected 16x16 ({FIX})", dir.display())]
    WrongSize {
        /// File name.
        file: String,
        /// Folder.
        dir: PathBuf,
        /// Width found.
        width: usize,
        /// Height found.
        height: usize,
    },
    /// No per-user cache folder can be determined.
    #[error("cannot find a cache folder: none of $VLM_EVAL_CACHE, $XDG_CACHE_HOME, $HOME is set (set $VLM_EVAL_CACHE to a writable folder)")]
    NoCacheDir,
    /// The Python interpreter needed by `assets fetch` cannot be started.
    #[error("cannot run `{python} -m pip`: {err} (install Python 3 with pip, or set $VLM_EVAL_PYTHON to an interpreter that has pip)")]
    Python {
        /// Interpreter that was tried.
        python: String,
        /// Why it could not be started.
        err: std::io::Error,
    },
    /// pip could not download crafter's source package.
    #[error("`{python} -m pip download crafter=={CRAFTER_VERSION}` failed: {detail} (check network access to PyPI, or install crafter=={CRAFTER_VERSION} yourself and pass --assets DIR)")]
    Download {
        /// Interpreter used.
        python: String,
        /// Last line pip printed.
        detail: String,
    },
    /// The cache folder exists but does not hold crafter's textures.
    #[error("the texture cache {} is unusable: {reason} (delete that folder; the next run fetches the textures again)", dir.display())]
    BadCache {
        /// The cache folder.
        dir: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The downloaded package cannot be read or lacks the textures.
    #[error("cannot use downloaded package {}: {reason} (delete it and run `vlm-eval assets fetch` again)", archive.display())]
    Archive {
        /// The archive pip produced.
        archive: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A downloaded file does not match crafter 1.8.3's sha256 table.
    #[error("downloaded '{file}' has sha256 {}…, expected {}…: the package is not crafter 1.8.3 (check your pip index/mirror, or pass --assets DIR)", short(actual), short(expected))]
    FetchChecksum {
        /// File name.
        file: String,
        /// sha256 found.
        actual: String,
        /// sha256 expected.
        expected: String,
    },
    /// The destination folder holds files other than crafter's textures, so it is not replaced.
    #[error("refusing to replace {}: it contains '{entry}', which is not one of crafter's textures (choose an empty or new folder)", dir.display())]
    DestNotEmpty {
        /// Destination folder.
        dir: PathBuf,
        /// The unexpected entry.
        entry: String,
    },
    /// Writing the fetched textures failed.
    #[error("cannot write {}: {err} (check permissions and free space, or set $VLM_EVAL_CACHE to a writable folder)", path.display())]
    Write {
        /// Path being written.
        path: PathBuf,
        /// The I/O error.
        err: std::io::Error,
    },
}

/// A complete set of the textures crafter renders.
#[derive(Clone)]
pub struct TextureSet {
    textures: HashMap<&'static str, Texture>,
    source: TextureSource,
}

impl fmt::Debug for TextureSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextureSet")
            .field("source", &self.source)
            .field("textures", &self.textures.len())
            .finish()
    }
}

impl TextureSet {
    /// Names the engine needs (materials, objects, items, digits "1".."9", "unknown").
    #[rustfmt::skip]
    pub const REQUIRED: &'static [&'static str] = &[
        // Materials, in material-id order (stone/coal/iron/diamond double as item icons).
        "water", "grass", "stone", "path", "sand", "tree", "lava", "coal", "iron", "diamond",
        "table", "furnace", "unknown",
        // Objects.
        "player-left", "player-right", "player-up", "player-down", "player-sleep",
        "cow", "zombie", "skeleton",
        "arrow-left", "arrow-right", "arrow-up", "arrow-down",
        "plant", "plant-ripe",
        // Items not listed above, in inventory order.
        "health", "food", "drink", "energy", "sapling", "wood",
        "wood_pickaxe", "stone_pickaxe", "iron_pickaxe", "wood_sword", "stone_sword", "iron_sword",
        // Inventory counts.
        "1", "2", "3", "4", "5", "6", "7", "8", "9",
    ];

    /// Load and sha256-verify crafter's official textures from a directory (file `<name>.png`).
    pub fn load_official(dir: &Path) -> Result<TextureSet, TextureError> {
        if !dir.is_dir() {
            return Err(TextureError::MissingDir {
                dir: dir.to_path_buf(),
            });
        }
        let mut textures = HashMap::with_capacity(Self::REQUIRED.len());
        for &name in Self::REQUIRED {
            let file = format!("{name}.png");
            let path = dir.join(&file);
            let bytes = std::fs::read(&path).map_err(|err| {
                if err.kind() == std::io::ErrorKind::NotFound {
                    TextureError::MissingFile {
                        file: file.clone(),
                        dir: dir.to_path_buf(),
                    }
                } else {
                    TextureError::Unreadable {
                        file: file.clone(),
                        dir: dir.to_path_buf(),
                        err,
                    }
                }
            })?;
            let expected = official_sha256(&file).expect("every required texture is in the table");
            let actual = sha256_hex(&bytes);
            if actual != expected {
                return Err(TextureError::Checksum {
                    file,
                    dir: dir.to_path_buf(),
                    actual,
                    expected: expected.to_string(),
                });
            }
            let texture = decode_png(&bytes).map_err(|reason| TextureError::Decode {
                file: file.clone(),
                dir: dir.to_path_buf(),
                reason,
            })?;
            if texture.width != SIZE || texture.height != SIZE {
                return Err(TextureError::WrongSize {
                    file,
                    dir: dir.to_path_buf(),
                    width: texture.width,
                    height: texture.height,
                });
            }
            textures.insert(name, texture);
        }
        Ok(TextureSet {
            textures,
            source: TextureSource::Official {
                dir: dir.to_path_buf(),
            },
        })
    }

    /// Our own hand-drawn 16x16 sprites (no files needed).
    pub fn builtin() -> TextureSet {
        let textures: HashMap<&'static str, Texture> = sprites::build_all().into_iter().collect();
        debug_assert!(Self::REQUIRED.iter().all(|n| textures.contains_key(n)));
        TextureSet {
            textures,
            source: TextureSource::Builtin,
        }
    }

    /// The texture called `name` (e.g. "cow", "player-left", "7"), if the set has it.
    pub fn get(&self, name: &str) -> Option<&Texture> {
        self.textures.get(name)
    }

    /// Where the set came from.
    pub fn source(&self) -> &TextureSource {
        &self.source
    }

    /// "official" or "builtin", for results files.
    pub fn kind(&self) -> &'static str {
        match self.source {
            TextureSource::Official { .. } => "official",
            TextureSource::Builtin => "builtin",
        }
    }

    /// A sha256 over all required textures' decoded pixels in REQUIRED order (identifies the set
    /// in results).
    ///
    /// Per texture it hashes the name's UTF-8 bytes, a 0 byte, width, height and channels as
    /// little-endian u32, then the `[y][x][c]` samples.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        for &name in Self::REQUIRED {
            let t = &self.textures[name];
            hasher.update(name.as_bytes());
            hasher.update([0u8]);
            for v in [t.width, t.height, t.channels] {
                hasher.update((v as u32).to_le_bytes());
            }
            hasher.update(&t.data);
        }
        hex(&hasher.finalize())
    }
}

/// Decode PNG bytes into raw 8-bit samples as stored: RGB stays 3 channels, RGBA 4; no gamma
/// or ICC handling. Grayscale and 16-bit images are converted to 8-bit RGB(A).
fn decode_png(bytes: &[u8]) -> Result<Texture, String> {
    let decoder = PngDecoder::new(Cursor::new(bytes)).map_err(|e| e.to_string())?;
    let (w, h) = decoder.dimensions();
    let (width, height) = (w as usize, h as usize);
    let (channels, data) = match decoder.color_type() {
        ColorType::Rgb8 | ColorType::Rgba8 => {
            let channels = decoder.color_type().channel_count() as usize;
            let mut data = vec![0u8; decoder.total_bytes() as usize];
            decoder.read_image(&mut data).map_err(|e| e.to_string())?;
            (channels, data)
        }
        _ => {
            let image = DynamicImage::from_decoder(decoder).map_err(|e| e.to_string())?;
            if image.color().has_alpha() {
                (4, image.into_rgba8().into_raw())
            } else {
                (3, image.into_rgb8().into_raw())
            }
        }
    };
    if data.len() != width * height * channels {
        return Err(format!(
            "decoded {} bytes for a {width}x{height}x{channels} image",
            data.len()
        ));
    }
    Ok(Texture {
        width,
        height,
        channels,
        data,
    })
}

/// The first 12 characters of a hex digest, for messages.
fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

/// Lower-case hex sha256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// Discovery helpers.

#[cfg(test)]
mod tests;
