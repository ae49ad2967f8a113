//! `vlm-eval assets fetch|which`: crafter's texture files.

use std::path::Path;

use super::common::load_textures;
use super::error::CliError;
use crate::crafter::textures;

/// Run `vlm-eval assets fetch`.
pub fn cmd_fetch(dest: Option<&Path>) -> Result<i32, CliError> {
    let dir = textures::fetch_official(dest).map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })?;
    println!(
        "crafter 1.8.3 textures verified and saved to {}",
        dir.display()
    );
    Ok(0)
}

/// Run `vlm-eval assets which`.
pub fn cmd_which(assets: Option<&Path>) -> Result<i32, CliError> {
    let set = load_textures(assets)?;
    match set.source() {
        textures::TextureSource::Official { dir } => {
            println!(
                "official {} (fingerprint {})",
                dir.display(),
                set.fingerprint()
            )
        }
        textures::TextureSource::Builtin => {
            println!("builtin (fingerprint {})", set.fingerprint())
        }
    }
    Ok(0)
}
