//! `rlock info`, `waiters`, `ls`, `release --force`: human output and `--json`.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value as Json;

fn ok(server: &Server, args: &[&str]) -> String {
    let out = run_on(server, args, &args.join(" "));
    assert_exit(&out, 0, format_args!("{args:?}"));
    text(&out.stdout)
}

fn json(server: &Server, args: &[&str]) -> Json {
    let out = ok(server, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

#[test]
fn info_waiters_and_ls_show_holders_leases_and_waiters() {
    for (flavor, server) in each_server() {
        let mut c = server.conn();
        call(
            &mut c,
            &[
                "RLOCK.ACQUIRE",
                "app:orders",
                "alice",
                "LEASE",
                "60000",
                "TOKEN",
            ],
        )
        .unwrap();
        call(
            &mut c,
            &[
                "RLOCK.ACQUIRE",
                "app:catalog",
                "carol",
                "WRITE",
                "LEASE",
                "60000",
            ],
        )
        .unwrap();
        hold(&mut c, "other:x", "dan", "60000");
        let waiter = {
            let mut w = server.conn();
            std::thread::spawn(move || {
                call(&mut w, &["CLIENT", "SETNAME", "billing"]).unwrap();
                call(
                    &mut w,
                    &["RLOCK.ACQUIRE", "app:orders", "bob", "BLOCK", "3000"],
                )
            })
        };
        assert!(wait_until(Duration::from_secs(5), || waiting(
            &mut c,
            "app:orders"
        ) == 1));

        let info = ok(&server, &["info", "app:orders"]);
        assert!(
            info.contains("alice") && info.contains("left"),
            "{flavor}: {info}"
        );
        assert!(
            info.lines()
                .any(|l| l.starts_with("blocked") && l.ends_with(" 1")),
            "{info}"
        );
        let j = json(&server, &["info", "app:orders", "--json"]);
        assert_eq!(j["kind"], "lock");
        assert_eq!(j["holders"][0]["owner"], "alice");
        assert_eq!(j["holders"][0]["count"], 1);
        assert_eq!(j["blocked"], 1);
        assert_eq!(j["token"], 1);
        let pttl = j["pttl_ms"].as_i64().unwrap();
        assert!(pttl > 50_000 && pttl <= 60_000, "{flavor}: {j}");
        let rw = json(&server, &["info", "app:catalog", "--json"]);
        assert_eq!(
            (rw["kind"].as_str(), rw["mode"].as_str()),
            (Some("rwlock"), Some("write"))
        );
        let free = json(&server, &["info", "nothing", "--json"]);
        assert_eq!(
            (free["kind"].as_str(), free["pttl_ms"].as_i64()),
            (Some("free"), Some(-2))
        );

        let waiters = ok(&server, &["waiters", "app:orders"]);
        assert!(
            waiters.contains("billing") && waiters.contains("bob"),
            "{flavor}: {waiters}"
        );
        let w = json(&server, &["waiters", "app:orders", "--json"]);
        assert_eq!(w.as_array().unwrap().len(), 1, "{flavor}: {w}");
        assert_eq!(
            (w[0]["owner"].as_str(), w[0]["kind"].as_str()),
            (Some("bob"), Some("lock"))
        );
        assert_eq!(w[0]["client_name"], "billing");
        assert!(w[0]["timeout_ms"].as_i64().unwrap() <= 3000);
        assert!(ok(&server, &["waiters", "app:catalog"]).contains("nobody waits"));

        let ls = ok(&server, &["ls", "app:*"]);
        let lines: Vec<&str> = ls.lines().collect();
        assert_eq!(lines.len(), 3, "{flavor}: header and two locks: {ls}");
        assert!(
            lines[0].starts_with("KEY") && lines[1].starts_with("app:catalog"),
            "{ls}"
        );
        assert!(
            lines[1].contains("rwlock (write)") && lines[1].contains("carol:write"),
            "{ls}"
        );
        assert!(
            lines[2].starts_with("app:orders") && lines[2].contains("alice"),
            "{ls}"
        );
        let all = json(&server, &["ls", "--json"]);
        assert_eq!(all.as_array().unwrap().len(), 3, "{flavor}: {all}");
        let rw_only = json(&server, &["ls", "--type", "rwlock", "--json"]);
        assert_eq!(rw_only.as_array().unwrap().len(), 1, "{flavor}: {rw_only}");
        assert_eq!(rw_only[0]["key"], "app:catalog");
        assert_eq!(rw_only[0]["holders"][0]["owner"], "carol:write");
        let orders = all
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["key"] == "app:orders")
            .unwrap();
        assert_eq!(orders["waiters"], 1, "{flavor}: {orders}");
        assert!(ok(&server, &["ls", "none:*"]).contains("no locks"));

        // release --force: refused without --yes when stdin is not a terminal.
        let refused = run_on(&server, &["release", "--force", "app:orders"], "refused");
        assert_eq!(refused.status.code(), Some(64), "{flavor}");
        assert!(text(&refused.stderr).contains("--yes"), "{flavor}");
        assert!(exists(&server, "app:orders"), "{flavor}: still held");
        let released = json(
            &server,
            &["release", "--force", "--yes", "app:orders", "--json"],
        );
        assert_eq!(released["released"], true, "{flavor}");
        // The waiter got it at once.
        let got = waiter.join().unwrap();
        assert!(matches!(got, Ok(redis::Value::Int(1))), "{flavor}: {got:?}");
        assert!(ok(&server, &["release", "--force", "--yes", "nothing"]).contains("was not locked"));
        let no_force = run_on(&server, &["release", "app:x"], "no --force");
        assert_eq!(
            no_force.status.code(),
            Some(64),
            "{flavor}: --force is required"
        );
    }
}

#[test]
fn a_server_that_is_not_there_is_exit_69_with_a_message() {
    let err = run_without_server(&["info", "x"], "no server");
    assert!(err.starts_with("rlock: "), "{err}");
    let tls = ["-u", "unix:///tmp/rlock-none.sock", "--tls", "info", "x"];
    let tls = run_alone(&tls, "tls on a unix socket");
    assert_eq!(tls.status.code(), Some(64));
    assert!(text(&tls.stderr).contains("--tls"), "{}", text(&tls.stderr));
}

#[test]
fn release_force_asks_on_a_terminal() {
    for (flavor, server) in each_server() {
        hold(&mut server.conn(), "stuck", "gone-host", "60000");
        let tmux = Tmux::new();
        for (answer, code, held) in [("n", 1, true), ("y", 0, false)] {
            let command = format!(
                "{} -u {} release --force stuck; echo \"rc=$?\"; sleep 30",
                bin(),
                server.url()
            );
            tmux.start(answer, 100, 10, &command);
            let (asked, screen) = tmux.wait_for_screen(answer, |s| s.contains("[y/N]"));
            assert!(asked, "{flavor}: asks first:\n{screen}");
            assert!(
                screen.contains("gone-host"),
                "{flavor}: names the holder:\n{screen}"
            );
            tmux.cmd(&["send-keys", "-t", answer, answer, "Enter"]);
            let (done, screen) = tmux.wait_for_screen(answer, |s| s.contains("rc="));
            assert!(done, "{flavor}:\n{screen}");
            assert!(
                screen.contains(&format!("rc={code}")),
                "{flavor} {answer}:\n{screen}"
            );
            assert_eq!(exists(&server, "stuck"), held, "{flavor} {answer}");
        }
    }
}
