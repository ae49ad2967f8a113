//! Measure PNG encoder settings on real frames (docs/BENCHMARKS.md, "Frame files"): bytes per
//! frame and encode time per frame for each setting, on day and night frames at 64 to 256 px,
//! with the decoded pixels checked against the frame's.
//!
//! `cargo run --release --example png_settings` (uses CRAFTER_ASSETS when set, else the
//! built-in sprites).

use std::time::Instant;

use vlm_eval::crafter::{Action, Env, EnvConfig, TextureSet};

fn frames(textures: &TextureSet, size: usize, night: bool) -> Vec<Vec<u8>> {
    let cfg = EnvConfig {
        seed: 3,
        size: [size, size],
        length: Some(10_000),
        ..EnvConfig::default()
    };
    let mut env = Env::new(cfg, textures).expect("env");
    env.reset();
    let cycle = [
        Action::MoveLeft,
        Action::MoveUp,
        Action::Do,
        Action::MoveRight,
        Action::MoveDown,
        Action::Noop,
    ];
    let mut out = Vec::new();
    for (i, a) in cycle.iter().cycle().take(260).enumerate() {
        env.step(*a);
        let step = i as u32 + 1;
        let is_night = (160..=260).contains(&step);
        let is_day = (20..120).contains(&step);
        if (night && is_night) || (!night && is_day) {
            out.push(env.frame().to_vec());
        }
    }
    out
}

fn encode_rgb(frame: &[u8], size: usize, c: png::DeflateCompression, f: png::Filter) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, size as u32, size as u32);
    e.set_color(png::ColorType::Rgb);
    e.set_depth(png::BitDepth::Eight);
    e.set_deflate_compression(c);
    e.set_filter(f);
    let mut w = e.write_header().unwrap();
    w.write_image_data(frame).unwrap();
    w.finish().unwrap();
    out
}

/// The frame's palette (RGB triples, first-seen order) and one index per pixel, when it has at
/// most 256 colours.
fn palette_of(frame: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    const SLOTS: usize = 1024;
    let mut keys = [u32::MAX; SLOTS];
    let mut vals = [0u8; SLOTS];
    let mut palette = Vec::with_capacity(256 * 3);
    let mut indices = Vec::with_capacity(frame.len() / 3);
    let mut last = (u32::MAX, 0u8);
    for px in frame.chunks_exact(3) {
        let key = (px[0] as u32) << 16 | (px[1] as u32) << 8 | px[2] as u32;
        if key == last.0 {
            indices.push(last.1);
            continue;
        }
        let mut slot = (key.wrapping_mul(0x9E37_79B1) >> 22) as usize;
        let index = loop {
            if keys[slot] == key {
                break vals[slot];
            }
            if keys[slot] == u32::MAX {
                let n = palette.len() / 3;
                if n == 256 {
                    return None;
                }
                keys[slot] = key;
                vals[slot] = n as u8;
                palette.extend_from_slice(px);
                break n as u8;
            }
            slot = (slot + 1) % SLOTS;
        };
        last = (key, index);
        indices.push(index);
    }
    Some((palette, indices))
}

/// An indexed PNG when the frame has at most 256 colours, else the RGB encoding before (sub).
fn encode_indexed(
    frame: &[u8],
    size: usize,
    c: png::DeflateCompression,
    f: png::Filter,
) -> Vec<u8> {
    let Some((palette, indices)) = palette_of(frame) else {
        return encode_rgb(
            frame,
            size,
            png::DeflateCompression::FdeflateUltraFast,
            png::Filter::Sub,
        );
    };
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, size as u32, size as u32);
    e.set_color(png::ColorType::Indexed);
    e.set_depth(png::BitDepth::Eight);
    e.set_palette(palette);
    e.set_deflate_compression(c);
    e.set_filter(f);
    let mut w = e.write_header().unwrap();
    w.write_image_data(&indices).unwrap();
    w.finish().unwrap();
    out
}

/// One setting: a frame and its size to PNG bytes.
type Encoder = dyn Fn(&[u8], usize) -> Vec<u8>;

fn decode(png: &[u8]) -> Vec<u8> {
    image::load_from_memory(png).unwrap().to_rgb8().into_raw()
}

fn main() {
    let textures = match std::env::var_os("CRAFTER_ASSETS") {
        Some(dir) => TextureSet::load_official(std::path::Path::new(&dir)).expect("textures"),
        None => TextureSet::builtin(),
    };
    println!("textures: {}", textures.kind());
    use png::DeflateCompression as D;
    use png::Filter as F;
    let settings: Vec<(&str, Box<Encoder>)> = vec![
        (
            "rgb fdeflate sub (the encoder before)",
            Box::new(|f, s| encode_rgb(f, s, D::FdeflateUltraFast, F::Sub)),
        ),
        (
            "rgb fdeflate up (encode_png up to 128 px)",
            Box::new(|f, s| encode_rgb(f, s, D::FdeflateUltraFast, F::Up)),
        ),
        (
            "rgb fdeflate paeth (encode_png above 128 px)",
            Box::new(vlm_eval::agent::observe::encode_png),
        ),
        (
            "rgb fdeflate adaptive",
            Box::new(|f, s| encode_rgb(f, s, D::FdeflateUltraFast, F::Adaptive)),
        ),
        (
            "rgb level1 up",
            Box::new(|f, s| encode_rgb(f, s, D::Level(1), F::Up)),
        ),
        (
            "rgb level1 paeth",
            Box::new(|f, s| encode_rgb(f, s, D::Level(1), F::Paeth)),
        ),
        (
            "rgb level6 adaptive",
            Box::new(|f, s| encode_rgb(f, s, D::Level(6), F::Adaptive)),
        ),
        (
            "indexed fdeflate none (≤256 colours, else sub)",
            Box::new(|f, s| encode_indexed(f, s, D::FdeflateUltraFast, F::NoFilter)),
        ),
        (
            "indexed level1 none (≤256 colours, else sub)",
            Box::new(|f, s| encode_indexed(f, s, D::Level(1), F::NoFilter)),
        ),
        (
            "indexed level6 none (≤256 colours, else sub)",
            Box::new(|f, s| encode_indexed(f, s, D::Level(6), F::NoFilter)),
        ),
    ];
    for size in [64usize, 96, 128, 192, 256] {
        for night in [false, true] {
            let fs = frames(&textures, size, night);
            let mut base_t = 0.0;
            for (name, enc) in &settings {
                // Warm up, then time every frame a few times.
                let _ = enc(&fs[0], size);
                let reps = if size == 64 { 20 } else { 4 };
                let t = Instant::now();
                let mut bytes = 0usize;
                for _ in 0..reps {
                    for f in &fs {
                        bytes += enc(f, size).len();
                    }
                }
                let per = t.elapsed().as_secs_f64() * 1e6 / (reps * fs.len()) as f64;
                for f in &fs {
                    assert_eq!(decode(&enc(f, size)), *f, "{name}: pixels changed");
                }
                if base_t == 0.0 {
                    base_t = per;
                }
                println!(
                    "{size:>3} px {:<5} {name:<58} {:>7.0} B/frame {:>7.1} µs/frame ({:+.0}%)",
                    if night { "night" } else { "day" },
                    bytes as f64 / (reps * fs.len()) as f64,
                    per,
                    100.0 * (per / base_t - 1.0)
                );
            }
        }
    }
}
