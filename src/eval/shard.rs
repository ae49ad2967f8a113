//! `--shard i/n`: one contiguous slice of a run's seed list, so that n machines (a Kubernetes
//! Indexed Job, a Slurm array) can play one run between them and `vlm-eval merge` can join it.
//! `--shard auto` (or `auto/N`) takes the index, and the count when it can, from the
//! scheduler's environment ([`Shard::resolve`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Shard `index` of `count` (0-based: `0/4` … `3/4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Shard {
    /// Which slice, 0-based.
    pub index: usize,
    /// How many slices.
    pub count: usize,
    /// Where index and count came from (`auto` until [`Shard::resolve`] reads them).
    pub origin: ShardOrigin,
}

/// Where a shard's index and count came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardOrigin {
    /// Written out as `i/n`.
    Given,
    /// `auto` or `auto/N`: not yet read from the environment.
    Auto {
        /// N of `auto/N`.
        count: Option<usize>,
    },
    /// Read from the scheduler's environment: the variable (or flag) each came from.
    Env {
        /// The index's variable (`SLURM_ARRAY_TASK_ID`, `JOB_COMPLETION_INDEX`).
        index: &'static str,
        /// The count's source (`--shard auto/N`, `VLM_EVAL_SHARD_COUNT`, `SLURM_ARRAY_TASK_COUNT`).
        count: &'static str,
    },
}

/// The variable that gives `--shard auto` the shard count (the original count when a subset
/// of a Slurm array is resubmitted; the Job's `completions` on Kubernetes).
pub const SHARD_COUNT_VAR: &str = "VLM_EVAL_SHARD_COUNT";
const SLURM_ID: &str = "SLURM_ARRAY_TASK_ID";
const SLURM_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
const K8S_INDEX: &str = "JOB_COMPLETION_INDEX";

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.origin {
            ShardOrigin::Auto { count: None } => write!(f, "auto"),
            ShardOrigin::Auto { count: Some(n) } => write!(f, "auto/{n}"),
            _ => write!(f, "{}/{}", self.index, self.count),
        }
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "shard '{s}' is not i/n with 0 <= i < n (e.g. 0/4 for the first of four shards), nor auto or auto/n (from the scheduler's environment)"
            )
        };
        let text = s.trim();
        if text == "auto" {
            return Ok(Shard::auto(None));
        }
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if i.trim() == "auto" && count > 0 {
            return Ok(Shard::auto(Some(count)));
        }
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard::new(index, count))
    }
}

impl TryFrom<String> for Shard {
    type Error = String;

    fn try_from(s: String) -> Result<Shard, String> {
        s.parse()
    }
}

impl From<Shard> for String {
    fn from(s: Shard) -> String {
        s.to_string()
    }
}

impl Shard {
    /// Shard `index` of `count`, as if written `i/n`.
    pub fn new(index: usize, count: usize) -> Shard {
        Shard {
            index,
            count,
            origin: ShardOrigin::Given,
        }
    }

    fn auto(count: Option<usize>) -> Shard {
        Shard {
            index: 0,
            count: count.unwrap_or(0),
            origin: ShardOrigin::Auto { count },
        }
    }

    /// [`Shard::resolve`] with the process environment.
    pub fn resolve_env(self) -> Result<Shard, String> {
        self.resolve(|k| std::env::var(k).ok())
    }

    /// Fill in `auto` from the scheduler's environment (`lookup` reads a variable); any other
    /// shard is returned as it is. The index is `SLURM_ARRAY_TASK_ID` (a Slurm array task) or
    /// else `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job). The count is N of `auto/N`, else
    /// `VLM_EVAL_SHARD_COUNT`, else, in a Slurm array that runs exactly tasks 0..count-1,
    /// `SLURM_ARRAY_TASK_COUNT`: a resubmitted subset (`--array=2`) counts only its own tasks,
    /// so there the original count must be given. Errors are one line saying what to set.
    pub fn resolve(self, lookup: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let ShardOrigin::Auto { count: spec } = self.origin else {
            return Ok(self);
        };
        let num = |name: &str| -> Result<Option<usize>, String> {
            match lookup(name).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    format!("--shard {self}: {name}={v:?} is not a whole number >= 0")
                }),
            }
        };
        let (index, index_var) = match (num(SLURM_ID)?, num(K8S_INDEX)?) {
            (Some(i), _) => (i, SLURM_ID),
            (None, Some(i)) => (i, K8S_INDEX),
            (None, None) => {
                return Err(format!(
                    "--shard {self}: neither {SLURM_ID} (a Slurm job array) nor {K8S_INDEX} (a Kubernetes Indexed Job) is set; outside a scheduler give the shard as i/n, e.g. --shard 0/4"
                ))
            }
        };
        let (count, count_from) = match (spec, num(SHARD_COUNT_VAR)?) {
            (Some(n), Some(m)) if n != m => {
                return Err(format!(
                    "--shard auto/{n} disagrees with {SHARD_COUNT_VAR}={m}; give the shard count once"
                ))
            }
            (Some(n), _) => (n, "--shard auto/N"),
            (None, Some(m)) => (m, SHARD_COUNT_VAR),
            (None, None) if index_var == SLURM_ID => {
                let count = num(SLURM_COUNT)?.unwrap_or(0);
                let (min, max) = (num("SLURM_ARRAY_TASK_MIN")?, num("SLURM_ARRAY_TASK_MAX")?);
                if count == 0 || min != Some(0) || max != Some(count - 1) {
                    let span = match (min, max) {
                        (Some(a), Some(b)) => format!("tasks {a}-{b}"),
                        _ => "tasks of unknown range".into(),
                    };
                    return Err(format!(
                        "--shard auto: this Slurm array runs {span} ({SLURM_COUNT}={count}), not 0-{}, so its task count is not the shard count (a resubmitted subset?); give the original count: --shard auto/N or {SHARD_COUNT_VAR}=N",
                        count.saturating_sub(1)
                    ));
                }
                (count, SLURM_COUNT)
            }
            (None, None) => {
                return Err(format!(
                    "--shard auto: {index_var}={index} is set but the shard count is not; pass --shard auto/N (N = the Job's completions) or set {SHARD_COUNT_VAR}=N"
                ))
            }
        };
        if count == 0 || index >= count {
            return Err(format!(
                "--shard {self}: {index_var}={index} is out of range for {count} shard(s) (the count from {count_from}); indexes run 0..{}",
                count.saturating_sub(1)
            ));
        }
        Ok(Shard {
            index,
            count,
            origin: ShardOrigin::Env {
                index: index_var,
                count: count_from,
            },
        })
    }

    /// What run.json records as `shard_from`: where the index and the count came from.
    pub fn origin_record(&self) -> serde_json::Value {
        let (index, count) = match self.origin {
            ShardOrigin::Env { index, count } => (index, count),
            ShardOrigin::Given => ("--shard i/n", "--shard i/n"),
            ShardOrigin::Auto { .. } => ("unresolved", "unresolved"),
        };
        serde_json::json!({"index": index, "count": count})
    }

    /// The seeds of this shard: a contiguous slice of `seeds`, sized like `numpy.array_split`
    /// (the first `len % count` shards hold one seed more than the rest).
    pub fn slice<'a>(&self, seeds: &'a [i64]) -> &'a [i64] {
        if self.count == 0 {
            return &[];
        }
        let (q, r) = (seeds.len() / self.count, seeds.len() % self.count);
        let start = self.index * q + self.index.min(r);
        let len = q + usize::from(self.index < r);
        &seeds[start..start + len]
    }

    /// This shard's seeds as a list; an empty shard is an error saying how many shards fit.
    pub fn seeds_of(&self, seeds: &[i64]) -> Result<Vec<i64>, String> {
        if let ShardOrigin::Auto { .. } = self.origin {
            return Err(format!("--shard {self} was not read from the environment"));
        }
        let slice = self.slice(seeds);
        if slice.is_empty() {
            return Err(format!(
                "--shard {self} has no seeds: {} seed(s) split {} ways leave none for shard {}; use at most {} shards",
                seeds.len(),
                self.count,
                self.index,
                seeds.len()
            ));
        }
        Ok(slice.to_vec())
    }

    /// The suffix added to a default run name: `_shard0of4`.
    pub fn name_suffix(&self) -> String {
        format!("_shard{}of{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("1/4".parse::<Shard>().unwrap(), Shard::new(1, 4));
        assert_eq!(" 0 / 1 ".parse::<Shard>().unwrap(), Shard::new(0, 1));
        for bad in ["4/4", "1/0", "-1/3", "1", "a/b", "1/2/3", ""] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("i/n"), "{bad}: {e}");
        }
    }

    #[test]
    fn slices_cover_the_list_once_in_order() {
        for len in 0..30usize {
            let seeds: Vec<i64> = (0..len as i64).map(|s| 100 + 3 * s).collect();
            for count in 1..8 {
                let parts: Vec<&[i64]> = (0..count)
                    .map(|index| Shard::new(index, count).slice(&seeds))
                    .collect();
                let joined: Vec<i64> = parts.iter().flat_map(|p| p.iter().copied()).collect();
                assert_eq!(joined, seeds, "len {len} count {count}");
                let sizes: Vec<usize> = parts.iter().map(|p| p.len()).collect();
                let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(max - min <= 1, "{sizes:?}");
                // Larger shards come first (numpy.array_split).
                assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
            }
        }
        // Hand-computed: 10 seeds in 4 shards → 3, 3, 2, 2.
        let seeds: Vec<i64> = (0..10).collect();
        assert_eq!(Shard::new(0, 4).slice(&seeds), &[0, 1, 2]);
        assert_eq!(Shard::new(1, 4).slice(&seeds), &[3, 4, 5]);
        assert_eq!(Shard::new(2, 4).slice(&seeds), &[6, 7]);
        assert_eq!(Shard::new(3, 4).slice(&seeds), &[8, 9]);
    }

    #[test]
    fn round_trips_through_toml_and_json() {
        #[derive(Deserialize)]
        struct C {
            shard: Shard,
        }
        let c: C = toml::from_str("shard = \"2/3\"").unwrap();
        assert_eq!(c.shard, Shard::new(2, 3));
        assert!(toml::from_str::<C>("shard = \"3/3\"").is_err());
        assert_eq!(serde_json::to_value(Shard::new(2, 3)).unwrap(), "2/3");
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn auto(spec: &str, vars: &[(&str, &str)]) -> Result<Shard, String> {
        spec.parse::<Shard>()?.resolve(env(vars))
    }

    #[test]
    fn auto_reads_slurm_and_kubernetes() {
        let full = [
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "3"),
        ];
        let s = auto("auto", &full).unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        assert_eq!(
            s.origin_record(),
            serde_json::json!({"index": "SLURM_ARRAY_TASK_ID", "count": "SLURM_ARRAY_TASK_COUNT"})
        );
        assert_eq!(s.to_string(), "2/4");
        // A resubmitted subset (--array=2): the task count (1) is not the shard count.
        let subset = [
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "1"),
            ("SLURM_ARRAY_TASK_MIN", "2"),
            ("SLURM_ARRAY_TASK_MAX", "2"),
        ];
        let e = auto("auto", &subset).unwrap_err();
        assert!(
            e.contains("tasks 2-2") && e.contains("VLM_EVAL_SHARD_COUNT"),
            "{e}"
        );
        let s = auto("auto/4", &subset).unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        let mut with_count = subset.to_vec();
        with_count.push(("VLM_EVAL_SHARD_COUNT", "4"));
        let s = auto("auto", &with_count).unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        assert_eq!(s.origin_record()["count"], "VLM_EVAL_SHARD_COUNT");
        let e = auto("auto/5", &with_count).unwrap_err();
        assert!(e.contains("disagrees"), "{e}");
        // Kubernetes: the index from JOB_COMPLETION_INDEX, the count passed in.
        let k8s = [("JOB_COMPLETION_INDEX", "7")];
        let s = auto("auto/8", &k8s).unwrap();
        assert_eq!((s.index, s.count), (7, 8));
        assert_eq!(s.origin_record()["index"], "JOB_COMPLETION_INDEX");
        let e = auto("auto", &k8s).unwrap_err();
        assert!(e.contains("count is not"), "{e}");
        // Out of range, garbage, and no scheduler at all: one line each.
        let e = auto("auto/4", &[("JOB_COMPLETION_INDEX", "4")]).unwrap_err();
        assert!(e.contains("out of range") && e.contains("0..3"), "{e}");
        let e = auto("auto/4", &[("SLURM_ARRAY_TASK_ID", "x")]).unwrap_err();
        assert!(e.contains("SLURM_ARRAY_TASK_ID=\"x\""), "{e}");
        let e = auto("auto", &[]).unwrap_err();
        assert!(
            e.contains("neither") && e.contains("--shard 0/4") && !e.contains('\n'),
            "{e}"
        );
        // A shard written out ignores the environment.
        let s = auto("1/3", &full).unwrap();
        assert_eq!(s, Shard::new(1, 3));
        assert!("auto/0".parse::<Shard>().is_err());
        assert!("auto".parse::<Shard>().unwrap().seeds_of(&[1, 2]).is_err());
    }
}
