//! TLS to PostgreSQL: a rustls connector for the `postgres` client, and the `sslrootcert` URL
//! parameter it reads its trusted certificates from.
//!
//! Amazon RDS for PostgreSQL 15 and later refuses unencrypted connections by default
//! (`rds.force_ssl`), and its server certificates chain to the RDS certificate authorities,
//! which no operating system trusts: the deployment template downloads AWS's bundle
//! (`global-bundle.pem`) and the store URL names it with `sslrootcert=`.
//!
//! # Guarantees
//! - With `sslmode=require` the connection is encrypted or not made. With the default
//!   (`prefer`), a server that offers TLS gets TLS, one that does not (a loopback test server)
//!   a plain connection. `sslmode=disable` never tries.
//! - Whenever TLS is used, the server's certificate is verified: it must chain to the
//!   `sslrootcert` bundle (or, without one, to the system's trusted roots) and name the host
//!   connected to. There is no mode that encrypts without verifying.
//! - `sslrootcert` is taken out of the URL before the `postgres` crate parses it (which does
//!   not know it); a bundle that cannot be read or holds no certificate is an error naming it.

use instantstart_core::store::StoreError;
use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The URL parameter naming a PEM file of trusted certificates (as in libpq).
pub(crate) const ROOT_CERT_PARAM: &str = "sslrootcert";

/// Splits `sslrootcert=<path>` off a store URL (`postgres://…?…` or `key=value …` form); the
/// rest is what the `postgres` crate parses.
pub(crate) fn split_root_cert(url: &str) -> (String, Option<PathBuf>) {
    let prefix = format!("{ROOT_CERT_PARAM}=");
    if let Some((base, query)) = url.split_once('?') {
        let mut found = None;
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| match p.strip_prefix(&prefix) {
                Some(v) => {
                    found = Some(PathBuf::from(percent_decode(v)));
                    false
                }
                None => true,
            })
            .collect();
        let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        return (rest, found);
    }
    if url.contains("://") {
        return (url.to_string(), None);
    }
    let mut found = None;
    let kept: Vec<&str> = url
        .split_whitespace()
        .filter(|p| match p.strip_prefix(&prefix) {
            Some(v) => {
                found = Some(PathBuf::from(v));
                false
            }
            None => true,
        })
        .collect();
    (kept.join(" "), found)
}

/// `%XX` escapes of a URL query value (a path with spaces or `&`).
fn percent_decode(v: &str) -> String {
    percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned()
}

/// The connector every PostgreSQL connection of the store uses (see the module docs).
#[derive(Clone)]
pub struct RustlsConnect(Arc<rustls::ClientConfig>);

impl std::fmt::Debug for RustlsConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RustlsConnect")
    }
}

impl RustlsConnect {
    /// Trusts the certificates in the PEM file `root_cert`, or the system's roots without one.
    pub fn new(root_cert: Option<&Path>) -> Result<Self, StoreError> {
        let mut roots = rustls::RootCertStore::empty();
        match root_cert {
            Some(path) => {
                let failed = |e: String| StoreError::Backend(format!("{ROOT_CERT_PARAM} {}: {e}", path.display()));
                let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(path)
                    .map_err(|e| failed(e.to_string()))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| failed(e.to_string()))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(failed("holds no certificate".into()));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
            }
        }
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::Backend(format!("TLS configuration: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(RustlsConnect(Arc::new(config)))
    }
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnectOne;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnectOne, Self::Error> {
        let name = ServerName::try_from(domain.to_string())?;
        Ok(RustlsConnectOne { config: self.0.clone(), name })
    }
}

/// One connection's handshake.
pub struct RustlsConnectOne {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnectOne
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move { connector.connect(self.name, stream).await.map(RustlsStream) })
    }
}

/// An encrypted connection.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM without channel binding (`channel_binding=prefer`, the default, accepts it).
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data-driven: (URL, what the `postgres` crate gets, the bundle named).
    #[test]
    fn the_root_certificate_parameter_is_split_off() {
        let cases = [
            ("postgres://u@h/db", "postgres://u@h/db", None),
            ("postgres://u@h/db?sslrootcert=/etc/rds.pem", "postgres://u@h/db", Some("/etc/rds.pem")),
            (
                "postgres://u@h/db?sslmode=require&sslrootcert=/a%20b.pem&application_name=x",
                "postgres://u@h/db?sslmode=require&application_name=x",
                Some("/a b.pem"),
            ),
            (
                "host=h dbname=db sslrootcert=/etc/rds.pem sslmode=require",
                "host=h dbname=db sslmode=require",
                Some("/etc/rds.pem"),
            ),
        ];
        for (url, rest, cert) in cases {
            let (got, found) = split_root_cert(url);
            assert_eq!((got.as_str(), found.as_deref()), (rest, cert.map(Path::new)), "{url}");
        }
    }

    #[test]
    fn a_bundle_without_certificates_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = RustlsConnect::new(Some(&path)).unwrap_err().to_string();
        assert!(err.contains("sslrootcert") && err.contains("empty.pem"), "{err}");
        assert!(RustlsConnect::new(Some(&dir.path().join("missing.pem"))).is_err());
    }
}
