//! The client crate and the module share one version.

mod common;

use common::{servers, Server};

fn module_version(server: &Server) -> String {
    server
        .info("rlock")
        .get("rlock_version")
        .cloned()
        .unwrap_or_else(|| panic!("{}: INFO rlock has no rlock_version", server.flavor))
}

#[test]
fn the_client_has_the_module_version() {
    for server in servers() {
        assert_eq!(
            module_version(&server),
            rlock_client::VERSION,
            "{}",
            server.flavor
        );
    }
}
