//! Text observations of the game state (the `vlm-eval-observe` crate, shared with the Python
//! env) and the frame's PNG encoding.

pub use vlm_eval_observe::{direction_word, observe, ObsFormat};

/// Largest frame side (pixels) encoded with the Up filter; larger frames use Paeth.
const SMALL_FRAME: usize = 128;

/// Encode an RGB frame (H × W × 3) as PNG.
///
/// fdeflate, with the filter that gives the smaller files at this size: Up up to 128 px (also
/// 15-20 % faster than Paeth there), Paeth above (a quarter fewer bytes for day frames at
/// 192-256 px); docs/BENCHMARKS.md, "Frame files". Still an RGB PNG: every decoder reads it
/// alike.
pub fn encode_png(frame: &[u8], size: usize) -> Vec<u8> {
    let paeth = size > SMALL_FRAME;
    encode(frame, size, paeth)
}

/// The PNG that runs written with `png-sha256` frame hashes hashed: Paeth at every size (the
/// encoder of those versions), so their frames still verify byte for byte.
pub fn encode_png_paeth(frame: &[u8], size: usize) -> Vec<u8> {
    encode(frame, size, true)
}

fn encode(frame: &[u8], size: usize, paeth: bool) -> Vec<u8> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    use image::ImageEncoder;
    let mut out = Vec::with_capacity(frame.len() / 2);
    let filter = if paeth {
        FilterType::Paeth
    } else {
        FilterType::Up
    };
    let encoder = PngEncoder::new_with_quality(&mut out, CompressionType::Fast, filter);
    // Writing into a Vec cannot fail for a correctly sized RGB buffer.
    let _ = encoder.write_image(
        frame,
        size as u32,
        size as u32,
        image::ExtendedColorType::Rgb8,
    );
    out
}
