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
//! | `anthropic-ratelimit-requests-reset`, `-tokens-reset`, `-input-tokens-reset`, `-output-tokens-reset` | an RFC 3339 time | Anthropic ([rate limits](https://docs.claude.com/en/api/rate-limits)) |
//!
//! The `x-ratelimit-reset-*` pair applies only to the limit that is spent: the requests reset
//! counts when `x-ratelimit-remaining-requests` is `0` or absent, the tokens reset likewise.
//! Anthropic's resets follow the same rule (`anthropic-ratelimit-<limit>-remaining`), and count
//! only when `retry-after` is absent (Anthropic sends it on a 429; the resets say when the
//! whole limit is replenished, later than needed). The largest applicable hint wins (a wait
//! shorter than one of them would be refused again).
//!
//! The error body can hold a hint too ([`body_retry_hint`]): Gemini's
//! `error.details[].retryDelay` (`google.rpc.RetryInfo`, e.g. `"47s"`) and "Please retry in
//! 55.5s." in its message. They join the headers' hints, the largest winning.

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
    let anthropic_spent = |limit: &str| {
        text(&format!("anthropic-ratelimit-{limit}-remaining"))
            .is_none_or(|v| v.parse::<f64>().is_ok_and(|n| n <= 0.0))
    };
    let anthropic = |name: &'static str, limit: &str| {
        (
            name,
            text(name)
                .filter(|_| text("retry-after").is_none() && anthropic_spent(limit))
                .and_then(|v| rfc3339_seconds_from(v, now)),
        )
    };
    let candidates = candidates.into_iter().chain([
        anthropic("anthropic-ratelimit-requests-reset", "requests"),
        anthropic("anthropic-ratelimit-tokens-reset", "tokens"),
        anthropic("anthropic-ratelimit-input-tokens-reset", "input-tokens"),
        anthropic("anthropic-ratelimit-output-tokens-reset", "output-tokens"),
    ]);
    largest(candidates)
}

/// The largest of several hints (ties go to the first).
pub fn largest(
    candidates: impl IntoIterator<Item = (&'static str, Option<f64>)>,
) -> Option<RetryHint> {
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

/// The retry hint an error body gives, if any: Gemini's `RetryInfo.retryDelay` among the
/// error's `details` (recorded as `error.details.retryDelay`) or "retry in 55.5s" in its
/// message (recorded as `error.message`); the larger wins. The body may be an object or, as
/// Gemini sometimes answers, an array whose first element is that object.
pub fn body_retry_hint(body: &serde_json::Value) -> Option<RetryHint> {
    use serde_json::Value;
    let root = match body {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let error = root.get("error").filter(|e| e.is_object()).unwrap_or(root);
    let delay = error
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            d.get("retryDelay")
                .and_then(Value::as_str)
                .and_then(go_duration)
        });
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .and_then(retry_in_message);
    largest([
        ("error.details.retryDelay", delay),
        ("error.message", message),
    ])
}

/// "… Please retry in 55.509468254s." → 55.509468254 (also `ms`); case-insensitive.
fn retry_in_message(message: &str) -> Option<f64> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("retry in ")? + "retry in ".len();
    let rest = &lower[at..];
    let n = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let value = seconds(&rest[..n])?;
    let unit = rest[n..].trim_start();
    if unit.starts_with("ms") || unit.starts_with("millisecond") {
        Some(value / 1000.0)
    } else if unit.starts_with('s') {
        Some(value)
    } else if unit.starts_with("min") || unit.starts_with('m') {
        Some(value * 60.0)
    } else {
        None
    }
}

/// Seconds from `now` until an RFC 3339 time (`2026-01-02T03:04:05Z`, fractions and
/// `±hh:mm` offsets allowed); 0 when it is past.
fn rfc3339_seconds_from(v: &str, now: SystemTime) -> Option<f64> {
    let at = rfc3339_unix(v)?;
    let now = now
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs_f64();
    Some((at - now).max(0.0))
}

/// Unix seconds of an RFC 3339 date-time.
fn rfc3339_unix(v: &str) -> Option<f64> {
    let b = v.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = v.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut rest = &v[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        if n == 0 {
            return None;
        }
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let hh: i64 = o[1..3].parse().ok()?;
            let mm: i64 = o[4..6].parse().ok()?;
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (hh * 3600 + mm * 60)
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + s - offset) as f64 + frac)
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
    fn anthropic_resets_count_when_retry_after_is_absent() {
        // Headers from https://docs.claude.com/en/api/rate-limits ("Response headers"):
        // resets are RFC 3339 times. `now` is 2015-10-21T07:27:58Z.
        let reset = [
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2015-10-21T07:28:05Z"),
            ("anthropic-ratelimit-tokens-remaining", "9000"),
            ("anthropic-ratelimit-tokens-reset", "2015-10-21T07:29:00Z"),
        ];
        assert_eq!(
            hint(&reset),
            Some(("anthropic-ratelimit-requests-reset", 7.0)),
            "only the spent limit's reset applies"
        );
        let mut with_retry = reset.to_vec();
        with_retry.push(("retry-after", "3"));
        assert_eq!(hint(&with_retry), Some(("retry-after", 3.0)));
        assert_eq!(
            hint(&[(
                "anthropic-ratelimit-input-tokens-reset",
                "2015-10-21T09:28:00.500+02:00"
            )]),
            Some(("anthropic-ratelimit-input-tokens-reset", 2.5))
        );
        assert_eq!(
            hint(&[(
                "anthropic-ratelimit-output-tokens-reset",
                "2015-10-21T07:00:00Z"
            )]),
            Some(("anthropic-ratelimit-output-tokens-reset", 0.0)),
            "a reset in the past: no wait"
        );
        for bad in [
            "soon",
            "2015-10-21",
            "2015-13-21T07:28:00Z",
            "2015-10-21T07:28:00",
        ] {
            assert_eq!(
                hint(&[("anthropic-ratelimit-requests-reset", bad)]),
                None,
                "{bad}"
            );
        }
        assert_eq!(rfc3339_unix("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(rfc3339_unix("2000-03-01T00:00:00Z"), Some(951_868_800.0));
    }

    #[test]
    fn error_bodies_give_hints() {
        use serde_json::json;
        // Gemini's 429: the array body of its OpenAI-compatible endpoint
        // (https://github.com/n4ze3m/page-assist/issues/406), the RetryInfo detail
        // (https://github.com/voideditor/void/issues/557) and the fractional delay with
        // "Please retry in" (https://github.com/dcdpr/jp/pull/1061).
        let gemini = json!([{"error": {"code": 429,
        "message": "You exceeded your current quota. Please retry in 55.509468254s.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "47s"}
        ]}}]);
        let h = body_retry_hint(&gemini).unwrap();
        assert_eq!(h.header, "error.message");
        assert!((h.wait.as_secs_f64() - 55.509468254).abs() < 1e-6);
        let mut object = gemini[0].clone();
        object["error"]["message"] = json!("Resource exhausted.");
        let h = body_retry_hint(&object).unwrap();
        assert_eq!(
            (h.header, h.wait.as_secs_f64()),
            ("error.details.retryDelay", 47.0)
        );
        assert_eq!(
            body_retry_hint(&json!({"error": {"message": "Please retry in 250ms"}}))
                .map(|h| h.wait.as_secs_f64()),
            Some(0.25)
        );
        for none in [
            json!({"error": {"message": "bad request"}}),
            json!({"error": {"message": "retry in a while"}}),
            json!("text"),
            json!([]),
        ] {
            assert_eq!(body_retry_hint(&none), None, "{none}");
        }
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
