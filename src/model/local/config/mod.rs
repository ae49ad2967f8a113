//! Checkpoint configuration: `config.json` (flat transformers-4 layout and nested
//! transformers-5 layout), `preprocessor_config.json` and `generation_config.json`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::LocalError;

/// Text decoder (Qwen2 with M-RoPE) shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct TextConfig {
    /// Model width D.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (GQA).
    pub num_kv_heads: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// Rotary base.
    pub rope_theta: f64,
    /// M-RoPE sections (t, h, w) in half-head-dim units.
    pub mrope_section: [usize; 3],
    /// Embedding rows.
    pub vocab_size: usize,
    /// Whether `lm_head` is the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Per-head width when config.json sets it (else `hidden_size / num_heads`).
    pub explicit_head_dim: Option<usize>,
}

impl TextConfig {
    /// Per-head width.
    pub fn head_dim(&self) -> usize {
        self.explicit_head_dim
            .unwrap_or(self.hidden_size / self.num_heads)
    }
}

/// The model family (config.json `model_type`) and what only that family needs.
#[derive(Clone, Debug, PartialEq)]
pub enum Arch {
    /// `qwen2_vl`.
    Qwen2Vl,
    /// `qwen3_5`: the hybrid decoder's and the vision tower's extra settings.
    Qwen35(Box<crate::model::local::model::qwen35::config::Qwen35Extra>),
}

/// The `model_type` values `--model local:DIR` runs.
pub const SUPPORTED_MODEL_TYPES: &[&str] = &["qwen2_vl", "qwen3_5"];

/// Vision tower (ViT + 2x2 patch merger) shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct VisionConfig {
    /// Blocks.
    pub depth: usize,
    /// ViT width E.
    pub embed_dim: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// MLP width is `embed_dim * mlp_ratio`.
    pub mlp_ratio: f64,
    /// Input channels (3).
    pub in_channels: usize,
    /// Merger output width (must equal the text width).
    pub hidden_size: usize,
    /// Patch side in pixels.
    pub patch_size: usize,
    /// Merge factor per side.
    pub spatial_merge_size: usize,
    /// Frames per temporal patch.
    pub temporal_patch_size: usize,
    /// Vision rotary base.
    pub rope_theta: f64,
}

impl VisionConfig {
    /// Values in one flattened patch (C·T·P·P).
    pub fn patch_dim(&self) -> usize {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }
    /// MLP width.
    pub fn mlp_dim(&self) -> usize {
        (self.embed_dim as f64 * self.mlp_ratio).round() as usize
    }
}

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

/// Read and parse one JSON file; a missing file is an error naming it.
pub fn read_json(path: &Path) -> Result<Value, LocalError> {
    let text = std::fs::read_to_string(path).map_err(|e| LocalError::File {
        file: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| LocalError::File {
        file: path.to_path_buf(),
        msg: format!("invalid JSON: {e}"),
    })
}

/// Field lookup over alternative dotted paths, with errors naming the file and field.
pub(crate) struct Fields<'a> {
    pub(crate) file: PathBuf,
    pub(crate) root: &'a Value,
}

impl Fields<'_> {
    pub(crate) fn find(&self, paths: &[&str]) -> Option<&Value> {
        paths.iter().find_map(|p| {
            let mut v = self.root;
            for key in p.split('.') {
                v = v.get(key)?;
            }
            (!v.is_null()).then_some(v)
        })
    }
    pub(crate) fn err(&self, field: &str, msg: impl Into<String>) -> LocalError {
        LocalError::Field {
            file: self.file.clone(),
            field: field.to_string(),
            msg: msg.into(),
        }
    }
    pub(crate) fn usize(&self, paths: &[&str]) -> Result<usize, LocalError> {
        let v = self
            .find(paths)
            .ok_or_else(|| self.err(paths[0], "is missing"))?;
        v.as_u64()
            .map(|x| x as usize)
            .ok_or_else(|| self.err(paths[0], format!("must be a non-negative integer, got {v}")))
    }
    pub(crate) fn usize_or(&self, paths: &[&str], default: usize) -> Result<usize, LocalError> {
        match self.find(paths) {
            None => Ok(default),
            Some(_) => self.usize(paths),
        }
    }
    pub(crate) fn f64_or(&self, paths: &[&str], default: f64) -> Result<f64, LocalError> {
        match self.find(paths) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| self.err(paths[0], format!("must be a number, got {v}"))),
        }
    }
    pub(crate) fn f64(&self, paths: &[&str]) -> Result<f64, LocalError> {
        self.find(paths)
            .ok_or_else(|| self.err(paths[0], "is missing"))?;
        self.f64_or(paths, 0.0)
    }
    pub(crate) fn bool_or(&self, paths: &[&str], default: bool) -> Result<bool, LocalError> {
        match self.find(paths) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.err(paths[0], format!("must be true or false, got {v}"))),
        }
    }
    /// An id or a list of ids.
    pub(crate) fn ids(&self, paths: &[&str]) -> Result<Vec<u32>, LocalError> {
        let Some(v) = self.find(paths) else {
            return Ok(Vec::new());
        };
        let list: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        list.into_iter()
            .map(|x| {
                x.as_u64().map(|i| i as u32).ok_or_else(|| {
                    self.err(
                        paths[0],
                        format!("must be a token id or a list of ids, got {v}"),
                    )
                })
            })
            .collect()
    }
    pub(crate) fn floats3(
        &self,
        paths: &[&str],
        default: [f32; 3],
    ) -> Result<[f32; 3], LocalError> {
        let Some(v) = self.find(paths) else {
            return Ok(default);
        };
        let bad = || self.err(paths[0], format!("must be a list of 3 numbers, got {v}"));
        let a = v.as_array().filter(|a| a.len() == 3).ok_or_else(bad)?;
        let mut out = [0f32; 3];
        for (o, x) in out.iter_mut().zip(a) {
            *o = x.as_f64().ok_or_else(bad)? as f32;
        }
        Ok(out)
    }
}

impl ModelConfig {
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
            None | Some("qwen2_vl") => ModelConfig::qwen2vl(&f),
            Some("qwen3_5") => crate::model::local::model::qwen35::config::parse(&f),
            Some(other) => Err(f.err(
                "model_type",
                format!(
                    "`{other}` is not supported (supported: {})",
                    SUPPORTED_MODEL_TYPES.join(", ")
                ),
            )),
        }
    }

    /// Parse a Qwen2-VL config in either layout: nested (`text_config`, `rope_parameters`) or
    /// flat (top-level text fields, `rope_scaling.mrope_section`, `rope_theta`,
    /// `vision_config.in_chans`).
    fn qwen2vl(f: &Fields<'_>) -> Result<ModelConfig, LocalError> {
        let t = |name: &str| -> [String; 2] { [format!("text_config.{name}"), name.to_string()] };
        let tp = |name: &str| t(name);
        macro_rules! text {
            ($m:ident, $name:expr) => {{
                let p = tp($name);
                f.$m(&[p[0].as_str(), p[1].as_str()])
            }};
        }
        let hidden_size = text!(usize, "hidden_size")?;
        let num_heads = text!(usize, "num_attention_heads")?;
        let num_kv_heads = f.usize_or(
            &["text_config.num_key_value_heads", "num_key_value_heads"],
            num_heads,
        )?;
        let section = f
            .find(&[
                "text_config.rope_parameters.mrope_section",
                "text_config.rope_scaling.mrope_section",
                "rope_parameters.mrope_section",
                "rope_scaling.mrope_section",
            ])
            .ok_or_else(|| {
                f.err(
                    "rope_scaling.mrope_section",
                    "is missing (Qwen2-VL needs M-RoPE sections)",
                )
            })?;
        let bad_section = || {
            f.err(
                "rope_scaling.mrope_section",
                format!("must be 3 integers, got {section}"),
            )
        };
        let arr = section
            .as_array()
            .filter(|a| a.len() == 3)
            .ok_or_else(bad_section)?;
        let mut mrope_section = [0usize; 3];
        for (o, x) in mrope_section.iter_mut().zip(arr) {
            *o = x.as_u64().ok_or_else(bad_section)? as usize;
        }
        let rope_theta = f.f64_or(
            &[
                "text_config.rope_parameters.rope_theta",
                "text_config.rope_theta",
                "rope_parameters.rope_theta",
                "rope_theta",
            ],
            1_000_000.0,
        )?;
        let text = TextConfig {
            hidden_size,
            intermediate_size: text!(usize, "intermediate_size")?,
            num_layers: text!(usize, "num_hidden_layers")?,
            num_heads,
            num_kv_heads,
            rms_norm_eps: f.f64_or(&["text_config.rms_norm_eps", "rms_norm_eps"], 1e-6)?,
            rope_theta,
            mrope_section,
            vocab_size: text!(usize, "vocab_size")?,
            tie_word_embeddings: f.bool_or(
                &["tie_word_embeddings", "text_config.tie_word_embeddings"],
                false,
            )?,
            explicit_head_dim: None,
        };
        if num_heads == 0 || hidden_size % num_heads != 0 {
            return Err(f.err(
                "num_attention_heads",
                format!("{num_heads} does not divide hidden_size {hidden_size}"),
            ));
        }
        if num_kv_heads == 0 || num_heads % num_kv_heads != 0 {
            return Err(f.err(
                "num_key_value_heads",
                format!("{num_kv_heads} does not divide num_attention_heads {num_heads}"),
            ));
        }
        if mrope_section.iter().sum::<usize>() * 2 != text.head_dim() {
            return Err(f.err(
                "rope_scaling.mrope_section",
                format!(
                    "{mrope_section:?} must sum to head_dim/2 = {}",
                    text.head_dim() / 2
                ),
            ));
        }
        let vision = VisionConfig {
            depth: f.usize(&["vision_config.depth"])?,
            embed_dim: f.usize(&["vision_config.embed_dim"])?,
            num_heads: f.usize(&["vision_config.num_heads"])?,
            mlp_ratio: f.f64_or(&["vision_config.mlp_ratio"], 4.0)?,
            in_channels: f.usize_or(&["vision_config.in_channels", "vision_config.in_chans"], 3)?,
            hidden_size: f.usize_or(&["vision_config.hidden_size"], hidden_size)?,
            patch_size: f.usize_or(&["vision_config.patch_size"], 14)?,
            spatial_merge_size: f.usize_or(&["vision_config.spatial_merge_size"], 2)?,
            temporal_patch_size: f.usize_or(&["vision_config.temporal_patch_size"], 2)?,
            rope_theta: f.f64_or(&["vision_config.rope_parameters.rope_theta"], 10_000.0)?,
        };
        if vision.num_heads == 0 || !vision.embed_dim.is_multiple_of(vision.num_heads) {
            return Err(f.err(
                "vision_config.num_heads",
                "must divide vision_config.embed_dim",
            ));
        }
        if !(vision.embed_dim / vision.num_heads).is_multiple_of(4) {
            return Err(f.err(
                "vision_config.num_heads",
                "vision head width must be a multiple of 4",
            ));
        }
        if vision.hidden_size != hidden_size {
            return Err(f.err(
                "vision_config.hidden_size",
                format!(
                    "{} must equal the text hidden_size {hidden_size}",
                    vision.hidden_size
                ),
            ));
        }
        if let Some(act) = f.find(&["vision_config.hidden_act"]) {
            if act.as_str() != Some("quick_gelu") {
                return Err(f.err(
                    "vision_config.hidden_act",
                    format!("{act} is not supported (only quick_gelu)"),
                ));
            }
        }
        let image_token_id = f.usize(&["image_token_id", "text_config.image_token_id"])? as u32;
        let start = f.find(&["vision_start_token_id"]).and_then(Value::as_u64);
        Ok(ModelConfig {
            arch: Arch::Qwen2Vl,
            text,
            vision,
            image_token_id,
            vision_start_token_id: start.map(|x| x as u32),
            eos_token_ids: f.ids(&["eos_token_id", "text_config.eos_token_id"])?,
        })
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
