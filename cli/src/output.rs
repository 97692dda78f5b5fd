//! Terminal output shared by the query subcommands: aligned tables and readable times.

/// Prints `rows` under `header`, each column as wide as its widest cell, two spaces apart.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A `pttl` in words: `12.3s left`, `no lease`, `-`.
pub fn lease_left(pttl: i64) -> String {
    match pttl {
        -2 => "-".to_owned(),
        -1 => "no lease (held until released)".to_owned(),
        ms => format!("{} left", millis(ms.max(0) as u64)),
    }
}

/// Milliseconds as `850ms`, `12.3s`, `4m05s`, `2h10m`.
pub fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
    }
}

/// Microseconds as `21us`, `1.2ms`, `25.7s`.
pub fn micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0}us")
    } else if us < 1_000_000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{:.1}s", us / 1_000_000.0)
    }
}

/// Owners and their hold counts: `alice`, `bob x2`.
pub fn holders(list: &[(String, u64)]) -> String {
    if list.is_empty() {
        return "-".to_owned();
    }
    list.iter()
        .map(|(o, n)| {
            if *n == 1 {
                o.clone()
            } else {
                format!("{o} x{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The time now, UTC, to the millisecond: `2026-11-25T16:40:00.123Z`.
pub fn utc_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    utc(now.as_millis() as u64)
}

/// Milliseconds since the epoch as an RFC 3339 UTC time.
fn utc(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        (rest / 60_000) % 60,
        (rest / 1000) % 60,
        rest % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_times_read() {
        let t = table(&["KEY", "N"], &[vec!["orders".into(), "1".into()]]);
        assert_eq!(t, "KEY     N\norders  1\n");
        assert_eq!(millis(850), "850ms");
        assert_eq!(millis(12_345), "12.3s");
        assert_eq!(millis(245_000), "4m05s");
        assert_eq!(micros(21.0), "21us");
        assert_eq!(micros(25_690_111.0), "25.7s");
        assert_eq!(lease_left(-1), "no lease (held until released)");
        assert_eq!(holders(&[("a".into(), 1), ("b".into(), 2)]), "a, b x2");
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_795_615_815_123), "2026-11-25T14:10:15.123Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
