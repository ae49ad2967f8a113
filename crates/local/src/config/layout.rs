//! What every family's config.json reader shares (a leaf: the families' `config.rs` files and
//! the dispatch in `config/mod.rs` import it): field lookup over the flat transformers-4 and
//! nested transformers-5 layouts, with errors naming the file and field, and the shapes every
//! family has.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::LocalError;

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

/// What every family's config.json gives: the decoder and vision-tower shapes and the special
/// token ids ([`super::ModelConfig`] adds the family).
#[derive(Clone, Debug, PartialEq)]
pub struct Common {
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
