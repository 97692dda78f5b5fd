//! `rlock` over TLS: `--tls`, `--cacert`, `--cert`, `--key`, `--insecure` (as redis-cli names
//! them) and `rediss://` URLs, against a server with a TLS port and certificates made in the
//! test. Run on every flavor whose binary has TLS built in (Debian's Redis 7.0).

mod common;

use common::*;
use rlock_module_tests::tls::{start_tls_server, supports_tls, TlsFiles};

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[test]
fn tls_options_reach_a_tls_server_and_a_wrong_ca_is_refused() {
    for flavor in flavors() {
        if !supports_tls(flavor) {
            eprintln!("{flavor}: built without TLS, skipped");
            continue;
        }
        let files = TlsFiles::new();
        let (server, port) = start_tls_server(flavor, &files, true);
        let client = [
            "--cert".to_string(),
            path(&files.client_cert),
            "--key".to_string(),
            path(&files.client_key),
        ];
        let with = |url: String, extra: &[&str], rest: &[&str]| {
            let mut args: Vec<String> = vec!["-u".into(), url];
            args.extend(client.iter().cloned());
            args.extend(extra.iter().map(|s| s.to_string()));
            args.extend(rest.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_on(&server, &args, "rlock over TLS")
        };
        let ca = path(&files.ca);
        let other = path(&files.other_ca);
        // rediss:// with the CA, and redis:// with --tls: the lock is taken over TLS.
        for url in [
            format!("rediss://127.0.0.1:{port}"),
            format!("redis://localhost:{port}"),
        ] {
            let tls: &[&str] = if url.starts_with("rediss") {
                &["--cacert", &ca]
            } else {
                &["--tls", "--cacert", &ca]
            };
            let out = with(url.clone(), tls, &["lock", "tls:job", "--", "true"]);
            assert_exit(&out, 0, format_args!("{flavor} {url}"));
            let out = with(url.clone(), tls, &["info", "tls:job"]);
            assert_exit(&out, 0, flavor);
            assert!(text(&out.stdout).contains("free"), "{}", text(&out.stdout));
        }
        // A CA that did not sign the server's certificate: refused.
        let url = format!("rediss://127.0.0.1:{port}");
        let out = with(url.clone(), &["--cacert", &other], &["info", "x"]);
        assert_exit(&out, 69, flavor);
        assert!(
            text(&out.stderr).to_lowercase().contains("certificate")
                || text(&out.stderr).contains("UnknownIssuer"),
            "{flavor}: {}",
            text(&out.stderr)
        );
        // --insecure checks nothing, so the wrong CA goes unnoticed.
        let out = with(
            url.clone(),
            &["--cacert", &other, "--insecure"],
            &["info", "x"],
        );
        assert_exit(&out, 0, flavor);
        // Without the client certificate the server refuses.
        let no_cert = ["-u", &url, "--cacert", &ca, "info", "x"];
        assert_exit(
            &run_on(&server, &no_cert, "no client certificate"),
            69,
            flavor,
        );
        // TLS options on a plain URL without --tls: a usage error, nothing sent.
        let plain = format!("redis://127.0.0.1:{}", server.port);
        let plain = ["-u", &plain, "--cacert", &ca, "info", "x"];
        assert_exit(&run_on(&server, &plain, "--cacert without TLS"), 64, flavor);
    }
}
