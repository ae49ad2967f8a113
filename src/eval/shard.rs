//! `--shard i/n`: one contiguous slice of a run's seed list, so that n machines (a Kubernetes
//! Indexed Job, a Slurm array) can play one run between them and `vlm-eval merge` can join it.

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
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "shard '{s}' is not i/n with 0 <= i < n (e.g. 0/4 for the first of four shards)"
            )
        };
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
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
    /// The seeds of this shard: a contiguous slice of `seeds`, sized like `numpy.array_split`
    /// (the first `len % count` shards hold one seed more than the rest).
    pub fn slice<'a>(&self, seeds: &'a [i64]) -> &'a [i64] {
        let (q, r) = (seeds.len() / self.count, seeds.len() % self.count);
        let start = self.index * q + self.index.min(r);
        let len = q + usize::from(self.index < r);
        &seeds[start..start + len]
    }

    /// This shard's seeds as a list; an empty shard is an error saying how many shards fit.
    pub fn seeds_of(&self, seeds: &[i64]) -> Result<Vec<i64>, String> {
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
        assert_eq!(
            "1/4".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 4 }
        );
        assert_eq!(
            " 0 / 1 ".parse::<Shard>().unwrap(),
            Shard { index: 0, count: 1 }
        );
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
                    .map(|index| Shard { index, count }.slice(&seeds))
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
        assert_eq!(Shard { index: 0, count: 4 }.slice(&seeds), &[0, 1, 2]);
        assert_eq!(Shard { index: 1, count: 4 }.slice(&seeds), &[3, 4, 5]);
        assert_eq!(Shard { index: 2, count: 4 }.slice(&seeds), &[6, 7]);
        assert_eq!(Shard { index: 3, count: 4 }.slice(&seeds), &[8, 9]);
    }

    #[test]
    fn round_trips_through_toml_and_json() {
        #[derive(Deserialize)]
        struct C {
            shard: Shard,
        }
        let c: C = toml::from_str("shard = \"2/3\"").unwrap();
        assert_eq!(c.shard, Shard { index: 2, count: 3 });
        assert!(toml::from_str::<C>("shard = \"3/3\"").is_err());
        assert_eq!(
            serde_json::to_value(Shard { index: 2, count: 3 }).unwrap(),
            "2/3"
        );
    }
}
