//! Qwen2-VL's config.json (`model_type` `qwen2_vl`, or none as old exports write it): the
//! shared fields in either layout; the family has no extra settings.

use serde_json::Value;

use crate::config::layout::{Common, Fields, TextConfig, VisionConfig};
use crate::LocalError;

/// Parse a `qwen2_vl` config in either layout: nested (`text_config`, `rope_parameters`) or
/// flat (top-level text fields, `rope_scaling.mrope_section`, `rope_theta`,
/// `vision_config.in_chans`).
pub(crate) fn parse(f: &Fields<'_>) -> Result<Common, LocalError> {
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
    Ok(Common {
        text,
        vision,
        image_token_id,
        vision_start_token_id: start.map(|x| x as u32),
        eos_token_ids: f.ids(&["eos_token_id", "text_config.eos_token_id"])?,
    })
}
