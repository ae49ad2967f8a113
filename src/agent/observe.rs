//! Text observations of the game state (the `vlm-eval-observe` crate, shared with the Python
//! env) and the frame's PNG encoding.

pub use vlm_eval_observe::{direction_word, observe, ObsFormat};

/// Encode an RGB frame (H × W × 3) as PNG.
pub fn encode_png(frame: &[u8], size: usize) -> Vec<u8> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    use image::ImageEncoder;
    let mut out = Vec::with_capacity(frame.len() / 2);
    // fdeflate with the Paeth filter: the smallest files within 20% of the encode time of the
    // Sub filter used before (a third of the bytes for a 256 px day frame, no slower per
    // turn); docs/BENCHMARKS.md, "Frame files". Still an RGB PNG: every decoder reads it alike.
    let encoder = PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Paeth);
    // Writing into a Vec cannot fail for a correctly sized RGB buffer.
    let _ = encoder.write_image(
        frame,
        size as u32,
        size as u32,
        image::ExtendedColorType::Rgb8,
    );
    out
}
