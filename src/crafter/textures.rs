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

mod sprites;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fmt;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

    /// Find official textures: explicit dir, else $CRAFTER_ASSETS, else the per-user cache that
    /// [`fetch_official`] fills, else an installed `crafter` Python package (via
    /// $VLM_EVAL_PYTHON or `python3`); an explicit folder (argument or $CRAFTER_ASSETS) that is
    /// bad is an error. If nothing is found, returns [`TextureSet::builtin`] and a one-line
    /// warning.
    pub fn discover(explicit: Option<&Path>) -> Result<(TextureSet, Option<String>), TextureError> {
        if let Some(dir) = explicit {
            return Ok((Self::load_official(dir)?, None));
        }
        if let Some(dir) = non_empty_env("CRAFTER_ASSETS") {
            tracing::debug!(dir = ?dir, "loading textures from $CRAFTER_ASSETS");
            return Ok((Self::load_official(Path::new(&dir))?, None));
        }
        if let Ok(cache) = cache_dir() {
            let dir = cache.join(CACHE_SUBDIR);
            if dir.is_dir() {
                tracing::debug!(dir = %dir.display(), "loading textures from the cache");
                return Ok((Self::load_official(&dir)?, None));
            }
        }
        let mut note = String::new();
        if let Some(dir) = python_crafter_assets() {
            match Self::load_official(&dir) {
                Ok(set) => {
                    tracing::debug!(dir = %dir.display(), "loading textures from the installed crafter package");
                    return Ok((set, None));
                }
                Err(err) => {
                    tracing::debug!(%err, "installed crafter package's textures are unusable");
                    note = format!(" (the installed crafter package is unusable: {err})");
                }
            }
        }
        let warning = format!(
            "crafter {CRAFTER_VERSION}'s textures were not found{note}; using vlm-eval's built-in \
             sprites, so observations differ from official Crafter (pass --assets DIR with \
             crafter's assets folder, or run `vlm-eval assets fetch` once)"
        );
        Ok((Self::builtin(), Some(warning)))
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

/// Per-user cache dir: $VLM_EVAL_CACHE, else $XDG_CACHE_HOME/vlm-eval, else
/// $HOME/.cache/vlm-eval; textures go under `<cache>/crafter-1.8.3-assets/`.
pub fn cache_dir() -> Result<PathBuf, TextureError> {
    if let Some(dir) = non_empty_env("VLM_EVAL_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty_env("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("vlm-eval"));
    }
    if let Some(home) = non_empty_env("HOME") {
        return Ok(PathBuf::from(home).join(".cache").join("vlm-eval"));
    }
    Err(TextureError::NoCacheDir)
}

/// `vlm-eval assets fetch`: download crafter 1.8.3 with pip, verify every texture's sha256 and
/// write them atomically to `dest` (default `<cache_dir>/crafter-1.8.3-assets`); returns the
/// folder.
pub fn fetch_official(dest: Option<&Path>) -> Result<PathBuf, TextureError> {
    let dest = match dest {
        Some(d) => d.to_path_buf(),
        None => cache_dir()?.join(CACHE_SUBDIR),
    };
    if verify_all_files(&dest) {
        tracing::info!(dir = %dest.display(), "crafter {CRAFTER_VERSION}'s textures are already there");
        return Ok(dest);
    }
    check_replaceable(&dest)?;

    let python = python_interpreter();
    let work = TempDir::new(&std::env::temp_dir(), "vlm-eval-fetch")?;
    let download = work.path().join("download");
    let archive = pip_download(&python, &download)?;
    tracing::info!(archive = %archive.display(), "downloaded crafter {CRAFTER_VERSION}");

    let files = read_archive_assets(&python, &archive, work.path())?;
    verify_fetched(&archive, &files)?;

    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|err| TextureError::Write {
        path: parent.clone(),
        err,
    })?;
    let leaf = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| CACHE_SUBDIR.to_string());
    let staging = TempDir::new(&parent, &format!(".{leaf}.partial"))?;
    for (file, bytes) in &files {
        let path = staging.path().join(file);
        std::fs::write(&path, bytes).map_err(|err| TextureError::Write { path, err })?;
    }
    // Prove the written folder loads before publishing it.
    TextureSet::load_official(staging.path())?;
    publish(staging, &dest)?;
    tracing::info!(dir = %dest.display(), "installed crafter {CRAFTER_VERSION}'s textures");
    Ok(dest)
}

// ---------------------------------------------------------------------------------------------
// Decoding and hashing.

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

/// The value of environment variable `key`, unless unset or empty.
fn non_empty_env(key: &str) -> Option<OsString> {
    std::env::var_os(key).filter(|v| !v.is_empty())
}

/// The Python interpreter to use: $VLM_EVAL_PYTHON, else `python3`.
fn python_interpreter() -> OsString {
    non_empty_env("VLM_EVAL_PYTHON").unwrap_or_else(|| OsString::from("python3"))
}

/// `<crafter package>/assets` of an importable `crafter`, or None on any failure or timeout.
fn python_crafter_assets() -> Option<PathBuf> {
    let python = python_interpreter();
    let mut child = Command::new(&python)
        .args([
            "-c",
            "import crafter, os; print(os.path.dirname(crafter.__file__))",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + PYTHON_PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let line = out.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let dir = PathBuf::from(line).join("assets");
    dir.is_dir().then_some(dir)
}

// ---------------------------------------------------------------------------------------------
// Fetching.

/// A uniquely named directory removed (best effort) on drop.
struct TempDir {
    path: Option<PathBuf>,
}

impl TempDir {
    /// Create `<parent>/<prefix>-<pid>-<nanos>`.
    fn new(parent: &Path, prefix: &str) -> Result<TempDir, TextureError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = parent.join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|err| TextureError::Write {
            path: path.clone(),
            err,
        })?;
        Ok(TempDir { path: Some(path) })
    }

    /// The directory.
    fn path(&self) -> &Path {
        self.path
            .as_deref()
            .expect("temp dir is present until released")
    }

    /// Stop managing the directory (it was renamed away) and return its path.
    fn release(mut self) -> PathBuf {
        self.path
            .take()
            .expect("temp dir is present until released")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// True if `dir` holds all 56 files of crafter 1.8.3's assets folder with the right hashes.
fn verify_all_files(dir: &Path) -> bool {
    official_files().all(|(file, sha)| {
        std::fs::read(dir.join(file)).is_ok_and(|bytes| sha256_hex(&bytes) == sha)
    })
}

/// Error unless `dest` is absent, empty, or holds only files named like crafter's assets.
fn check_replaceable(dest: &Path) -> Result<(), TextureError> {
    if !dest.exists() {
        return Ok(());
    }
    let not_ours = |entry: String| TextureError::DestNotEmpty {
        dir: dest.to_path_buf(),
        entry,
    };
    if !dest.is_dir() {
        return Err(not_ours("(it is a file)".to_string()));
    }
    let entries = std::fs::read_dir(dest).map_err(|err| TextureError::Write {
        path: dest.to_path_buf(),
        err,
    })?;
    for entry in entries {
        let entry = entry.map_err(|err| TextureError::Write {
            path: dest.to_path_buf(),
            err,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || official_sha256(&name).is_none() {
            return Err(not_ours(name));
        }
    }
    Ok(())
}

/// Run pip to download crafter's sdist (or, failing that, any distribution) into `dir`;
/// returns the archive's path.
fn pip_download(python: &OsString, dir: &Path) -> Result<PathBuf, TextureError> {
    let python_name = python.to_string_lossy().into_owned();
    let requirement = format!("crafter=={CRAFTER_VERSION}");
    let mut detail = String::new();
    for no_binary in [true, false] {
        let mut cmd = Command::new(python);
        cmd.args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
        ]);
        if no_binary {
            cmd.args(["--no-binary", ":all:"]);
        }
        cmd.arg(&requirement).arg("-d").arg(dir);
        tracing::info!(?cmd, "downloading crafter {CRAFTER_VERSION} with pip");
        let output = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|err| TextureError::Python {
                python: python_name.clone(),
                err,
            })?;
        if output.status.success() {
            if let Some(archive) = find_archive(dir) {
                return Ok(archive);
            }
            detail = format!(
                "pip succeeded but left no crafter archive in {}",
                dir.display()
            );
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            detail = stderr
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("pip exited with an error and no message")
                .to_string();
            tracing::debug!(%detail, no_binary, "pip download failed");
        }
    }
    Err(TextureError::Download {
        python: python_name,
        detail,
    })
}

/// The crafter archive (`.tar.gz`, `.zip` or `.whl`) pip left in `dir`.
fn find_archive(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            name.starts_with("crafter")
                && (name.ends_with(".tar.gz") || name.ends_with(".whl") || name.ends_with(".zip"))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// True if `path` (inside an archive or extraction) is `…/crafter/assets/<file>.png`; returns
/// the file name.
fn asset_file_name(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let parent = path.parent()?;
    let grandparent = parent.parent()?;
    let is_asset = file.ends_with(".png")
        && parent.file_name()? == "assets"
        && grandparent.file_name()? == "crafter";
    is_asset.then(|| file.to_string())
}

/// All `crafter/assets/*.png` files in the archive, by file name.
fn read_archive_assets(
    python: &OsString,
    archive: &Path,
    work: &Path,
) -> Result<BTreeMap<String, Vec<u8>>, TextureError> {
    let bad = |reason: String| TextureError::Archive {
        archive: archive.to_path_buf(),
        reason,
    };
    let name = archive.to_string_lossy().to_lowercase();
    let mut files = BTreeMap::new();
    if name.ends_with(".tar.gz") {
        let file = std::fs::File::open(archive).map_err(|e| bad(e.to_string()))?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
            let mut entry = entry.map_err(|e| bad(e.to_string()))?;
            let path = entry.path().map_err(|e| bad(e.to_string()))?.into_owned();
            if !entry.header().entry_type().is_file() {
                continue;
            }
            if let Some(file) = asset_file_name(&path) {
                let mut bytes = Vec::new();
                entry
                    .read_to_end(&mut bytes)
                    .map_err(|e| bad(format!("{}: {e}", path.display())))?;
                files.insert(file, bytes);
            }
        }
    } else {
        // Wheels and zip sdists: let Python's zipfile (which sanitises member paths) extract it.
        let out = work.join("unzipped");
        let status = Command::new(python)
            .args(["-m", "zipfile", "-e"])
            .arg(archive)
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|err| TextureError::Python {
                python: python.to_string_lossy().into_owned(),
                err,
            })?;
        if !status.success() {
            return Err(bad(format!("`python -m zipfile -e` failed ({status})")));
        }
        collect_assets(&out, &mut files, 0).map_err(|e| bad(e.to_string()))?;
    }
    if files.is_empty() {
        return Err(bad("it contains no crafter/assets/*.png files".to_string()));
    }
    Ok(files)
}

/// Walk `dir` (a few levels deep) collecting `…/crafter/assets/*.png` files.
fn collect_assets(
    dir: &Path,
    files: &mut BTreeMap<String, Vec<u8>>,
    depth: usize,
) -> std::io::Result<()> {
    if depth > 4 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect_assets(&path, files, depth + 1)?;
        } else if kind.is_file() {
            if let Some(file) = asset_file_name(&path) {
                files.insert(file, std::fs::read(&path)?);
            }
        }
    }
    Ok(())
}

/// Check the extracted files are exactly crafter 1.8.3's assets, byte for byte.
fn verify_fetched(archive: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<(), TextureError> {
    for (file, bytes) in files {
        let Some(expected) = official_sha256(file) else {
            return Err(TextureError::Archive {
                archive: archive.to_path_buf(),
                reason: format!(
                    "it has crafter/assets/{file}, which crafter {CRAFTER_VERSION} does not"
                ),
            });
        };
        let actual = sha256_hex(bytes);
        if actual != expected {
            return Err(TextureError::FetchChecksum {
                file: file.clone(),
                actual,
                expected: expected.to_string(),
            });
        }
    }
    if let Some((missing, _)) = official_files().find(|(f, _)| !files.contains_key(*f)) {
        return Err(TextureError::Archive {
            archive: archive.to_path_buf(),
            reason: format!("it lacks crafter/assets/{missing}"),
        });
    }
    Ok(())
}

/// Atomically move the finished `staging` folder to `dest`, replacing an old textures folder.
fn publish(staging: TempDir, dest: &Path) -> Result<(), TextureError> {
    let write_err = |path: &Path, err| TextureError::Write {
        path: path.to_path_buf(),
        err,
    };
    let old = if dest.exists() {
        let parent = dest.parent().unwrap_or_else(|| Path::new("."));
        let aside = parent.join(format!(
            ".{}.old-{}",
            dest.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::rename(dest, &aside).map_err(|err| write_err(dest, err))?;
        Some(aside)
    } else {
        None
    };
    if let Err(err) = std::fs::rename(staging.path(), dest) {
        if let Some(aside) = &old {
            let _ = std::fs::rename(aside, dest);
        }
        return Err(write_err(dest, err));
    }
    staging.release();
    if let Some(aside) = old {
        let _ = std::fs::remove_dir_all(aside);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Serialises the tests that set or read environment variables.
    static ENV_LOCK: Mutex<()> = Mutex::new(());

    /// Channel count of each required texture in crafter 1.8.3 (3 = RGB, 4 = RGBA).
    fn official_channels(name: &str) -> usize {
        match name {
            "furnace" | "grass" | "iron" | "lava" | "sand" | "stone" | "tree" | "water" => 3,
            _ => 4,
        }
    }

    /// Fingerprint of crafter 1.8.3's official set, computed independently with `imageio`.
    const OFFICIAL_FINGERPRINT: &str =
        "453f5748964131b7187f8037dfca502a4ebf675725e08b11362133f52cb379d6";

    /// Where this machine has crafter's assets ($VLM_EVAL_TEST_ASSETS or the dev venv).
    fn official_dir() -> Option<PathBuf> {
        let candidates = [
            std::env::var_os("VLM_EVAL_TEST_ASSETS").map(PathBuf::from),
            Some(PathBuf::from(
                "/tmp/venv-crafter/lib/python3.11/site-packages/crafter/assets",
            )),
        ];
        let found = candidates.into_iter().flatten().find(|d| d.is_dir());
        if found.is_none() {
            eprintln!("skipping: crafter assets not found (set VLM_EVAL_TEST_ASSETS)");
        }
        found
    }

    /// A fresh empty scratch folder for one test.
    fn scratch(tag: &str) -> TempDir {
        TempDir::new(&std::env::temp_dir(), &format!("vlm-eval-test-{tag}")).unwrap()
    }

    /// Copy the official assets folder into `to`.
    fn copy_dir(from: &Path, to: &Path) {
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }

    #[test]
    fn official_loads_and_fingerprint_is_stable() {
        let Some(dir) = official_dir() else { return };
        let set = TextureSet::load_official(&dir).unwrap();
        assert_eq!(set.kind(), "official");
        assert_eq!(set.source(), &TextureSource::Official { dir: dir.clone() });
        for &name in TextureSet::REQUIRED {
            let t = set.get(name).unwrap();
            assert_eq!((t.width, t.height), (16, 16), "{name}");
            assert_eq!(t.channels, official_channels(name), "{name}");
            assert_eq!(t.data.len(), 16 * 16 * t.channels);
        }
        assert!(
            set.get("player").is_none(),
            "only REQUIRED names are loaded"
        );
        assert_eq!(set.fingerprint(), OFFICIAL_FINGERPRINT);
        let again = TextureSet::load_official(&dir).unwrap();
        assert_eq!(again.fingerprint(), set.fingerprint());
        assert_ne!(set.fingerprint(), TextureSet::builtin().fingerprint());
    }

    #[test]
    fn official_pixels_are_raw_samples() {
        let Some(dir) = official_dir() else { return };
        let set = TextureSet::load_official(&dir).unwrap();
        // Spot values read with imageio (which ignores gamma and ICC).
        let unknown = set.get("unknown").unwrap();
        assert_eq!(unknown.pixel(0, 0)[3], 0, "transparent corner");
        assert_eq!(set.get("grass").unwrap().channels, 3);
        assert_eq!(set.get("cow").unwrap().channels, 4);
    }

    #[test]
    fn one_changed_byte_gives_checksum_error_naming_the_file() {
        let Some(dir) = official_dir() else { return };
        let tmp = scratch("sha");
        copy_dir(&dir, tmp.path());
        let cow = tmp.path().join("cow.png");
        let mut bytes = std::fs::read(&cow).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x01;
        std::fs::write(&cow, bytes).unwrap();
        let err = TextureSet::load_official(tmp.path()).unwrap_err();
        assert!(matches!(err, TextureError::Checksum { ref file, .. } if file == "cow.png"));
        let msg = err.to_string();
        assert!(msg.contains("'cow.png'"), "{msg}");
        assert!(msg.contains("e2f4229e756e"), "{msg}");
        assert!(msg.contains("vlm-eval assets fetch"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn missing_dir_missing_file_and_non_png_are_errors() {
        let err = TextureSet::load_official(Path::new("/nonexistent/vlm-eval/assets")).unwrap_err();
        assert!(matches!(err, TextureError::MissingDir { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/vlm-eval/assets"));

        let tmp = scratch("missing");
        let err = TextureSet::load_official(tmp.path()).unwrap_err();
        assert!(
            matches!(err, TextureError::MissingFile { ref file, .. } if file == "water.png"),
            "{err}"
        );

        // A non-PNG file where a texture should be.
        std::fs::write(tmp.path().join("water.png"), b"not a png at all").unwrap();
        let err = TextureSet::load_official(tmp.path()).unwrap_err();
        assert!(matches!(err, TextureError::Checksum { ref file, .. } if file == "water.png"));

        // The decoder itself reports garbage and wrong sizes as errors, never panics.
        assert!(decode_png(b"not a png at all").is_err());
        assert!(decode_png(&[]).is_err());
        let mut png = Vec::new();
        image::RgbImage::new(8, 5)
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let t = decode_png(&png).unwrap();
        assert_eq!((t.width, t.height, t.channels), (8, 5, 3));
        let truncated = &png[..png.len() - 20];
        assert!(decode_png(truncated).is_err());
        let err = TextureError::Decode {
            file: "x.png".into(),
            dir: "/d".into(),
            reason: "bad".into(),
        };
        assert!(err.to_string().contains("'x.png'"));
        let err = TextureError::Checksum {
            file: "x.png".into(),
            dir: "/d".into(),
            actual: "ab".into(),
            expected: String::new(),
        };
        assert!(err.to_string().contains("sha256 ab…"));
    }

    #[test]
    fn decode_converts_gray_and_16_bit() {
        let mut png = Vec::new();
        image::GrayImage::from_pixel(2, 2, image::Luma([7]))
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let t = decode_png(&png).unwrap();
        assert_eq!(t.channels, 3);
        assert_eq!(t.pixel(1, 1), &[7, 7, 7]);

        let mut png = Vec::new();
        image::ImageBuffer::<image::Rgba<u16>, _>::from_pixel(
            2,
            1,
            image::Rgba([65535, 0, 32896, 65535]),
        )
        .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
        let t = decode_png(&png).unwrap();
        assert_eq!(t.channels, 4);
        assert_eq!(t.pixel(0, 0), &[255, 0, 128, 255]);
    }

    #[test]
    fn builtin_is_complete_and_well_formed() {
        let set = TextureSet::builtin();
        assert_eq!(set.kind(), "builtin");
        assert_eq!(set.source(), &TextureSource::Builtin);
        for &name in TextureSet::REQUIRED {
            let t = set
                .get(name)
                .unwrap_or_else(|| panic!("builtin lacks {name}"));
            assert_eq!((t.width, t.height), (16, 16), "{name}");
            assert_eq!(t.channels, official_channels(name), "{name}");
            assert_eq!(t.data.len(), 16 * 16 * t.channels, "{name}");
        }
        // Materials are drawn without alpha, so they must be fully opaque.
        for name in ["path", "coal", "diamond", "table", "unknown"] {
            let t = set.get(name).unwrap();
            assert!(
                t.data.chunks(4).all(|p| p[3] == 255),
                "{name} must be opaque"
            );
        }
        // Objects and icons have transparent backgrounds.
        for name in [
            "cow",
            "zombie",
            "player-down",
            "arrow-up",
            "health",
            "1",
            "iron_sword",
        ] {
            let t = set.get(name).unwrap();
            assert_eq!(t.pixel(0, 0)[3], 0, "{name} corner should be transparent");
        }
        // All sprites differ from each other (except none are accidentally identical).
        let mut seen = HashMap::new();
        for &name in TextureSet::REQUIRED {
            let data = &set.get(name).unwrap().data;
            if let Some(other) = seen.insert(data.clone(), name) {
                panic!("{name} and {other} are identical");
            }
        }
        assert_eq!(set.fingerprint(), TextureSet::builtin().fingerprint());
        assert_eq!(set.fingerprint().len(), 64);
    }

    #[test]
    fn discover_with_explicit_bad_path_errors() {
        let err =
            TextureSet::discover(Some(Path::new("/nonexistent/vlm-eval/assets"))).unwrap_err();
        assert!(matches!(err, TextureError::MissingDir { .. }));
        let tmp = scratch("badexplicit");
        assert!(TextureSet::discover(Some(tmp.path())).is_err());
    }

    /// Every environment-dependent path of `discover` and `cache_dir`, in one test so that the
    /// variables it sets never race.
    #[test]
    fn discover_and_cache_dir_follow_the_environment() {
        let _guard = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let keys = [
            "CRAFTER_ASSETS",
            "VLM_EVAL_CACHE",
            "XDG_CACHE_HOME",
            "HOME",
            "VLM_EVAL_PYTHON",
        ];
        let saved: Vec<_> = keys.iter().map(|k| (k, std::env::var_os(k))).collect();
        let empty_cache = scratch("cache");

        // cache_dir precedence.
        std::env::set_var("VLM_EVAL_CACHE", "/c/vlm");
        std::env::set_var("XDG_CACHE_HOME", "/c/xdg");
        std::env::set_var("HOME", "/c/home");
        assert_eq!(cache_dir().unwrap(), PathBuf::from("/c/vlm"));
        std::env::remove_var("VLM_EVAL_CACHE");
        assert_eq!(cache_dir().unwrap(), PathBuf::from("/c/xdg/vlm-eval"));
        std::env::set_var("XDG_CACHE_HOME", "");
        assert_eq!(
            cache_dir().unwrap(),
            PathBuf::from("/c/home/.cache/vlm-eval")
        );
        std::env::remove_var("HOME");
        std::env::remove_var("XDG_CACHE_HOME");
        assert!(matches!(cache_dir(), Err(TextureError::NoCacheDir)));

        // Nothing anywhere: builtin plus a one-line warning.
        std::env::remove_var("CRAFTER_ASSETS");
        std::env::set_var("VLM_EVAL_CACHE", empty_cache.path());
        std::env::set_var("VLM_EVAL_PYTHON", "/nonexistent/python3");
        let (set, warning) = TextureSet::discover(None).unwrap();
        assert_eq!(set.kind(), "builtin");
        let warning = warning.unwrap();
        assert!(warning.contains("--assets") && warning.contains("vlm-eval assets fetch"));
        assert!(!warning.contains('\n'));

        // A bad $CRAFTER_ASSETS is an error, not a silent fallback.
        std::env::set_var("CRAFTER_ASSETS", "/nonexistent/crafter/assets");
        assert!(TextureSet::discover(None).is_err());

        if let Some(dir) = official_dir() {
            // $CRAFTER_ASSETS is found.
            std::env::set_var("CRAFTER_ASSETS", &dir);
            let (set, warning) = TextureSet::discover(None).unwrap();
            assert_eq!(set.source(), &TextureSource::Official { dir: dir.clone() });
            assert!(warning.is_none());
            // An explicit folder wins over $CRAFTER_ASSETS.
            let tmp = scratch("explicit");
            assert!(TextureSet::discover(Some(tmp.path())).is_err());
            std::env::remove_var("CRAFTER_ASSETS");

            // The cache is found.
            let cached = empty_cache.path().join(CACHE_SUBDIR);
            std::fs::create_dir(&cached).unwrap();
            copy_dir(&dir, &cached);
            let (set, _) = TextureSet::discover(None).unwrap();
            assert_eq!(
                set.source(),
                &TextureSource::Official {
                    dir: cached.clone()
                }
            );
            std::fs::remove_dir_all(&cached).unwrap();

            // An installed crafter package is found through $VLM_EVAL_PYTHON.
            let venv_python = Path::new("/tmp/venv-crafter/bin/python");
            if venv_python.exists() {
                std::env::set_var("VLM_EVAL_PYTHON", venv_python);
                let (set, warning) = TextureSet::discover(None).unwrap();
                assert_eq!(set.kind(), "official");
                assert!(warning.is_none());
                assert_eq!(set.fingerprint(), OFFICIAL_FINGERPRINT);
            }
        }

        for (key, value) in saved {
            match value {
                Some(v) => std::env::set_var(key, v),
                None => std::env::remove_var(key),
            }
        }
    }

    #[test]
    fn fetch_refuses_to_replace_foreign_folders() {
        let tmp = scratch("dest");
        std::fs::write(tmp.path().join("notes.txt"), b"mine").unwrap();
        let err = check_replaceable(tmp.path()).unwrap_err();
        assert!(
            matches!(err, TextureError::DestNotEmpty { ref entry, .. } if entry == "notes.txt")
        );
        std::fs::remove_file(tmp.path().join("notes.txt")).unwrap();
        std::fs::write(tmp.path().join("cow.png"), b"old").unwrap();
        check_replaceable(tmp.path()).unwrap();
        check_replaceable(&tmp.path().join("absent")).unwrap();
    }

    #[test]
    fn table_covers_required_names() {
        assert_eq!(official_files().count(), 56);
        for &name in TextureSet::REQUIRED {
            let sha = official_sha256(&format!("{name}.png")).unwrap();
            assert_eq!(sha.len(), 64);
        }
    }

    #[test]
    fn archive_paths_are_recognised() {
        let ok = asset_file_name(Path::new("crafter-1.8.3/crafter/assets/cow.png"));
        assert_eq!(ok.as_deref(), Some("cow.png"));
        assert_eq!(
            asset_file_name(Path::new("crafter/assets/1.png")).as_deref(),
            Some("1.png")
        );
        assert!(asset_file_name(Path::new("crafter-1.8.3/crafter/data.yaml")).is_none());
        assert!(asset_file_name(Path::new("x/other/assets/cow.png")).is_none());
        assert!(asset_file_name(Path::new("cow.png")).is_none());
    }

    #[test]
    fn fetched_files_are_verified() {
        let archive = Path::new("/a.tar.gz");
        let mut files = BTreeMap::new();
        files.insert("cow.png".to_string(), b"wrong".to_vec());
        let err = verify_fetched(archive, &files).unwrap_err();
        assert!(matches!(err, TextureError::FetchChecksum { ref file, .. } if file == "cow.png"));
        files.clear();
        files.insert("extra.png".to_string(), Vec::new());
        assert!(matches!(
            verify_fetched(archive, &files),
            Err(TextureError::Archive { .. })
        ));
        if let Some(dir) = official_dir() {
            files.clear();
            for (file, _) in official_files() {
                files.insert(file.to_string(), std::fs::read(dir.join(file)).unwrap());
            }
            verify_fetched(archive, &files).unwrap();
            files.remove("cow.png");
            let err = verify_fetched(archive, &files).unwrap_err();
            assert!(err.to_string().contains("cow.png"));
        }
    }

    /// Both archive readers (sdist `.tar.gz` in Rust, wheel via `python -m zipfile`) find the
    /// assets, offline.
    #[test]
    fn archive_readers_find_assets() {
        let Some(dir) = official_dir() else { return };
        let tmp = scratch("archive");
        let python = OsString::from("python3");

        let sdist = tmp.path().join("crafter-1.8.3.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&sdist).unwrap(),
            flate2::Compression::fast(),
        );
        let mut builder = tar::Builder::new(gz);
        builder
            .append_dir_all("crafter-1.8.3/crafter/assets", &dir)
            .unwrap();
        builder.into_inner().unwrap().finish().unwrap();
        let files = read_archive_assets(&python, &sdist, tmp.path()).unwrap();
        assert_eq!(files.len(), 56);
        verify_fetched(&sdist, &files).unwrap();

        // A wheel is a zip with `crafter/` at the top; build one with Python if it is there.
        let wheel = tmp.path().join("crafter-1.8.3-py3-none-any.whl");
        let src = tmp.path().join("wheel-src");
        std::fs::create_dir_all(src.join("crafter/assets")).unwrap();
        copy_dir(&dir, &src.join("crafter/assets"));
        let made = Command::new(&python)
            .args(["-m", "zipfile", "-c"])
            .arg(&wheel)
            .arg(src.join("crafter"))
            .status();
        if made.is_ok_and(|s| s.success()) {
            let files = read_archive_assets(&python, &wheel, tmp.path()).unwrap();
            verify_fetched(&wheel, &files).unwrap();
        } else {
            eprintln!("skipping the wheel half: python3 is not available");
        }

        let junk = tmp.path().join("crafter-1.8.3.zip");
        std::fs::write(&junk, b"not a zip").unwrap();
        assert!(read_archive_assets(&python, &junk, tmp.path()).is_err());
        let junk = tmp.path().join("crafter-junk.tar.gz");
        std::fs::write(&junk, b"not a tarball").unwrap();
        let err = read_archive_assets(&python, &junk, tmp.path()).unwrap_err();
        assert!(matches!(err, TextureError::Archive { .. }), "{err}");
    }

    /// Downloads crafter from PyPI (network): `cargo test -- --ignored fetch_official_from_pypi`.
    #[test]
    #[ignore = "needs network access to PyPI and a Python with pip"]
    fn fetch_official_from_pypi() {
        let tmp = scratch("fetch");
        let dest = tmp.path().join(CACHE_SUBDIR);
        let dir = fetch_official(Some(&dest)).unwrap();
        assert_eq!(dir, dest);
        assert!(verify_all_files(&dir));
        let set = TextureSet::load_official(&dir).unwrap();
        assert_eq!(set.fingerprint(), OFFICIAL_FINGERPRINT);
        // A second fetch finds the folder complete and returns at once.
        assert_eq!(fetch_official(Some(&dest)).unwrap(), dest);
    }

    /// Writes a ×4 contact sheet of the builtin sprites (REQUIRED order, 8 per row) over a
    /// checkerboard: `SHEET_OUT=/tmp/sheet.png cargo test -- --ignored contact_sheet`.
    #[test]
    #[ignore = "writes a PNG for a human to look at"]
    fn contact_sheet() {
        let out = std::env::var_os("SHEET_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("vlm-eval-builtin-sprites.png"));
        let mut sets = vec![TextureSet::builtin()];
        if let Some(dir) = official_dir() {
            sets.push(TextureSet::load_official(&dir).unwrap());
        }
        let (scale, cols, pad) = (4usize, 8usize, 4usize);
        let cell = 16 * scale + pad;
        let rows_per_set = TextureSet::REQUIRED.len().div_ceil(cols);
        let (w, h) = (cols * cell + pad, sets.len() * rows_per_set * cell + pad);
        let mut sheet = image::RgbImage::new(w as u32, h as u32);
        for (x, y, p) in sheet.enumerate_pixels_mut() {
            let light = ((x / 8) + (y / 8)) % 2 == 0;
            *p = if light {
                image::Rgb([96, 96, 96])
            } else {
                image::Rgb([72, 72, 72])
            };
        }
        for (s, set) in sets.iter().enumerate() {
            for (i, &name) in TextureSet::REQUIRED.iter().enumerate() {
                let t = set.get(name).unwrap();
                let ox = pad + (i % cols) * cell;
                let oy = pad + (s * rows_per_set + i / cols) * cell;
                for y in 0..16 * scale {
                    for x in 0..16 * scale {
                        let px = t.pixel(x / scale, y / scale);
                        let a = if t.channels == 4 { px[3] as u32 } else { 255 };
                        let dst = sheet.get_pixel_mut((ox + x) as u32, (oy + y) as u32);
                        for (d, &v) in dst.0.iter_mut().zip(px) {
                            *d = ((v as u32 * a + *d as u32 * (255 - a)) / 255) as u8;
                        }
                    }
                }
            }
        }
        sheet.save(&out).unwrap();
        eprintln!("wrote {}", out.display());
    }
}
