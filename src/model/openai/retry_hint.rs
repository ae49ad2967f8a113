//! Retry hints: how long an error answer asks us to wait, from whichever header says it.
//!
//! Read, in this order (ties go to the first):
//!
//! | header | value | sent by |
//! |---|---|---|
//! | `retry-after-ms` | milliseconds | OpenAI, Azure |
//! | `retry-after` | seconds (integer or decimal) or an HTTP date | RFC 9110, most servers |
//! | `llm_provider-retry-after` | as `retry-after` | LiteLLM (the upstream's `retry-after`, forwarded under its own name) |
//! | `x-ratelimit-reset-requests` | a duration such as `1s`, `6m0s`, `20ms` | OpenAI |
//! | `x-ratelimit-reset-tokens` | the same | OpenAI |
//!
//! The `x-ratelimit-reset-*` pair applies only to the limit that is spent: the requests reset
//! counts when `x-ratelimit-remaining-requests` is `0` or absent, the tokens reset likewise. The
//! largest applicable hint wins (a wait shorter than one of them would be refused again).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// Longest hint taken as given (anything longer is cut to this before `max_retry_wait`).
const MAX_HINT_S: f64 = 1e6;

/// A wait an error answer asked for, and the header that asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryHint {
    /// The header's name, lower case (as in the table above).
    pub header: &'static str,
    /// The wait it asks for (0 for a date in the past).
    pub wait: Duration,
}

/// The largest applicable retry hint in `headers` (`now` dates `retry-after` HTTP dates).
pub fn retry_hint(headers: &HeaderMap, now: SystemTime) -> Option<RetryHint> {
    let text = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    let spent = |limit: &str| {
        text(&format!("x-ratelimit-remaining-{limit}"))
            .is_none_or(|v| v.parse::<f64>().is_ok_and(|n| n <= 0.0))
    };
    let candidates = [
        (
            "retry-after-ms",
            text("retry-after-ms").and_then(|v| seconds(v).map(|ms| ms / 1000.0)),
        ),
        (
            "retry-after",
            text("retry-after").and_then(|v| seconds_or_date(v, now)),
        ),
        (
            "llm_provider-retry-after",
            text("llm_provider-retry-after").and_then(|v| seconds_or_date(v, now)),
        ),
        (
            "x-ratelimit-reset-requests",
            text("x-ratelimit-reset-requests")
                .filter(|_| spent("requests"))
                .and_then(go_duration),
        ),
        (
            "x-ratelimit-reset-tokens",
            text("x-ratelimit-reset-tokens")
                .filter(|_| spent("tokens"))
                .and_then(go_duration),
        ),
    ];
    let mut best: Option<RetryHint> = None;
    for (header, secs) in candidates {
        let Some(secs) = secs else { continue };
        let wait = Duration::from_secs_f64(secs.min(MAX_HINT_S));
        if best.is_none_or(|b| wait > b.wait) {
            best = Some(RetryHint { header, wait });
        }
    }
    best
}

/// A non-negative finite number of seconds.
fn seconds(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)
}

/// `Retry-After`: delay-seconds, or an HTTP date (IMF-fixdate, RFC 850 or asctime), which
/// gives the time left until then (0 when past).
fn seconds_or_date(v: &str, now: SystemTime) -> Option<f64> {
    seconds(v).or_else(|| {
        let at = httpdate::parse_http_date(v).ok()?;
        Some(
            at.duration_since(now)
                .map_or(0.0, |d| d.as_secs_f64().ceil()),
        )
    })
}

/// A Go-style duration as OpenAI sends it (`1s`, `6m0s`, `1h2m3.5s`, `20ms`, `250us`), or a
/// bare number of seconds.
pub fn go_duration(v: &str) -> Option<f64> {
    if let Some(s) = seconds(v) {
        return Some(s);
    }
    let mut rest = v;
    let mut total = 0.0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[u..];
        total += value * scale;
    }
    total.is_finite().then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use std::time::UNIX_EPOCH;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn hint(pairs: &[(&'static str, &str)]) -> Option<(&'static str, f64)> {
        // 2015-10-21 07:27:58 GMT, two seconds before the date used below.
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_478);
        retry_hint(&headers(pairs), now).map(|h| (h.header, h.wait.as_secs_f64()))
    }

    #[test]
    fn every_header_alone() {
        assert_eq!(hint(&[]), None);
        assert_eq!(hint(&[("retry-after", "2")]), Some(("retry-after", 2.0)));
        assert_eq!(
            hint(&[("retry-after", "0.25")]),
            Some(("retry-after", 0.25))
        );
        assert_eq!(
            hint(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
            Some(("retry-after", 2.0))
        );
        assert_eq!(
            hint(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]),
            Some(("retry-after", 0.0)),
            "a date in the past: no wait"
        );
        assert_eq!(
            hint(&[("retry-after-ms", "250")]),
            Some(("retry-after-ms", 0.25))
        );
        assert_eq!(
            hint(&[("llm_provider-retry-after", "1")]),
            Some(("llm_provider-retry-after", 1.0))
        );
        assert_eq!(
            hint(&[("x-ratelimit-reset-requests", "6m0s")]),
            Some(("x-ratelimit-reset-requests", 360.0))
        );
        assert_eq!(
            hint(&[("x-ratelimit-reset-tokens", "20ms")]),
            Some(("x-ratelimit-reset-tokens", 0.02))
        );
        for bad in ["soon", "-1", "NaN", "inf", ""] {
            assert_eq!(hint(&[("retry-after", bad)]), None, "{bad}");
        }
        assert_eq!(hint(&[("x-ratelimit-reset-requests", "5 minutes")]), None);
    }

    #[test]
    fn the_largest_applicable_hint_wins() {
        assert_eq!(
            hint(&[("retry-after", "1"), ("retry-after-ms", "1500")]),
            Some(("retry-after-ms", 1.5))
        );
        assert_eq!(
            hint(&[("retry-after-ms", "1000"), ("retry-after", "1")]),
            Some(("retry-after-ms", 1.0)),
            "ties go to the first in the table"
        );
        assert_eq!(
            hint(&[("llm_provider-retry-after", "3"), ("retry-after", "1")]),
            Some(("llm_provider-retry-after", 3.0))
        );
        // The token limit is spent, the request limit is not: only the tokens reset applies.
        let openai = [
            ("x-ratelimit-remaining-requests", "499"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "1.5s"),
        ];
        assert_eq!(hint(&openai), Some(("x-ratelimit-reset-tokens", 1.5)));
        let mut both = openai;
        both[0].1 = "0";
        assert_eq!(hint(&both), Some(("x-ratelimit-reset-requests", 360.0)));
        let mut neither = openai;
        neither[2].1 = "12";
        assert_eq!(hint(&neither), None);
        assert_eq!(
            hint(&[("retry-after", "2"), ("x-ratelimit-reset-tokens", "1s")]),
            Some(("retry-after", 2.0))
        );
    }

    #[test]
    fn go_durations() {
        for (text, secs) in [
            ("1s", 1.0),
            ("6m0s", 360.0),
            ("1h2m3.5s", 3723.5),
            ("20ms", 0.02),
            ("250us", 0.00025),
            ("250µs", 0.00025),
            ("7ns", 7e-9),
            ("0.5", 0.5),
            ("3", 3.0),
        ] {
            let got = go_duration(text).unwrap();
            assert!((got - secs).abs() < 1e-12, "{text}: {got}");
        }
        for bad in ["", "s", "1x", "1.2.3s", "m5", "-1s", "1 s"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
    }
}
