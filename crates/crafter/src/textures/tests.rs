//! Tests of loading, verification, discovery and fetching.

use super::discover::*;
use super::fetch::*;
use super::*;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Command;
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

/// The project's crafter venv (`.venv-crafter`, which `.ci/run` creates), if present.
fn venv() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-crafter");
    dir.join("bin/python").exists().then_some(dir)
}

/// Where this machine has crafter's assets: $VLM_EVAL_TEST_ASSETS, else the project's venv.
fn official_dir() -> Option<PathBuf> {
    let from_venv = venv().and_then(|v| {
        std::fs::read_dir(v.join("lib"))
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("site-packages/crafter/assets"))
            .find(|d| d.is_dir())
    });
    let candidates = [
        std::env::var_os("VLM_EVAL_TEST_ASSETS").map(PathBuf::from),
        from_venv,
    ];
    let found = candidates.into_iter().flatten().find(|d| d.is_dir());
    if found.is_none() {
        eprintln!(
            "skipping: crafter assets not found (set VLM_EVAL_TEST_ASSETS or create .venv-crafter)"
        );
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
    let err = TextureSet::discover(Some(Path::new("/nonexistent/vlm-eval/assets"))).unwrap_err();
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
        "VLM_EVAL_NO_FETCH",
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

        // An installed crafter package is found through $VLM_EVAL_PYTHON, and its verified
        // files are copied into the cache, where the next discovery finds them without Python.
        if let Some(venv) = venv() {
            std::env::set_var("VLM_EVAL_PYTHON", venv.join("bin/python"));
            let (set, warning) = TextureSet::discover(None).unwrap();
            assert_eq!(set.kind(), "official");
            assert!(warning.is_none());
            assert_eq!(set.fingerprint(), OFFICIAL_FINGERPRINT);
            assert!(
                verify_all_files(&cached),
                "the package's files were not cached"
            );
            std::env::set_var("VLM_EVAL_PYTHON", "/nonexistent/python3");
            let (set, _) = TextureSet::discover(None).unwrap();
            assert_eq!(
                set.source(),
                &TextureSource::Official {
                    dir: cached.clone()
                }
            );
            std::fs::remove_dir_all(&cached).unwrap();
        } else {
            eprintln!("skipping the installed-package case: no .venv-crafter");
        }

        // A cache folder that is not crafter's textures is an error naming the folder.
        std::fs::create_dir(&cached).unwrap();
        std::fs::write(cached.join("cow.png"), b"not a png").unwrap();
        let err = TextureSet::discover(None).unwrap_err();
        assert!(matches!(err, TextureError::BadCache { .. }), "{err}");
        assert!(err.to_string().contains(&cached.display().to_string()));
        std::fs::remove_dir_all(&cached).unwrap();
    }

    // Fetching allowed but impossible (no Python): one notice before the attempt, then the
    // built-in sprites with a warning that says the fetch failed.
    std::env::remove_var("CRAFTER_ASSETS");
    std::env::set_var("VLM_EVAL_PYTHON", "/nonexistent/python3");
    let mut notices = Vec::new();
    let (set, warning) = TextureSet::discover_with(None, FetchPolicy::Fetch, &mut |m| {
        notices.push(m.to_string())
    })
    .unwrap();
    assert_eq!(set.kind(), "builtin");
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("fetching them once into") && !notices[0].contains('\n'));
    let warning = warning.unwrap();
    assert!(warning.contains("fetching them failed"), "{warning}");
    assert!(!warning.contains('\n'));
    // Under NoFetch nothing is announced or attempted.
    notices.clear();
    let (set, warning) = TextureSet::discover_with(None, FetchPolicy::NoFetch, &mut |m| {
        notices.push(m.to_string())
    })
    .unwrap();
    assert_eq!(set.kind(), "builtin");
    assert!(notices.is_empty());
    assert!(!warning.unwrap().contains("fetching"));

    // $VLM_EVAL_NO_FETCH.
    for (value, expected) in [
        (Some("1"), FetchPolicy::NoFetch),
        (Some("yes"), FetchPolicy::NoFetch),
        (Some("0"), FetchPolicy::Fetch),
        (Some(""), FetchPolicy::Fetch),
        (None, FetchPolicy::Fetch),
    ] {
        match value {
            Some(v) => std::env::set_var("VLM_EVAL_NO_FETCH", v),
            None => std::env::remove_var("VLM_EVAL_NO_FETCH"),
        }
        assert_eq!(FetchPolicy::from_env(), expected, "{value:?}");
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
    assert!(matches!(err, TextureError::DestNotEmpty { ref entry, .. } if entry == "notes.txt"));
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
