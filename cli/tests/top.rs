//! `rlock top`: `--stat` lines that move under load, and the full screen in a real terminal
//! (tmux).

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn stat_prints_a_header_then_a_line_per_interval_with_rates_that_move() {
    for (flavor, server) in each_server() {
        let load = Load::start(&server, "busy:key", 3);
        let mut top = rlock(&server, &["top", "--stat", "-i", "0.3"])
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let rx = stdout_lines(&mut top);
        let mut lines = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while lines.len() < 4 && Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                lines.push(line);
            }
        }
        drop(load);
        let _ = top.kill();
        let _ = top.wait();
        assert_eq!(lines.len(), 4, "{flavor}: {lines:?}");
        assert!(
            lines[0].contains("acquire/s") && lines[0].contains("p99 wait"),
            "{lines:?}"
        );
        let rates: Vec<f64> = lines[1..]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        assert!(
            rates.iter().all(|r| *r > 0.0),
            "{flavor}: acquires under load: {lines:?}"
        );
        assert!(
            lines[1..].iter().any(|l| l.contains("busy:key")),
            "{flavor}: the contended key: {lines:?}"
        );
    }
}

#[test]
fn stat_says_plainly_when_the_server_is_not_there() {
    let err = run_without_server(&["top", "--stat"], "top no server");
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

#[test]
fn the_full_screen_shows_headings_and_the_contended_key_and_q_quits() {
    for (flavor, server) in each_server() {
        let mut c = server.conn();
        hold(&mut c, "contended:key", "holder", "30000");
        let waiter = blocked_waiter(&server, "contended:key", "waiter", "8000");
        let tmux = Tmux::new();
        let command = format!("{} top -i 0.3 -u {}", bin(), server.url());
        tmux.start("top", 120, 40, &command);
        let (shown, screen) = tmux.wait_for_screen("top", |s| {
            s.contains("contended:key") && s.contains("blocked now 1")
        });
        assert!(shown, "{flavor}: the screen:\n{screen}");
        for heading in [
            "rlock top",
            "Rates per second",
            "acquires",
            "hand-offs",
            "timeouts",
            "deadlocks",
            "longest wait",
            "Wait per family",
            "Most contended keys",
            "q quit",
        ] {
            assert!(
                screen.contains(heading),
                "{flavor}: {heading:?} missing:\n{screen}"
            );
        }
        let width = screen.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert_eq!(width, 120, "{flavor}: uses the full width:\n{screen}");
        tmux.cmd(&["send-keys", "-t", "top", "q"]);
        assert!(
            wait_until(Duration::from_secs(5), || !tmux.alive("top")),
            "{flavor}: q ends it"
        );
        call(&mut c, &["RLOCK.RELEASE", "contended:key", "holder"]).unwrap();
        let _ = waiter.join();
    }
}

#[test]
fn the_full_screen_needs_a_terminal() {
    let server = Server::start(flavors()[0]);
    let out = run_on(&server, &["top"], "top in a pipe");
    assert_eq!(out.status.code(), Some(64));
    assert!(
        text(&out.stderr).contains("--stat"),
        "{}",
        text(&out.stderr)
    );
}
