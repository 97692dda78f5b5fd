//! Durations on the command line: `250ms`, `5s`, `1.5s`, `2m`, `1h`, or a bare number of
//! seconds as `timeout(1)` takes them.

use std::time::Duration;

/// Parses `DUR` for clap.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (try 250ms, 5s, 1.5s, 2m, 1h)"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use ms, s, m or h)"
            ))
        }
    };
    if !seconds.is_finite() || seconds > 1e9 {
        return Err(format!("{text:?} is too long"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `1.5s`, `250ms`, `2m5s` for messages.
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        let s = d.as_secs_f64();
        if ms % 1000 == 0 {
            format!("{}s", ms / 1000)
        } else {
            format!("{s:.1}s")
        }
    } else {
        format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_seconds() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert!(parse("5 parsecs").is_err());
        assert!(parse("fast").is_err());
        assert!(parse("-1s").is_err());
    }

    #[test]
    fn shown_short() {
        assert_eq!(show(Duration::from_millis(100)), "100ms");
        assert_eq!(show(Duration::from_secs(10)), "10s");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
        assert_eq!(show(Duration::from_secs(125)), "2m5s");
    }
}
