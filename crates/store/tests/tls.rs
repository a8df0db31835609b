//! TLS to PostgreSQL (what Amazon RDS requires by default): the store connects over TLS when
//! the server offers it, verifies the server's certificate against `sslrootcert`, and with
//! `sslmode=require` connects over TLS or not at all.

mod common;

use instantstart_core::store::Store;
use instantstart_store::{PostgresStore, RustlsConnect};

/// `SELECT ssl FROM pg_stat_ssl` for a connection made with `tls` to `url`.
fn encrypted(url: &str, tls: RustlsConnect) -> Result<bool, postgres::Error> {
    let mut client = url.parse::<postgres::Config>().unwrap().connect(tls)?;
    let row = client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])?;
    Ok(row.get(0))
}

#[test]
fn the_store_speaks_verified_tls_to_a_server_that_offers_it() {
    let Some(server) = common::PgServer::with_tls() else { return };
    let ca = server.tls_ca().expect("the TLS server's CA");
    let url = server.create_database();
    let with_ca = format!("{url}?sslmode=require&sslrootcert={}", ca.display());
    // The whole store works over it (migrations, a write, a read).
    let store = PostgresStore::connect(&with_ca).expect("connect over TLS");
    store.set_setting("tls", Some("yes")).unwrap();
    assert_eq!(store.get_setting("tls").unwrap().as_deref(), Some("yes"));
    // And the connection is encrypted.
    assert!(encrypted(&format!("{url}?sslmode=require"), RustlsConnect::new(Some(&ca)).unwrap()).unwrap());
    // A server whose certificate does not chain to the bundle is refused, not used unverified.
    let other = server.other_ca().expect("another CA");
    let err = PostgresStore::connect(&format!("{url}?sslmode=require&sslrootcert={}", other.display())).unwrap_err();
    assert!(err.to_string().to_lowercase().contains("certificate"), "{err}");
    // `sslmode=disable` stays plain (a private loopback server), and the default prefers TLS.
    assert!(!encrypted(&format!("{url}?sslmode=disable"), RustlsConnect::new(Some(&ca)).unwrap()).unwrap());
    assert!(encrypted(&url, RustlsConnect::new(Some(&ca)).unwrap()).unwrap());
}
