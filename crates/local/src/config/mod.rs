//! Checkpoint configuration: `config.json` read by its `model_type` (the family's own reader in
//! `model/<family>/config.rs`, over the shared layouts of `layout.rs`), `preprocessor_config.json`
//! and `generation_config.json`.

use std::path::Path;

use serde_json::Value;

pub mod layout;

use self::layout::Common;
pub(crate) use self::layout::Fields;
pub use self::layout::{read_json, TextConfig, VisionConfig};
use crate::model::qwen2vl::config as qwen2vl;
use crate::model::qwen35::config as qwen35;
use crate::LocalError;

/// The model family (config.json `model_type`) and what only that family needs.
#[derive(Clone, Debug, PartialEq)]
pub enum Arch {
    /// `qwen2_vl`.
    Qwen2Vl,
    /// `qwen3_5`: the hybrid decoder's and the vision tower's extra settings.
    Qwen35(Box<qwen35::Qwen35Extra>),
}

/// The `model_type` values `--model local:DIR` runs.
pub const SUPPORTED_MODEL_TYPES: &[&str] = &["qwen2_vl", "qwen3_5"];

/// Everything read from `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// Family.
    pub arch: Arch,
    /// Decoder.
    pub text: TextConfig,
    /// Vision tower.
    pub vision: VisionConfig,
    /// `<|image_pad|>` id.
    pub image_token_id: u32,
    /// `<|vision_start|>` id.
    pub vision_start_token_id: Option<u32>,
    /// `eos_token_id` from config.json (ids), if any.
    pub eos_token_ids: Vec<u32>,
}

/// CLIP normalisation (Qwen2-VL's processor defaults).
const CLIP_MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
/// CLIP normalisation (Qwen2-VL's processor defaults).
const CLIP_STD: [f32; 3] = [0.268_629_54, 0.261_302_6, 0.275_777_1];

/// `preprocessor_config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct PreprocessorConfig {
    /// Minimum pixels after resize.
    pub min_pixels: usize,
    /// Maximum pixels after resize.
    pub max_pixels: usize,
    /// Patch side.
    pub patch_size: usize,
    /// Frames per temporal patch.
    pub temporal_patch_size: usize,
    /// Merge factor per side.
    pub merge_size: usize,
    /// Per-channel mean.
    pub image_mean: [f32; 3],
    /// Per-channel std.
    pub image_std: [f32; 3],
    /// Rescale factor (1/255), applied in f64 as transformers does.
    pub rescale_factor: f64,
}

/// `generation_config.json` (all optional).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerationConfig {
    /// Stop ids.
    pub eos_token_ids: Vec<u32>,
    /// Sample (else greedy).
    pub do_sample: bool,
    /// Temperature.
    pub temperature: Option<f32>,
    /// Nucleus mass.
    pub top_p: Option<f32>,
    /// Top-k.
    pub top_k: Option<usize>,
}

impl ModelConfig {
    /// A family's settings and the fields every family has.
    fn of(arch: Arch, c: Common) -> ModelConfig {
        ModelConfig {
            arch,
            text: c.text,
            vision: c.vision,
            image_token_id: c.image_token_id,
            vision_start_token_id: c.vision_start_token_id,
            eos_token_ids: c.eos_token_ids,
        }
    }

    /// Read `DIR/config.json`.
    pub fn load(dir: &Path) -> Result<ModelConfig, LocalError> {
        let file = dir.join("config.json");
        let root = read_json(&file)?;
        ModelConfig::from_value(&root, &file)
    }

    /// Parse config.json by its `model_type` (absent: Qwen2-VL, as old exports write it);
    /// an unknown type is an error naming the supported ones.
    pub fn from_value(root: &Value, file: &Path) -> Result<ModelConfig, LocalError> {
        let f = Fields {
            file: file.to_path_buf(),
            root,
        };
        match root.get("model_type").and_then(Value::as_str) {
            None | Some("qwen2_vl") => Ok(ModelConfig::of(Arch::Qwen2Vl, qwen2vl::parse(&f)?)),
            Some("qwen3_5") => {
                let (common, extra) = qwen35::parse(&f)?;
                Ok(ModelConfig::of(Arch::Qwen35(Box::new(extra)), common))
            }
            Some(other) => Err(f.err(
                "model_type",
                format!(
                    "`{other}` is not supported (supported: {})",
                    SUPPORTED_MODEL_TYPES.join(", ")
                ),
            )),
        }
    }
}

impl PreprocessorConfig {
    /// Read `DIR/preprocessor_config.json` and check it against the model config.
    pub fn load(dir: &Path, model: &ModelConfig) -> Result<PreprocessorConfig, LocalError> {
        let file = dir.join("preprocessor_config.json");
        let root = read_json(&file)?;
        PreprocessorConfig::from_value(&root, &file, model)
    }

    /// Read `DIR/preprocessor_config.json` when present, else the family's processor defaults
    /// (Qwen2-VL: min 56·56 and max 28·28·1280 pixels, CLIP mean/std; Qwen3.5: min 65,536 and
    /// max 16,777,216 pixels, mean/std 0.5; patch, merge and temporal sizes from config.json)
    /// — for weights-only folders written by `save_pretrained`.
    pub fn load_or_default(
        dir: &Path,
        model: &ModelConfig,
    ) -> Result<PreprocessorConfig, LocalError> {
        let file = dir.join("preprocessor_config.json");
        if file.exists() {
            return PreprocessorConfig::load(dir, model);
        }
        PreprocessorConfig::from_value(&Value::Object(Default::default()), &file, model)
    }

    /// Parse a preprocessor config (absent fields take the Qwen2-VL defaults).
    fn from_value(
        root: &Value,
        file: &Path,
        model: &ModelConfig,
    ) -> Result<PreprocessorConfig, LocalError> {
        let f = Fields {
            file: file.to_path_buf(),
            root,
        };
        // Processor defaults of the family: Qwen2-VL's (CLIP mean/std), or Qwen3.5's published
        // preprocessor_config.json (min 65,536 and max 16,777,216 pixels, mean/std 0.5).
        let (min_px, max_px, mean, std) = match model.arch {
            Arch::Qwen2Vl => (56 * 56, 28 * 28 * 1280, CLIP_MEAN, CLIP_STD),
            Arch::Qwen35(_) => (65_536, 16_777_216, [0.5; 3], [0.5; 3]),
        };
        let cfg = PreprocessorConfig {
            min_pixels: f.usize_or(&["size.shortest_edge", "min_pixels"], min_px)?,
            max_pixels: f.usize_or(&["size.longest_edge", "max_pixels"], max_px)?,
            patch_size: f.usize_or(&["patch_size"], model.vision.patch_size)?,
            temporal_patch_size: f
                .usize_or(&["temporal_patch_size"], model.vision.temporal_patch_size)?,
            merge_size: f.usize_or(&["merge_size"], model.vision.spatial_merge_size)?,
            image_mean: f.floats3(&["image_mean"], mean)?,
            image_std: f.floats3(&["image_std"], std)?,
            rescale_factor: f.f64_or(&["rescale_factor"], 1.0 / 255.0)?,
        };
        if f.usize_or(&["resample"], 3)? != 3 {
            return Err(f.err("resample", "only 3 (bicubic) is supported"));
        }
        for (field, ok) in [
            ("do_resize", f.bool_or(&["do_resize"], true)?),
            ("do_rescale", f.bool_or(&["do_rescale"], true)?),
            ("do_normalize", f.bool_or(&["do_normalize"], true)?),
        ] {
            if !ok {
                return Err(f.err(field, "false is not supported"));
            }
        }
        let v = &model.vision;
        for (field, got, want) in [
            ("patch_size", cfg.patch_size, v.patch_size),
            (
                "temporal_patch_size",
                cfg.temporal_patch_size,
                v.temporal_patch_size,
            ),
            ("merge_size", cfg.merge_size, v.spatial_merge_size),
        ] {
            if got != want {
                return Err(f.err(
                    field,
                    format!("{got} disagrees with config.json vision_config ({want})"),
                ));
            }
        }
        if cfg.min_pixels > cfg.max_pixels {
            return Err(f.err("size.shortest_edge", "min pixels exceed max pixels"));
        }
        Ok(cfg)
    }
}

impl GenerationConfig {
    /// Read `DIR/generation_config.json` if present (defaults otherwise).
    pub fn load(dir: &Path) -> Result<GenerationConfig, LocalError> {
        let file = dir.join("generation_config.json");
        if !file.exists() {
            return Ok(GenerationConfig::default());
        }
        let root = read_json(&file)?;
        let f = Fields {
            file: file.clone(),
            root: &root,
        };
        let top_k = f.usize_or(&["top_k"], 0)?;
        Ok(GenerationConfig {
            eos_token_ids: f.ids(&["eos_token_id"])?,
            do_sample: f.bool_or(&["do_sample"], false)?,
            temperature: f
                .find(&["temperature"])
                .map(|_| f.f64(&["temperature"]))
                .transpose()?
                .map(|x| x as f32),
            top_p: f
                .find(&["top_p"])
                .map(|_| f.f64(&["top_p"]))
                .transpose()?
                .map(|x| x as f32),
            top_k: (top_k > 0).then_some(top_k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The published Qwen2-VL-2B-Instruct config.json (transformers-4 flat layout), abridged.
    fn flat_2b() -> Value {
        json!({
            "architectures": ["Qwen2VLForConditionalGeneration"], "hidden_size": 1536, "intermediate_size": 8960,
            "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            "vocab_size": 151936, "tie_word_embeddings": true, "image_token_id": 151655,
            "video_token_id": 151656, "vision_start_token_id": 151652, "eos_token_id": 151645,
            "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                              "hidden_size": 1536, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
        })
    }

    #[test]
    fn flat_layout_parses() {
        let c = ModelConfig::from_value(&flat_2b(), Path::new("config.json")).unwrap();
        assert_eq!(c.text.hidden_size, 1536);
        assert_eq!(c.text.head_dim(), 128);
        assert_eq!(c.text.mrope_section, [16, 24, 24]);
        assert_eq!(c.text.rope_theta, 1e6);
        assert!(c.text.tie_word_embeddings);
        assert_eq!(c.vision.in_channels, 3);
        assert_eq!(c.vision.mlp_dim(), 5120);
        assert_eq!(c.vision.patch_dim(), 1176);
        assert_eq!(c.image_token_id, 151655);
        assert_eq!(c.eos_token_ids, vec![151645]);
    }

    #[test]
    fn nested_fixture_layout_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen2vl");
        let c = ModelConfig::load(&dir).unwrap();
        assert_eq!(
            (c.text.hidden_size, c.text.num_heads, c.text.num_kv_heads),
            (64, 4, 2)
        );
        assert_eq!(c.text.mrope_section, [2, 3, 3]);
        assert_eq!((c.vision.embed_dim, c.vision.depth), (32, 2));
        let g = GenerationConfig::load(&dir).unwrap();
        assert_eq!(g.eos_token_ids, vec![2, 0]);
        let p = PreprocessorConfig::load(&dir, &c).unwrap();
        assert_eq!((p.min_pixels, p.max_pixels), (3136, 1_003_520));
    }

    #[test]
    fn missing_preprocessor_config_takes_qwen2vl_defaults() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen2vl");
        let c = ModelConfig::load(&dir).unwrap();
        let d = PreprocessorConfig::load_or_default(Path::new("/nonexistent-dir"), &c).unwrap();
        assert_eq!((d.min_pixels, d.max_pixels), (56 * 56, 28 * 28 * 1280));
        assert_eq!(
            (d.patch_size, d.merge_size, d.temporal_patch_size),
            (14, 2, 2)
        );
        // The fixture's file spells out the same processor (transformers' defaults).
        assert_eq!(d, PreprocessorConfig::load(&dir, &c).unwrap());
        assert!(PreprocessorConfig::load(Path::new("/nonexistent-dir"), &c).is_err());
    }

    #[test]
    fn errors_name_file_and_field() {
        let mut v = flat_2b();
        v["rope_scaling"]["mrope_section"] = json!([16, 24, 23]);
        let e = ModelConfig::from_value(&v, Path::new("m/config.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("m/config.json: field `rope_scaling.mrope_section`"),
            "{e}"
        );
        let mut v = flat_2b();
        v.as_object_mut().unwrap().remove("hidden_size");
        let e = ModelConfig::from_value(&v, Path::new("config.json"))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "config.json: field `text_config.hidden_size` is missing");
        let mut v = flat_2b();
        v["vision_config"]["hidden_size"] = json!(2048);
        let e = ModelConfig::from_value(&v, Path::new("config.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("vision_config.hidden_size"), "{e}");
        let e = ModelConfig::load(Path::new("/nonexistent-dir"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent-dir/config.json:"), "{e}");
    }
}
