//! Prompt tokens an image costs, by each provider's documented rule (for `run --estimate`):
//!
//! - OpenAI, tile models (platform.openai.com/docs/guides/images-vision, "Calculating costs"):
//!   `detail: low` costs the base; otherwise the image is scaled to fit 2048×2048, then its
//!   shortest side to 768 (never up), and costs base + tiles × per-tile, tiles of 512 px.
//!   Base / per-tile: gpt-4o, gpt-4.1 85/170; gpt-4o-mini 2833/5667; gpt-5, gpt-5.1 70/140;
//!   o1, o3 75/150.
//! - OpenAI, patch models (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): 32 px patches,
//!   at most 1536 (the image scaled down to fit, then to whole patches across), times a
//!   per-model multiplier (1.62, 2.46, 1.72). The two rules' scopes are from that page and
//!   openai/openai-python#2851.
//! - Anthropic (docs.anthropic.com/en/docs/build-with-claude/vision): about w·h/750 tokens,
//!   after scaling down to a long edge of 1568 px.
//! - Gemini (ai.google.dev/gemini-api/docs/tokens): 258 tokens for an image with both sides
//!   at most 384 px; larger ones are cut into 768×768 tiles of 258 tokens each (the crop is
//!   not documented: we count ceil(w/768)·ceil(h/768) tiles).

/// How a provider counts an image.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ImageRule {
    /// OpenAI's tile rule: base tokens, tokens per 512 px tile.
    Tiles {
        /// Tokens every image costs (all of a `detail: low` image).
        base: u64,
        /// Tokens per 512 px tile.
        per_tile: u64,
    },
    /// OpenAI's patch rule: 32 px patches (at most 1536) times a multiplier.
    Patches {
        /// Tokens per patch.
        multiplier: f64,
    },
    /// Anthropic's w·h/750.
    Claude,
    /// Gemini's 258 per image up to 384 px, else per 768 px tile.
    Gemini,
}

/// The rule for a model name (after any provider prefix), or None when unknown.
pub fn rule_for(model: &str) -> Option<ImageRule> {
    let m = model.rsplit('/').next().unwrap_or(model);
    let is = |p: &str| m == p || m.starts_with(&format!("{p}-"));
    let tiles = |base, per_tile| Some(ImageRule::Tiles { base, per_tile });
    let patches = |multiplier| Some(ImageRule::Patches { multiplier });
    if m.starts_with("claude") {
        return Some(ImageRule::Claude);
    }
    if m.starts_with("gemini") {
        return Some(ImageRule::Gemini);
    }
    // Most specific names first: `gpt-4o-mini` before `gpt-4o`, `-mini`/`-nano` before the family.
    if is("gpt-4o-mini") {
        tiles(2833, 5667)
    } else if is("gpt-4.1-mini") || is("gpt-5-mini") {
        patches(1.62)
    } else if is("gpt-4.1-nano") || is("gpt-5-nano") {
        patches(2.46)
    } else if is("o4-mini") {
        patches(1.72)
    } else if is("gpt-4o") || is("gpt-4.1") {
        tiles(85, 170)
    } else if is("gpt-5") || is("gpt-5.1") {
        tiles(70, 140)
    } else if is("o1") || is("o3") {
        tiles(75, 150)
    } else {
        None
    }
}

/// OpenAI's tile count of a w×h image (`detail` high or auto).
pub fn openai_tiles(w: u32, h: u32) -> u64 {
    let (mut w, mut h) = (w as f64, h as f64);
    if w.max(h) > 2048.0 {
        let s = 2048.0 / w.max(h);
        (w, h) = (w * s, h * s);
    }
    if w.min(h) > 768.0 {
        let s = 768.0 / w.min(h);
        (w, h) = (w * s, h * s);
    }
    ((w / 512.0).ceil() * (h / 512.0).ceil()) as u64
}

/// OpenAI's patch count of a w×h image (at most 1536).
pub fn openai_patches(w: u32, h: u32) -> u64 {
    let (w, h) = (w as f64, h as f64);
    let raw = (w / 32.0).ceil() * (h / 32.0).ceil();
    if raw <= 1536.0 {
        return raw as u64;
    }
    let shrink = (32.0 * 32.0 * 1536.0 / (w * h)).sqrt();
    let (w1, h1) = (w * shrink, h * shrink);
    // Then scaled again so that the width is a whole number of patches.
    let shrink2 = (w1 / 32.0).floor() / (w1 / 32.0);
    let (w2, h2) = (w1 * shrink2, h1 * shrink2);
    // Whole-patch sizes come out a hair above an integer in floating point: not a new patch.
    let whole = |x: f64| (x / 32.0 - 1e-9).ceil();
    (whole(w2) * whole(h2)) as u64
}

/// Tokens of one w×h image under `rule`; `low` is OpenAI's `detail: low`.
pub fn image_tokens(rule: ImageRule, w: u32, h: u32, low: bool) -> u64 {
    match rule {
        ImageRule::Tiles { base, .. } if low => base,
        ImageRule::Tiles { base, per_tile } => base + per_tile * openai_tiles(w, h),
        ImageRule::Patches { multiplier } => {
            (openai_patches(w, h) as f64 * multiplier).ceil() as u64
        }
        ImageRule::Claude => {
            let (mut w, mut h) = (w as f64, h as f64);
            if w.max(h) > 1568.0 {
                let s = 1568.0 / w.max(h);
                (w, h) = ((w * s).round(), (h * s).round());
            }
            (w * h / 750.0).ceil() as u64
        }
        ImageRule::Gemini if w <= 384 && h <= 384 => 258,
        ImageRule::Gemini => 258 * (w.div_ceil(768) as u64) * (h.div_ceil(768) as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_tile_examples_from_the_docs() {
        // platform.openai.com/docs/guides/images-vision, "Calculating costs", GPT-4o:
        // 1024×1024 high: 4 tiles, 765 tokens; 2048×4096 high → 768×1536, 6 tiles, 1105;
        // 4096×8192 low: 85.
        let four_o = rule_for("gpt-4o").unwrap();
        assert_eq!(image_tokens(four_o, 1024, 1024, false), 765);
        assert_eq!(image_tokens(four_o, 2048, 4096, false), 1105);
        assert_eq!(image_tokens(four_o, 4096, 8192, true), 85);
        // gpt-4o-mini's own constants (2833 base, 5667 per tile) on the same tiling.
        let mini = rule_for("gpt-4o-mini-2024-07-18").unwrap();
        assert_eq!(
            mini,
            ImageRule::Tiles {
                base: 2833,
                per_tile: 5667
            }
        );
        assert_eq!(image_tokens(mini, 1024, 1024, false), 2833 + 4 * 5667);
        assert_eq!(image_tokens(mini, 64, 64, false), 8500);
        assert_eq!(image_tokens(mini, 64, 64, true), 2833);
    }

    #[test]
    fn openai_patch_examples_from_the_docs() {
        // Same page, patch models: 1024×1024 → 1024 patches; 1800×2400 → 1452 patches.
        assert_eq!(openai_patches(1024, 1024), 1024);
        assert_eq!(openai_patches(1800, 2400), 1452);
        let m = rule_for("gpt-5-mini").unwrap();
        assert_eq!(
            image_tokens(m, 1024, 1024, false),
            (1024.0f64 * 1.62).ceil() as u64
        );
        assert_eq!(
            rule_for("gpt-4.1-nano"),
            Some(ImageRule::Patches { multiplier: 2.46 })
        );
    }

    #[test]
    fn claude_examples_from_the_docs() {
        // docs.anthropic.com vision page's table: 200×200 ≈ 54, 1000×1000 ≈ 1334,
        // 1092×1092 ≈ 1590 tokens.
        let c = rule_for("claude-sonnet-4-5").unwrap();
        assert_eq!(image_tokens(c, 200, 200, false), 54);
        assert_eq!(image_tokens(c, 1000, 1000, false), 1334);
        assert_eq!(image_tokens(c, 1092, 1092, false), 1590);
    }

    #[test]
    fn gemini_counts_258_up_to_384_px() {
        // ai.google.dev/gemini-api/docs/tokens: "images with both dimensions <= 384 pixels
        // are counted as 258 tokens"; larger ones in 768×768 tiles of 258.
        let g = rule_for("gemini-2.5-flash").unwrap();
        assert_eq!(image_tokens(g, 64, 64, false), 258);
        assert_eq!(image_tokens(g, 384, 384, false), 258);
        assert_eq!(image_tokens(g, 1536, 768, false), 516);
        assert_eq!(rule_for("llama-3"), None);
    }
}
