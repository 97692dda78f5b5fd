//! TLS servers for the clients' tests: certificates made in the test (a CA, a server and a
//! client certificate signed by it, and a second CA that signed nothing of these), and a
//! server that listens for TLS on a port of its own beside its plain one.
//!
//! Not every server binary has TLS built in: [`supports_tls`] asks the binary itself.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::{free_port, Flavor, Server};

/// PEM files in a temporary directory, removed on drop.
pub struct TlsFiles {
    _dir: tempfile::TempDir,
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// The server's certificate (for `localhost` and 127.0.0.1) and key.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// The client's certificate and key, for a server with `tls-auth-clients yes`.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed none of the above: a client that trusts only it must refuse the server.
    pub other_ca: PathBuf,
}

fn ca(name: &str) -> (Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("self-sign the CA");
    (cert, key)
}

fn leaf(
    name: &str,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Certificate,
    issuer_key: &KeyPair,
) -> (Certificate, KeyPair) {
    let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("leaf params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params
        .signed_by(&key, issuer, issuer_key)
        .expect("sign the leaf");
    (cert, key)
}

impl TlsFiles {
    pub fn new() -> TlsFiles {
        let dir = tempfile::Builder::new()
            .prefix("rlock-tls-")
            .tempdir()
            .expect("temp dir");
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            fs::write(&path, pem).expect("write a PEM file");
            path
        };
        let (ca_cert, ca_key) = ca("rlock test CA");
        let (server, server_key) = leaf(
            "rlock test server",
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca_cert,
            &ca_key,
        );
        let (client, client_key) = leaf(
            "rlock test client",
            ExtendedKeyUsagePurpose::ClientAuth,
            &ca_cert,
            &ca_key,
        );
        let (other, _) = ca("another CA");
        TlsFiles {
            ca: write("ca.crt", ca_cert.pem()),
            server_cert: write("server.crt", server.pem()),
            server_key: write("server.key", server_key.serialize_pem()),
            client_cert: write("client.crt", client.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            other_ca: write("other-ca.crt", other.pem()),
            _dir: dir,
        }
    }
}

impl Default for TlsFiles {
    fn default() -> Self {
        TlsFiles::new()
    }
}

/// True if `flavor`'s binary has TLS built in. Asked of the binary: with TLS it fails on the
/// missing certificate file; without, it says it has no TLS support.
pub fn supports_tls(flavor: Flavor) -> bool {
    let missing = Path::new("/nonexistent/rlock-tls-probe.pem");
    let out = Command::new(flavor.binary())
        .args(["--port", "0", "--tls-port", &free_port().to_string()])
        .arg("--tls-cert-file")
        .arg(missing)
        .arg("--tls-key-file")
        .arg(missing)
        .args(["--save", "", "--appendonly", "no"])
        .output()
        .expect("run the server binary");
    let text = crate::output_text(&out);
    !(text.contains("TLS support") || text.contains("connection type tls"))
}

/// A server with the module, listening for TLS on the returned port (its plain port stays
/// open for the harness), with `files`' server certificate. With `client_certs`, it asks
/// clients for a certificate signed by `files.ca` (`tls-auth-clients yes`).
pub fn start_tls_server(flavor: Flavor, files: &TlsFiles, client_certs: bool) -> (Server, u16) {
    let tls_port = free_port();
    let path = |p: &Path| p.display().to_string();
    let server = Server::builder(flavor)
        .config("tls-port", &tls_port.to_string())
        .config("tls-cert-file", &path(&files.server_cert))
        .config("tls-key-file", &path(&files.server_key))
        .config("tls-ca-cert-file", &path(&files.ca))
        .config("tls-auth-clients", if client_certs { "yes" } else { "no" })
        .start();
    (server, tls_port)
}
