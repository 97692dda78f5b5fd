//! The full-screen view: a pure function of [`TopState`], so it is tested by drawing into
//! ratatui's `TestBackend`.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::TopState;
use crate::output;

fn rate(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.1}"))
}

/// Draws `state` over the whole frame. Readable at 80x24; the keys' table takes what a larger
/// terminal gives.
pub fn draw(frame: &mut Frame, state: &TopState) {
    let area = frame.area();
    let wait_rows = state.waits.len().max(1) as u16;
    let [title, summary, waits, keys, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(4),
        Constraint::Length(wait_rows + 3),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_title(frame, title, state);
    draw_summary(frame, summary, state);
    draw_waits(frame, waits, state);
    draw_keys(frame, keys, state);
    draw_footer(frame, footer, state);
}

fn draw_title(frame: &mut Frame, area: Rect, state: &TopState) {
    let nodes = match state.nodes {
        0 => "no answer yet".to_owned(),
        1 => "1 server".to_owned(),
        n => format!("{n} primaries"),
    };
    let left = format!(
        " rlock top  {}  {nodes}, every {:.1}s",
        state.target,
        state.interval.as_secs_f64()
    );
    let right = format!("{} UTC ", state.clock);
    let [l, r] = Layout::horizontal([Constraint::Min(0), Constraint::Length(right.len() as u16)])
        .areas(area);
    frame.render_widget(Paragraph::new(left).bold(), l);
    frame.render_widget(Paragraph::new(right), r);
}

fn draw_summary(frame: &mut Frame, area: Rect, state: &TopState) {
    let r = state.rates;
    let label = |t: &str| Span::styled(t.to_owned(), Style::new().add_modifier(Modifier::DIM));
    let value = |t: String| Span::styled(t, Style::new().bold());
    let rates = Line::from(vec![
        label("acquires "),
        value(rate(r.map(|r| r.acquires))),
        label("   hand-offs "),
        value(rate(r.map(|r| r.handoffs))),
        label("   timeouts "),
        value(rate(r.map(|r| r.timeouts))),
        label("   deadlocks "),
        value(rate(r.map(|r| r.deadlocks))),
        label("   expiries "),
        value(rate(r.map(|r| r.expiries))),
    ]);
    let now = Line::from(vec![
        label("blocked now "),
        value(state.blocked.to_string()),
        label("   longest wait "),
        value(output::millis(state.longest_wait_ms)),
        label("   releases/s "),
        value(rate(r.map(|r| r.releases))),
    ]);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" Rates per second ");
    frame.render_widget(Paragraph::new(vec![rates, now]).block(block), area);
}

fn draw_waits(frame: &mut Frame, area: Rect, state: &TopState) {
    let header = Row::new(["family", "p50", "p99"]).style(Style::new().bold());
    let rows: Vec<Row> = if state.waits.is_empty() {
        vec![Row::new(["(no granted waits in the window)", "", ""])]
    } else {
        state
            .waits
            .iter()
            .map(|w| {
                Row::new([
                    w.family.clone(),
                    output::micros(w.p50_us),
                    output::micros(w.p99_us),
                ])
            })
            .collect()
    };
    let table = Table::new(
        rows,
        [
            Constraint::Length(34),
            Constraint::Length(10),
            Constraint::Length(10),
        ],
    )
    .header(header)
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title(" Wait per family (server window) "),
    );
    frame.render_widget(table, area);
}

fn draw_keys(frame: &mut Frame, area: Rect, state: &TopState) {
    let cluster = state.nodes > 1;
    let mut head = vec![
        "key", "kind", "waiters", "longest", "waits", "timeouts", "p99",
    ];
    if cluster {
        head.push("node");
    }
    let header = Row::new(head).style(Style::new().bold());
    let rows: Vec<Row> = state
        .keys
        .iter()
        .map(|k| {
            let mut cells = vec![
                Cell::from(k.key.clone()),
                Cell::from(k.kind.clone()),
                Cell::from(k.waiters.to_string()),
                Cell::from(output::millis(k.longest_wait_ms)),
                Cell::from(k.waits.to_string()),
                Cell::from(k.timeouts.to_string()),
                Cell::from(
                    k.wait_p99_usec
                        .map_or("-".to_owned(), |u| output::micros(u as f64)),
                ),
            ];
            if cluster {
                cells.push(Cell::from(k.node.clone()));
            }
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![
        Constraint::Fill(1),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(7),
    ];
    if cluster {
        widths.push(Constraint::Length(21));
    }
    let title = if state.keys.is_empty() {
        " Most contended keys: none in the window ".to_owned()
    } else {
        " Most contended keys ".to_owned()
    };
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::ALL).title(title));
    frame.render_widget(table, area);
}

fn draw_footer(frame: &mut Frame, area: Rect, state: &TopState) {
    let line = match &state.error {
        Some(e) => Line::from(vec![
            Span::styled(" error: ", Style::new().bold()),
            Span::raw(e.clone()),
        ]),
        None => Line::from(format!(" q quit    rlock module {}", state.version)),
    };
    frame.render_widget(Paragraph::new(line), area);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::super::{key_row, FamilyWait, Rates};
    use super::*;

    fn state() -> TopState {
        let mut orders = key_row("orders", "lock", 5, 6300);
        (orders.waits, orders.timeouts, orders.wait_p99_usec) = (12, 1, Some(1_245_183));
        let long_name = "tenant:0042:reports:quarterly-close:reconciliation-lock";
        TopState {
            target: "redis://127.0.0.1:6379".into(),
            nodes: 1,
            interval: Duration::from_secs(1),
            rates: Some(Rates {
                over_secs: 1.0,
                acquires: 120.5,
                handoffs: 42.0,
                timeouts: 3.0,
                deadlocks: 0.0,
                expiries: 0.0,
                releases: 118.0,
            }),
            blocked: 7,
            longest_wait_ms: 6300,
            waits: vec![
                FamilyWait {
                    family: "lock".into(),
                    p50_us: 1200.0,
                    p99_us: 25_690_111.0,
                },
                FamilyWait {
                    family: "permits".into(),
                    p50_us: 40.0,
                    p99_us: 900.0,
                },
            ],
            keys: vec![orders, key_row(long_name, "rwlock", 2, 0)],
            version: "3.0.0".into(),
            error: None,
            clock: "12:00:00".into(),
        }
    }

    fn render(width: u16, height: u16, state: &TopState) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| draw(f, state)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..height {
            for x in 0..width {
                out.push_str(buffer[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    #[test]
    fn everything_is_on_an_80_by_24_screen() {
        let screen = render(80, 24, &state());
        for text in [
            "rlock top",
            "Rates per second",
            "acquires 120.5",
            "hand-offs 42.0",
            "timeouts 3.0",
            "deadlocks 0.0",
            "blocked now 7",
            "longest wait 6.3s",
            "Wait per family",
            "lock",
            "1.2ms",
            "25.7s",
            "permits",
            "Most contended keys",
            "orders",
            "q quit",
            "12:00:00 UTC",
            "every 1.0s",
        ] {
            assert!(screen.contains(text), "{text:?} missing from\n{screen}");
        }
        assert!(
            !screen.contains("reconciliation-lock"),
            "a long key is cut at 80 columns:\n{screen}"
        );
    }

    #[test]
    fn a_larger_screen_gives_the_keys_its_width() {
        let screen = render(120, 40, &state());
        assert!(
            screen.contains("tenant:0042:reports:quarterly-close:reconciliation-lock"),
            "{screen}"
        );
        assert!(screen.contains("Most contended keys"));
        let rows_of_keys = screen.lines().filter(|l| l.contains("orders")).count();
        assert_eq!(rows_of_keys, 1);
    }

    #[test]
    fn before_two_looks_rates_are_dashes_and_errors_show() {
        let mut s = state();
        s.rates = None;
        s.keys.clear();
        s.waits.clear();
        s.error = Some("connection refused".into());
        let screen = render(80, 24, &s);
        assert!(screen.contains("acquires -"), "{screen}");
        assert!(screen.contains("none in the window"), "{screen}");
        assert!(screen.contains("no granted waits"), "{screen}");
        assert!(screen.contains("error: connection refused"), "{screen}");
    }

    #[test]
    fn a_cluster_shows_each_key_s_node() {
        let mut s = state();
        s.nodes = 3;
        s.keys[0].node = "127.0.0.1:7001".into();
        let screen = render(120, 40, &s);
        assert!(screen.contains("3 primaries") && screen.contains("127.0.0.1:7001"));
    }
}
