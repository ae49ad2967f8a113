//! Qwen3.5's config.json (`model_type` `qwen3_5`, transformers 5 nested layout): the
//! fields every family has plus [`Qwen35Extra`] (layer kinds, partial rotary, Gated DeltaNet and
//! vision-tower sizes). Defaults are transformers 5.23.0's `Qwen3_5TextConfig` /
//! `Qwen3_5VisionConfig` ones.

use serde_json::Value;

use crate::config::layout::{Common, Fields, TextConfig, VisionConfig};
use crate::LocalError;

/// A decoder layer's token mixer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Gated attention with a KV cache (`full_attention`).
    Full,
    /// Gated DeltaNet with conv and recurrent state (`linear_attention`).
    Linear,
}

/// What only Qwen3.5 needs beyond the shared text/vision shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen35Extra {
    /// One kind per decoder layer.
    pub layer_types: Vec<LayerKind>,
    /// Rotated dims per attention head (`head_dim · partial_rotary_factor`).
    pub rotary_dim: usize,
    /// Depthwise conv kernel of the linear-attention layers.
    pub conv_kernel: usize,
    /// Linear-attention key (and query) heads.
    pub lin_k_heads: usize,
    /// Linear-attention value heads.
    pub lin_v_heads: usize,
    /// Linear-attention key head width.
    pub lin_k_dim: usize,
    /// Linear-attention value head width.
    pub lin_v_dim: usize,
    /// Vision MLP width.
    pub vision_mlp: usize,
    /// Rows of the learned vision position table (a square).
    pub num_position_embeddings: usize,
}

impl Qwen35Extra {
    /// Side of the square position table.
    pub fn pos_side(&self) -> usize {
        (self.num_position_embeddings as f64).sqrt() as usize
    }
}

/// Parse a `qwen3_5` config.json.
pub(crate) fn parse(f: &Fields<'_>) -> Result<(Common, Qwen35Extra), LocalError> {
    let t = |k: &str| format!("text_config.{k}");
    let tu = |k: &str, d: usize| f.usize_or(&[t(k).as_str()], d);
    let v = |k: &str| format!("vision_config.{k}");
    let vu = |k: &str, d: usize| f.usize_or(&[v(k).as_str()], d);
    let hidden_size = tu("hidden_size", 4096)?;
    let num_layers = tu("num_hidden_layers", 32)?;
    let num_heads = tu("num_attention_heads", 16)?;
    let num_kv_heads = tu("num_key_value_heads", 4)?;
    let head_dim = tu("head_dim", 256)?;
    let rp = |k: &str| {
        [
            format!("text_config.rope_parameters.{k}"),
            format!("text_config.rope_scaling.{k}"),
        ]
    };
    let theta_p = rp("rope_theta");
    let rope_theta = f.f64_or(&[theta_p[0].as_str(), theta_p[1].as_str()], 10_000.0)?;
    let prf_p = rp("partial_rotary_factor");
    let prf = f.f64_or(&[prf_p[0].as_str(), prf_p[1].as_str()], 0.25)?;
    let rotary_dim = (head_dim as f64 * prf) as usize;
    let sec_p = rp("mrope_section");
    let mut mrope_section = [11, 11, 10];
    if let Some(sec) = f.find(&[sec_p[0].as_str(), sec_p[1].as_str()]) {
        let bad = || f.err(&sec_p[0], format!("must be 3 integers, got {sec}"));
        let a = sec.as_array().filter(|a| a.len() == 3).ok_or_else(bad)?;
        for (o, x) in mrope_section.iter_mut().zip(a) {
            *o = x.as_u64().ok_or_else(bad)? as usize;
        }
    }
    if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) || rotary_dim > head_dim {
        return Err(f.err(
            &prf_p[0],
            format!("{prf} gives {rotary_dim} rotated dims of head_dim {head_dim}"),
        ));
    }
    if num_heads == 0 || num_kv_heads == 0 || !num_heads.is_multiple_of(num_kv_heads) {
        return Err(f.err(
            &t("num_key_value_heads"),
            format!("{num_kv_heads} does not divide num_attention_heads {num_heads}"),
        ));
    }
    let layer_types = match f.find(&[t("layer_types").as_str()]) {
        None => {
            let every = tu("full_attention_interval", 4)?.max(1);
            (0..num_layers)
                .map(|i| {
                    if (i + 1) % every == 0 {
                        LayerKind::Full
                    } else {
                        LayerKind::Linear
                    }
                })
                .collect()
        }
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, x)| match x.as_str() {
                Some("full_attention") => Ok(LayerKind::Full),
                Some("linear_attention") => Ok(LayerKind::Linear),
                _ => Err(f.err(
                    &format!("text_config.layer_types[{i}]"),
                    format!(
                        "{x} is not supported (supported: \"full_attention\", \"linear_attention\")"
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => return Err(f.err(&t("layer_types"), format!("must be a list, got {other}"))),
    };
    if layer_types.len() != num_layers {
        return Err(f.err(
            &t("layer_types"),
            format!("has {} entries for {num_layers} layers", layer_types.len()),
        ));
    }
    for (field, want) in [
        (t("hidden_act"), "silu"),
        (v("hidden_act"), "gelu_pytorch_tanh"),
    ] {
        if let Some(act) = f.find(&[field.as_str()]) {
            if act.as_str() != Some(want) {
                return Err(f.err(&field, format!("{act} is not supported (only {want})")));
            }
        }
    }
    if f.bool_or(&[t("attention_bias").as_str()], false)? {
        return Err(f.err(&t("attention_bias"), "true is not supported"));
    }
    let text = TextConfig {
        hidden_size,
        intermediate_size: tu("intermediate_size", 12288)?,
        num_layers,
        num_heads,
        num_kv_heads,
        rms_norm_eps: f.f64_or(&[t("rms_norm_eps").as_str()], 1e-6)?,
        rope_theta,
        mrope_section,
        vocab_size: tu("vocab_size", 248_320)?,
        tie_word_embeddings: f.bool_or(
            &["tie_word_embeddings", t("tie_word_embeddings").as_str()],
            false,
        )?,
        explicit_head_dim: Some(head_dim),
    };
    let embed_dim = vu("hidden_size", 1152)?;
    let vision_mlp = vu("intermediate_size", 4304)?;
    let vision = VisionConfig {
        depth: vu("depth", 27)?,
        embed_dim,
        num_heads: vu("num_heads", 16)?,
        mlp_ratio: vision_mlp as f64 / embed_dim.max(1) as f64,
        in_channels: vu("in_channels", 3)?,
        hidden_size: vu("out_hidden_size", 3584)?,
        patch_size: vu("patch_size", 16)?,
        spatial_merge_size: vu("spatial_merge_size", 2)?,
        temporal_patch_size: vu("temporal_patch_size", 2)?,
        rope_theta: f.f64_or(&[v("rope_parameters.rope_theta").as_str()], 10_000.0)?,
    };
    if vision.num_heads == 0 || !(embed_dim / vision.num_heads.max(1)).is_multiple_of(4) {
        return Err(f.err(
            &v("num_heads"),
            "must divide vision_config.hidden_size into heads of a multiple of 4",
        ));
    }
    if vision.hidden_size != hidden_size {
        return Err(f.err(
            &v("out_hidden_size"),
            format!(
                "{} must equal the text hidden_size {hidden_size}",
                vision.hidden_size
            ),
        ));
    }
    let extra = Qwen35Extra {
        layer_types,
        rotary_dim,
        conv_kernel: tu("linear_conv_kernel_dim", 4)?,
        lin_k_heads: tu("linear_num_key_heads", 16)?,
        lin_v_heads: tu("linear_num_value_heads", 32)?,
        lin_k_dim: tu("linear_key_head_dim", 128)?,
        lin_v_dim: tu("linear_value_head_dim", 128)?,
        vision_mlp,
        num_position_embeddings: vu("num_position_embeddings", 2304)?,
    };
    if extra.lin_k_heads == 0 || !extra.lin_v_heads.is_multiple_of(extra.lin_k_heads) {
        return Err(f.err(
            &t("linear_num_key_heads"),
            "must divide linear_num_value_heads",
        ));
    }
    let side = extra.pos_side();
    if side < 2 || side * side != extra.num_position_embeddings {
        return Err(f.err(
            &v("num_position_embeddings"),
            "must be a square of at least 4",
        ));
    }
    if extra.conv_kernel == 0 {
        return Err(f.err(&t("linear_conv_kernel_dim"), "must be positive"));
    }
    let common = Common {
        text,
        vision,
        image_token_id: f.usize_or(&["image_token_id"], 248_056)? as u32,
        vision_start_token_id: Some(f.usize_or(&["vision_start_token_id"], 248_053)? as u32),
        eos_token_ids: f.ids(&["eos_token_id", "text_config.eos_token_id"])?,
    };
    Ok((common, extra))
}
