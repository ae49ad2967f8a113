//! Safetensors checkpoints over memory maps: one `model.safetensors` or shards listed in
//! `model.safetensors.index.json`; tensor-name prefix aliases; F32/BF16/F16 → f32.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use safetensors::tensor::{Dtype, Metadata};
use safetensors::SafeTensors;

use super::LocalError;

/// One memory-mapped safetensors file with its parsed header.
struct MappedFile {
    path: PathBuf,
    map: Mmap,
    data_start: usize,
    meta: Metadata,
}

/// A tensor's raw bytes and description.
pub struct RawTensor<'a> {
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Little-endian data.
    pub data: &'a [u8],
    /// The file it came from.
    pub file: &'a Path,
}

/// All tensors of a checkpoint (or a reference file), memory-mapped.
pub struct Weights {
    files: Vec<MappedFile>,
    /// Tensor name → file index.
    index: HashMap<String, usize>,
}

/// Alternative spellings of a canonical name (transformers-5 and other exporters).
fn aliases(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    if let Some(rest) = name.strip_prefix("model.") {
        out.push(format!("model.language_model.{rest}"));
    }
    if let Some(rest) = name.strip_prefix("visual.") {
        out.push(format!("model.visual.{rest}"));
        out.push(format!("vision_tower.{rest}"));
    }
    if name == "lm_head.weight" {
        out.push("model.lm_head.weight".into());
    }
    out
}

fn map_file(path: &Path) -> Result<MappedFile, LocalError> {
    let err = |msg: String| LocalError::File {
        file: path.to_path_buf(),
        msg,
    };
    let file = File::open(path).map_err(|e| err(e.to_string()))?;
    // SAFETY: the checkpoint is opened read-only; we assume nobody rewrites it while we run.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| err(e.to_string()))?;
    let (n, meta) = SafeTensors::read_metadata(&map[..])
        .map_err(|e| err(format!("not a safetensors file: {e}")))?;
    Ok(MappedFile {
        path: path.to_path_buf(),
        map,
        data_start: 8 + n,
        meta,
    })
}

impl Weights {
    /// Open `DIR/model.safetensors`, or the shards named by `DIR/model.safetensors.index.json`.
    pub fn open_dir(dir: &Path) -> Result<Weights, LocalError> {
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        if single.exists() {
            return Weights::open_files(&[single]);
        }
        if !index.exists() {
            return Err(LocalError::File {
                file: single,
                msg: "missing (and no model.safetensors.index.json for a sharded checkpoint)"
                    .into(),
            });
        }
        let v = super::config::read_json(&index)?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| LocalError::Field {
                file: index.clone(),
                field: "weight_map".into(),
                msg: "is missing or not an object".into(),
            })?;
        let mut shards: Vec<String> = Vec::new();
        for (name, f) in map {
            let f = f.as_str().ok_or_else(|| LocalError::Field {
                file: index.clone(),
                field: format!("weight_map.{name}"),
                msg: "must be a file name".into(),
            })?;
            if !shards.iter().any(|s| s == f) {
                shards.push(f.to_string());
            }
        }
        let paths: Vec<PathBuf> = shards.iter().map(|s| dir.join(s)).collect();
        let w = Weights::open_files(&paths)?;
        for (name, f) in map {
            let want = dir.join(f.as_str().unwrap_or_default());
            match w.index.get(name) {
                Some(&i) if w.files[i].path == want => {}
                _ => {
                    return Err(LocalError::Field {
                        file: index,
                        field: format!("weight_map.{name}"),
                        msg: format!("tensor not found in {}", want.display()),
                    })
                }
            }
        }
        Ok(w)
    }

    /// Open the given safetensors files.
    pub fn open_files(paths: &[PathBuf]) -> Result<Weights, LocalError> {
        let mut files = Vec::new();
        let mut index = HashMap::new();
        for p in paths {
            let f = map_file(p)?;
            for name in f.meta.tensors().keys() {
                index.insert(name.clone(), files.len());
            }
            files.push(f);
        }
        Ok(Weights { files, index })
    }

    /// Whether a tensor exists (under any alias).
    pub fn has(&self, name: &str) -> bool {
        aliases(name).iter().any(|n| self.index.contains_key(n))
    }

    /// Total bytes of tensor data.
    pub fn total_bytes(&self) -> usize {
        self.files.iter().map(|f| f.map.len() - f.data_start).sum()
    }

    /// The raw tensor under a canonical name (or an alias).
    pub fn raw(&self, name: &str) -> Result<RawTensor<'_>, LocalError> {
        for n in aliases(name) {
            let Some(&fi) = self.index.get(&n) else {
                continue;
            };
            let f = &self.files[fi];
            let info = f.meta.info(&n).ok_or_else(|| LocalError::Tensor {
                file: f.path.clone(),
                name: n.clone(),
                msg: "listed but has no header entry".into(),
            })?;
            let (a, b) = info.data_offsets;
            let data = f
                .map
                .get(f.data_start + a..f.data_start + b)
                .ok_or_else(|| LocalError::Tensor {
                    file: f.path.clone(),
                    name: n.clone(),
                    msg: "data lies outside the file (truncated download?)".into(),
                })?;
            return Ok(RawTensor {
                dtype: info.dtype,
                shape: info.shape.clone(),
                data,
                file: &f.path,
            });
        }
        let file = self
            .files
            .first()
            .map(|f| f.path.clone())
            .unwrap_or_default();
        Err(LocalError::Tensor {
            file,
            name: name.to_string(),
            msg: "is missing".into(),
        })
    }

    /// A float tensor as f32, checked against the expected shape.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, LocalError> {
        let t = self.raw(name)?;
        let bad = |msg: String| LocalError::Tensor {
            file: t.file.to_path_buf(),
            name: name.to_string(),
            msg,
        };
        if t.shape.iter().product::<usize>() != shape.iter().product::<usize>()
            || (t.shape.len() == shape.len() && t.shape != shape)
        {
            return Err(bad(format!(
                "has shape {:?}, config implies {shape:?}",
                t.shape
            )));
        }
        let d = t.data;
        Ok(match t.dtype {
            Dtype::F32 => d
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::BF16 => d
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::F16 => d
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(bad(format!(
                    "has dtype {other:?}; expected F32, BF16 or F16"
                )))
            }
        })
    }

    /// A tensor of any float type as f32, whatever its shape (tests, references).
    pub fn f32_any(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>), LocalError> {
        let shape = self.raw(name)?.shape;
        Ok((shape.clone(), self.f32(name, &shape)?))
    }

    /// An integer tensor (I64 or I32) as i64 with its shape (tests, references).
    pub fn i64_any(&self, name: &str) -> Result<(Vec<usize>, Vec<i64>), LocalError> {
        let t = self.raw(name)?;
        let v = match t.dtype {
            Dtype::I64 => t
                .data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect(),
            Dtype::I32 => t
                .data
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)
                .collect(),
            other => {
                return Err(LocalError::Tensor {
                    file: t.file.to_path_buf(),
                    name: name.into(),
                    msg: format!("has dtype {other:?}; expected I64 or I32"),
                })
            }
        };
        Ok((t.shape, v))
    }
}
