//! The report's markdown pieces: numbers as the tables show them, the list of a scenario's
//! paths, and tables.

use std::fmt::Write as _;

use super::cells::Path;

/// `x` with `decimals` decimals, or `–` when it was not measured.
pub fn num(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "–".into()
    }
}

/// A rate rounded to a whole number, thousands apart by a space: `141 099`.
pub fn rate(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    group(&format!("{x:.0}"), ' ')
}

/// 10000 → "10,000".
pub fn thousands(n: u64) -> String {
    group(&n.to_string(), ',')
}

fn group(digits: &str, sep: char) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// `- **R**: what R sends`, one line per path.
pub fn paths<P: Path>(w: &mut String, paths: &[P]) {
    for &p in paths {
        let _ = writeln!(w, "- **{}**: {}", p.letter(), p.describe());
    }
}

/// A table: the header's column names, each ending in `:` when right-aligned (`"pairs/s:"`),
/// then one row per item.
pub fn table(w: &mut String, columns: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let names: Vec<String> = columns
        .iter()
        .map(|c| match c.trim_end_matches(':') {
            "" => " ".to_string(),
            name => format!(" {name} "),
        })
        .collect();
    let _ = writeln!(w, "|{}|", names.join("|"));
    let aligns: Vec<&str> = columns
        .iter()
        .map(|c| if c.ends_with(':') { "---:" } else { "---" })
        .collect();
    let _ = writeln!(w, "|{}|", aligns.join("|"));
    for row in rows {
        let _ = writeln!(w, "| {} |", row.join(" | "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_tables() {
        assert_eq!(rate(141_099.4), "141 099");
        assert_eq!(rate(999.0), "999");
        assert_eq!(rate(f64::NAN), "–");
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(num(0.2019, 3), "0.202");
        let mut w = String::new();
        table(
            &mut w,
            &["path", "pairs/s:"],
            [vec!["R".into(), "1".into()]],
        );
        assert_eq!(w, "| path | pairs/s |\n|---|---:|\n| R | 1 |\n");
        let mut w = String::new();
        table(&mut w, &["", "runs"], [vec!["a".into(), String::new()]]);
        assert_eq!(w, "| | runs |\n|---|---|\n| a |  |\n");
    }
}
