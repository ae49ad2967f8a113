//! Prices as data: the table built into the binary (`data/prices.toml`), tables read from a
//! `--prices FILE` in the same format that override or extend it, and what one request's
//! usage costs at a price (uncached, cached and cache-written input apart; the billed output
//! of [`Usage::billed_output`]; the tier above a prompt size where a provider has one).

use serde::{Deserialize, Serialize};

use super::Usage;

/// The built-in table's text.
pub const BUILTIN: &str = include_str!("../../data/prices.toml");

/// Highest price accepted, USD per 1M tokens (`--price-in` and the like use the same bound).
pub const MAX_PRICE: f64 = 1_000_000.0;

/// The rates of one tier, USD per 1M tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Prompt tokens read from the cache.
    pub cached_input: f64,
    /// Prompt tokens written to the cache (None: billed as input).
    pub cache_write: Option<f64>,
    /// Output tokens (reasoning included).
    pub output: f64,
}

/// One model's price.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Price {
    /// The model's API name.
    pub model: String,
    /// Rates of a request whose prompt is at most `above`'s threshold (or any request).
    pub rates: Rates,
    /// A dearer tier: requests whose prompt tokens exceed the count.
    pub above: Option<(u64, Rates)>,
    /// When the figures were read (YYYY-MM-DD).
    pub read: String,
    /// Where they were read.
    pub source: String,
    /// What could not be confirmed, if anything.
    pub note: Option<String>,
}

/// One `[[price]]` row as written in the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    model: String,
    input: f64,
    cached_input: f64,
    #[serde(default)]
    cache_write: Option<f64>,
    output: f64,
    #[serde(default)]
    above_prompt_tokens: Option<u64>,
    #[serde(default)]
    above_input: Option<f64>,
    #[serde(default)]
    above_cached_input: Option<f64>,
    #[serde(default)]
    above_output: Option<f64>,
    read: String,
    source: String,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    price: Vec<Row>,
}

/// A price table: rows in file order, later files' rows replacing earlier ones of the same
/// model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceTable {
    /// The rows.
    pub rows: Vec<Price>,
}

/// Whether a price is a finite number in 0..=MAX_PRICE.
pub fn price_ok(p: f64) -> bool {
    p.is_finite() && (0.0..=MAX_PRICE).contains(&p)
}

fn check_row(r: Row) -> Result<Price, String> {
    let at = format!("model {:?}", r.model);
    if r.model.trim().is_empty() {
        return Err("a row has an empty model name".into());
    }
    let named = [
        ("input", Some(r.input)),
        ("cached_input", Some(r.cached_input)),
        ("cache_write", r.cache_write),
        ("output", Some(r.output)),
        ("above_input", r.above_input),
        ("above_cached_input", r.above_cached_input),
        ("above_output", r.above_output),
    ];
    for (col, v) in named {
        if let Some(p) = v.filter(|p| !price_ok(*p)) {
            return Err(format!(
                "{at}: {col} {p} is out of range (0 to {MAX_PRICE} USD per 1M tokens)"
            ));
        }
    }
    let tier = (
        r.above_prompt_tokens,
        r.above_input,
        r.above_cached_input,
        r.above_output,
    );
    let above = match tier {
        (None, None, None, None) => None,
        (Some(n), Some(i), Some(c), Some(o)) => Some((
            n,
            Rates {
                input: i,
                cached_input: c,
                cache_write: r.cache_write,
                output: o,
            },
        )),
        _ => {
            return Err(format!(
                "{at}: give all of above_prompt_tokens, above_input, above_cached_input and above_output, or none"
            ))
        }
    };
    if r.read.trim().is_empty() || r.source.trim().is_empty() {
        return Err(format!("{at}: read and source must not be empty"));
    }
    Ok(Price {
        model: r.model.trim().to_string(),
        rates: Rates {
            input: r.input,
            cached_input: r.cached_input,
            cache_write: r.cache_write,
            output: r.output,
        },
        above,
        read: r.read,
        source: r.source,
        note: r.note,
    })
}

impl PriceTable {
    /// Parse a table (the built-in one's format). The error is one line.
    pub fn parse(text: &str) -> Result<PriceTable, String> {
        let file: File = toml::from_str(text).map_err(|e| e.message().replace('\n', " "))?;
        let rows = file
            .price
            .into_iter()
            .map(check_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PriceTable { rows })
    }

    /// The table built into the binary.
    pub fn builtin() -> PriceTable {
        PriceTable::parse(BUILTIN).expect("data/prices.toml parses (checked by a unit test)")
    }

    /// The built-in table with a `--prices FILE`'s rows over it (when given). The error is
    /// one line naming the file and the fix.
    pub fn with_file(path: Option<&std::path::Path>) -> Result<PriceTable, String> {
        let table = PriceTable::builtin();
        let Some(path) = path else {
            return Ok(table);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --prices {}: {e}", path.display()))?;
        let extra = PriceTable::parse(&text).map_err(|e| {
            format!(
                "--prices {}: {e} (write it in the built-in table's format: `vlm-eval prices --toml` prints it)",
                path.display()
            )
        })?;
        Ok(table.extended(extra))
    }

    /// This table with `other`'s rows replacing same-named ones and added after.
    pub fn extended(mut self, other: PriceTable) -> PriceTable {
        for row in other.rows {
            match self.rows.iter_mut().find(|r| r.model == row.model) {
                Some(r) => *r = row,
                None => self.rows.push(row),
            }
        }
        self
    }

    /// The price of a model: its own row, or that of the name without a provider prefix
    /// (`openai/gpt-4o`) or a dated snapshot suffix (`gpt-4o-2024-08-06`,
    /// `claude-sonnet-4-20250514`).
    pub fn find(&self, model: &str) -> Option<&Price> {
        let m = model.trim();
        let bare = m.rsplit('/').next().unwrap_or(m);
        self.rows.iter().rev().find(|r| {
            r.model == m
                || r.model == bare
                || bare
                    .strip_prefix(r.model.as_str())
                    .is_some_and(|rest| rest.starts_with("-20") && is_date_suffix(&rest[1..]))
        })
    }
}

/// `2024-08-06` or `20250514`: digits and dashes only.
fn is_date_suffix(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '-')
}

impl Price {
    /// A price from the flags alone (`--price-in`, `--price-cached-in`, `--price-out`).
    pub fn flat(model: &str, input: f64, cached_input: f64, output: f64) -> Price {
        Price {
            model: model.to_string(),
            rates: Rates {
                input,
                cached_input,
                cache_write: None,
                output,
            },
            above: None,
            read: String::new(),
            source: "flags".into(),
            note: None,
        }
    }

    /// Free (in-process models).
    pub fn free(model: &str) -> Price {
        Price::flat(model, 0.0, 0.0, 0.0)
    }

    /// The rates that apply to a request of `prompt_tokens`.
    pub fn rates_for(&self, prompt_tokens: u64) -> &Rates {
        match &self.above {
            Some((n, rates)) if prompt_tokens > *n => rates,
            _ => &self.rates,
        }
    }

    /// USD for one request's usage (never negative).
    pub fn cost(&self, u: &Usage) -> f64 {
        let (uncached, cached, written) = u.input_split();
        let r = self.rates_for(u.input_tokens.unwrap_or(0));
        let usd = (uncached as f64 * r.input
            + cached as f64 * r.cached_input
            + written as f64 * r.cache_write.unwrap_or(r.input)
            + u.billed_output() as f64 * r.output)
            / 1e6;
        usd.max(0.0)
    }

    /// The run record's view: rates, tier, date and source.
    pub fn record(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "model": self.model,
            "input": self.rates.input,
            "cached_input": self.rates.cached_input,
            "output": self.rates.output,
            "source": self.source,
        });
        if let Some(w) = self.rates.cache_write {
            v["cache_write"] = w.into();
        }
        if let Some((n, r)) = &self.above {
            v["above"] = serde_json::json!({"prompt_tokens": n, "input": r.input,
                "cached_input": r.cached_input, "output": r.output});
        }
        if !self.read.is_empty() {
            v["read"] = self.read.clone().into();
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, cached: u64, out: u64) -> Usage {
        Usage {
            input_tokens: Some(prompt),
            output_tokens: Some(out),
            cached_input_tokens: Some(cached),
            ..Usage::default()
        }
    }

    #[test]
    fn the_builtin_table_parses_and_holds_the_asked_rows() {
        let t = PriceTable::builtin();
        for m in [
            "gpt-4o-mini",
            "gpt-4o",
            "gpt-4.1",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
            "o3",
            "o4-mini",
            "claude-sonnet-4",
            "claude-sonnet-4-5",
            "claude-sonnet-4-6",
            "claude-haiku-4-5",
            "claude-opus-4",
            "claude-opus-4-1",
            "claude-opus-4-5",
            "claude-opus-4-6",
            "gemini-2.5-flash",
            "gemini-2.5-pro",
        ] {
            let p = t.find(m).unwrap_or_else(|| panic!("{m}"));
            assert_eq!(p.model, m);
            assert!(p.source.starts_with("https://"), "{m}");
            assert_eq!(p.read.len(), 10, "{m}");
        }
        // Claude's compatible endpoint reports no cached tokens: all input at the input rate.
        for r in t.rows.iter().filter(|r| r.model.starts_with("claude")) {
            assert_eq!(r.rates.cached_input, r.rates.input, "{}", r.model);
        }
        assert!(t.find("gemini-2.5-pro").unwrap().above.is_some());
    }

    #[test]
    fn names_match_snapshots_and_prefixes_but_not_siblings() {
        let t = PriceTable::builtin();
        assert_eq!(t.find("gpt-4o-2024-08-06").unwrap().model, "gpt-4o");
        assert_eq!(t.find("openai/gpt-4o-mini").unwrap().model, "gpt-4o-mini");
        assert_eq!(
            t.find("claude-sonnet-4-20250514").unwrap().model,
            "claude-sonnet-4"
        );
        assert_eq!(
            t.find("claude-sonnet-4-5-20250929").unwrap().model,
            "claude-sonnet-4-5"
        );
        assert_eq!(t.find("gpt-4o-mini").unwrap().model, "gpt-4o-mini");
        assert!(t.find("gpt-4o-audio-preview").is_none());
        assert!(t.find("claude-sonnet-4-7").is_none());
        assert!(t.find("llama-3").is_none());
    }

    #[test]
    fn cost_prices_cached_input_and_tiers() {
        let t = PriceTable::builtin();
        let mini = t.find("gpt-4o-mini").unwrap();
        // 2006 prompt (1920 cached), 300 out: 86×0.15 + 1920×0.075 + 300×0.60 µUSD.
        let c = mini.cost(&usage(2006, 1920, 300));
        assert!((c - (86.0 * 0.15 + 1920.0 * 0.075 + 300.0 * 0.60) / 1e6).abs() < 1e-15);
        let pro = t.find("gemini-2.5-pro").unwrap();
        let low = pro.cost(&usage(200_000, 0, 0));
        let high = pro.cost(&usage(200_001, 0, 0));
        assert!((low - 0.25).abs() < 1e-12 && (high - 200_001.0 * 2.5 / 1e6).abs() < 1e-12);
        // Cached above prompt never bills more than the prompt, never negative.
        assert!(mini.cost(&usage(10, 50, 0)) <= 10.0 * 0.15 / 1e6);
        assert!(mini.cost(&Usage::default()) == 0.0);
    }

    #[test]
    fn bad_tables_are_one_line_errors() {
        let row = |extra: &str| {
            format!("[[price]]\nmodel = \"x\"\ninput = 1\ncached_input = 0.5\noutput = 2\nread = \"2026-01-01\"\nsource = \"s\"\n{extra}")
        };
        assert!(PriceTable::parse(&row("")).is_ok());
        for bad in [
            "[[price]]\nmodel = \"x\"\ninput = 1\noutput = 2\nread = \"d\"\nsource = \"s\"\n".to_string(),
            row("above_input = 2"),
            row("colour = 3"),
            "[[price]]\nmodel = \"x\"\ninput = -1\ncached_input = 0\noutput = 2\nread = \"d\"\nsource = \"s\"\n".into(),
            "[[price]]\nmodel = \"x\"\ninput = nan\ncached_input = 0\noutput = 2\nread = \"d\"\nsource = \"s\"\n".into(),
            "[[price]]\nmodel = \"x\"\ninput = 1e9\ncached_input = 0\noutput = 2\nread = \"d\"\nsource = \"s\"\n".into(),
            "not toml [".into(),
        ] {
            let e = PriceTable::parse(&bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        let over = PriceTable::builtin().extended(PriceTable::parse(&row("")).unwrap());
        assert!(over.find("x").is_some());
    }
}
