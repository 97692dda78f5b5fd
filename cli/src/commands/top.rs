//! `rlock top`: a live view of contention, full-screen or one line per interval (`--stat`).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use super::{client, unavailable};
use crate::connect::ConnectArgs;
use crate::exit;
use crate::top::{self, view, Sampler};

const AFTER: &str = "\
Reads INFO rlock (counters, wait percentiles, calls blocked now) and RLOCK.TOP (the most
contended keys) every interval; with --cluster, on every primary: rates and blocked calls summed,
the longest wait and each family's percentiles the worst primary's, keys merged (most waiters
first). Rates need two looks: the first interval shows `-`. Wait percentiles cover the server's
window (rlock.stats-window-ms, 60 s by default), not the interval.

Full screen: q, Esc or Ctrl-C quits. --stat prints one line per interval instead, the header
again every 20 lines, as redis-cli --stat does: for logs and pipes.

Examples:
  rlock top
  rlock top -i 5 -n 20 -u redis://10.0.0.5:6379
  rlock top --stat -i 10 >> /var/log/rlock-contention.log";

/// A live view of lock contention: rates, waits, blocked calls, the most contended keys.
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct TopArgs {
    /// Seconds between looks (fractions allowed).
    #[arg(short, long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    /// How many contended keys to show (RLOCK.TOP COUNT).
    #[arg(short = 'n', long = "count", value_name = "COUNT", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,
    /// One line per interval on stdout instead of the full screen.
    #[arg(long)]
    pub stat: bool,
}

const HEADER_EVERY: usize = 20;

pub async fn run(conn: &ConnectArgs, args: TopArgs) -> u8 {
    if !(args.interval >= 0.05 && args.interval <= 3600.0) {
        eprintln!("rlock: --interval must be between 0.05 and 3600 seconds");
        return exit::USAGE;
    }
    if !args.stat && !std::io::stdout().is_terminal() {
        eprintln!(
            "rlock: top: stdout is not a terminal; use `rlock top --stat` for logs and pipes"
        );
        return exit::USAGE;
    }
    let locks = match client(conn, None) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let interval = Duration::from_secs_f64(args.interval);
    let target = if conn.cluster {
        format!("{} (cluster)", conn.url)
    } else {
        conn.url.clone()
    };
    let mut sampler = Sampler::new(locks, target, interval, args.count);
    // A first look that fails is a wrong URL or a server without the module: say so plainly.
    sampler.look().await;
    if let Some(e) = &sampler.state.error {
        return unavailable(format!("{}: {e}", conn.url));
    }
    if args.stat {
        stat(&mut sampler, interval).await
    } else {
        full_screen(&mut sampler, interval).await
    }
}

async fn stat(sampler: &mut Sampler, interval: Duration) -> u8 {
    let mut printed = 0usize;
    let mut out = std::io::stdout();
    loop {
        tokio::time::sleep(interval).await;
        sampler.look().await;
        let Some(line) = top::stat_line(&sampler.state) else {
            continue;
        };
        let mut text = String::new();
        if printed % HEADER_EVERY == 0 {
            text.push_str(&top::stat_header());
            text.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
        printed += 1;
        // A closed pipe (`| head`) ends the run quietly.
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return exit::OK;
        }
    }
}

enum Input {
    Quit,
    Redraw,
}

/// Reads the terminal's events on a thread of its own (crossterm's reads block).
fn read_input(tx: mpsc::UnboundedSender<Input>) {
    while !tx.is_closed() {
        match event::poll(Duration::from_millis(100)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => return,
        }
        let sent = match event::read() {
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                let quit = matches!(
                    k.code,
                    KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc
                ) || (k.code == KeyCode::Char('c')
                    && k.modifiers.contains(KeyModifiers::CONTROL));
                if quit {
                    tx.send(Input::Quit)
                } else {
                    Ok(())
                }
            }
            Ok(Event::Resize(..)) => tx.send(Input::Redraw),
            Ok(_) => Ok(()),
            Err(_) => return,
        };
        if sent.is_err() {
            return;
        }
    }
}

async fn full_screen(sampler: &mut Sampler, interval: Duration) -> u8 {
    let mut terminal = ratatui::init();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let reader = std::thread::spawn(move || read_input(tx));
    let mut next = tokio::time::Instant::now();
    let result = loop {
        if let Err(e) = terminal.draw(|f| view::draw(f, &sampler.state)) {
            break Err(e);
        }
        if tokio::time::Instant::now() >= next {
            next = tokio::time::Instant::now() + interval;
        }
        tokio::select! {
            input = rx.recv() => match input {
                Some(Input::Redraw) => {}
                Some(Input::Quit) | None => break Ok(()),
            },
            _ = tokio::time::sleep_until(next) => {
                sampler.look().await;
            }
        }
    };
    ratatui::restore();
    drop(rx);
    let _ = reader.join();
    match result {
        Ok(()) => exit::OK,
        Err(e) => unavailable(format!("drawing: {e}")),
    }
}
