//! What the tests share: the tiny checkpoint fixtures under tests/fixtures/, their transformers
//! references, and fresh scratch folders.

use std::path::{Path, PathBuf};

use vlm_eval_local::backend::cpu::packed::CpuPacked;
use vlm_eval_local::engine::Engine;
use vlm_eval_local::preprocess::ImageInput;
use vlm_eval_local::weights::Weights;

/// An empty folder `name` under this package's scratch folder,
/// `CARGO_TARGET_TMPDIR/vlm-eval-local/` (emptied if a previous run left it).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_PKG_NAME"))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A checkpoint fixture folder under tests/fixtures/ (`tiny-qwen2vl`, `tiny-qwen35`, …).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The fixture `name` loaded on the packed CPU backend (the one `--device cpu` runs).
pub fn packed_engine(name: &str) -> Engine<CpuPacked> {
    Engine::load(&fixture(name), CpuPacked::default())
        .unwrap_or_else(|e| panic!("load the {name} fixture: {e}"))
}

/// What transformers computed for one prompt (a fixture's `reference*.safetensors`).
pub struct Reference {
    pub ids: Vec<u32>,
    pub pixels: Vec<f32>,
    pub grids: Vec<[usize; 3]>,
    pub positions: Vec<i64>,
    pub delta: i64,
    pub embeds: Vec<f32>,
    pub logits: Vec<f32>,
    /// The decode step's logits, in the references that hold them.
    pub decode_logits: Option<Vec<f32>>,
    /// The greedy tokens after the prompt.
    pub greedy: Vec<u32>,
}

/// Read the reference `file` of fixture `name`.
pub fn reference(name: &str, file: &str) -> Reference {
    reference_at(&fixture(name), file)
}

/// Read the reference `file` in the fixture folder `dir`.
pub fn reference_at(dir: &Path, file: &str) -> Reference {
    let w = Weights::open_files(&[dir.join(file)]).unwrap();
    let ids: Vec<u32> = w
        .i64_any("input_ids")
        .unwrap()
        .1
        .iter()
        .map(|&x| x as u32)
        .collect();
    let (_, g) = w.i64_any("image_grid_thw").unwrap();
    let grids = g
        .chunks(3)
        .map(|c| [c[0] as usize, c[1] as usize, c[2] as usize])
        .collect();
    let greedy_all = w.i64_any("greedy_ids").unwrap().1;
    Reference {
        greedy: greedy_all[ids.len()..].iter().map(|&x| x as u32).collect(),
        ids,
        pixels: w.f32_any("pixel_values").unwrap().1,
        grids,
        positions: w.i64_any("position_ids").unwrap().1,
        delta: w.i64_any("rope_deltas").unwrap().1[0],
        embeds: w.f32_any("image_embeds").unwrap().1,
        logits: w.f32_any("logits").unwrap().1,
        decode_logits: w.f32_any("decode_logits").ok().map(|x| x.1),
    }
}

/// A reference's images as model inputs (the processor's own patches, `patch_dim` values each).
pub fn ref_images(r: &Reference, patch_dim: usize) -> Vec<ImageInput> {
    let mut out = Vec::new();
    let mut at = 0;
    for &g in &r.grids {
        let n = g[0] * g[1] * g[2] * patch_dim;
        out.push(ImageInput {
            pixels: r.pixels[at..at + n].to_vec(),
            grid: g,
        });
        at += n;
    }
    out
}

/// The largest absolute difference between two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
