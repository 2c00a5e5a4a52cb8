//! The chart repository `https://charts.loft.sh`, answered locally the way an
//! air-gapped mirror would be: helm in the klipper-helm pod reaches it through
//! `HTTPS_PROXY` (which helm-controller copies from its own environment into every
//! Job, `setProxyEnv` in helm-controller `pkg/controllers/chart/chart.go`), and
//! trusts it through the test CA placed in the simulated image's trust store
//! (`SSL_CERT_DIR`). The proxy answers `CONNECT charts.loft.sh:443` and refuses
//! every other host with `403 Forbidden`, as a filtering proxy does. Behind the
//! tunnel: `/index.yaml` and `/charts/vcluster-<version>.tgz`, packaged by
//! `scripts/build-control-plane.sh` from the vCluster module's `chart/` folder.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::pki::Ca;

/// The host the mirror answers for.
pub const REPO_HOST: &str = "charts.loft.sh";

/// The running proxy and mirror; stops when dropped.
pub struct Mirror {
    pub addr: SocketAddr,
    /// A folder with the mirror's CA as `ca.pem` (the image's `/etc/ssl/certs`).
    pub trust_dir: PathBuf,
    task: JoinHandle<()>,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mirror {
    /// Listens on `addr`; serves the `.tgz` files of `charts_dir` with an index.
    pub async fn start(addr: SocketAddr, charts_dir: &Path, state_dir: &Path) -> Result<Self> {
        let files = load_charts(charts_dir)?;
        let ca = Ca::generate("hostsim-chart-mirror-ca")?;
        let serving = ca.issue_server(REPO_HOST, &[REPO_HOST.to_owned()])?;
        let trust_dir = state_dir.join("trust");
        std::fs::create_dir_all(&trust_dir)?;
        std::fs::write(trust_dir.join("ca.pem"), &ca.pair.cert_pem)?;
        let tls = crate::tls::server_config(&serving, &ca.pair.cert_pem)?;
        let acceptor = TlsAcceptor::from(tls.config);
        let listener = TcpListener::bind(addr).await.with_context(|| format!("chart mirror proxy on {addr}"))?;
        let addr = listener.local_addr()?;
        let files = Arc::new(files);
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else { continue };
                let (acceptor, files) = (acceptor.clone(), files.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve_proxy(conn, acceptor, files).await {
                        tracing::debug!(error = %e, "chart mirror connection");
                    }
                });
            }
        });
        Ok(Self { addr, trust_dir, task })
    }
}

/// `index.yaml` and every chart archive, by request path.
fn load_charts(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    let mut entries = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(version) = name.strip_prefix("vcluster-").and_then(|v| v.strip_suffix(".tgz")) else {
            continue;
        };
        let bytes = std::fs::read(e.path())?;
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        entries.push(serde_json::json!({
            "apiVersion": "v2", "name": "vcluster", "version": version, "appVersion": version,
            "type": "application", "digest": hex,
            "created": "2026-01-01T00:00:00Z",
            "urls": [format!("https://{REPO_HOST}/charts/{name}")],
        }));
        files.insert(format!("/charts/{name}"), bytes);
    }
    let index = serde_json::json!({
        "apiVersion": "v1", "entries": {"vcluster": entries}, "generated": "2026-01-01T00:00:00Z",
    });
    files.insert("/index.yaml".into(), serde_yaml::to_string(&index)?.into_bytes());
    Ok(files)
}

async fn serve_proxy(conn: TcpStream, acceptor: TlsAcceptor, files: Arc<BTreeMap<String, Vec<u8>>>) -> Result<()> {
    let mut conn = BufReader::new(conn);
    let head = read_head(&mut conn).await?;
    let target = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let is_connect = head.starts_with("CONNECT ");
    if !is_connect || target != format!("{REPO_HOST}:443") {
        conn.get_mut().write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await?;
        return Ok(());
    }
    conn.get_mut().write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await?;
    let tls = acceptor.accept(conn.into_inner()).await?;
    serve_files(BufReader::new(tls), &files).await
}

/// The request line and headers, up to the blank line.
async fn read_head<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> Result<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 || line == "\r\n" || line == "\n" {
            return Ok(head);
        }
        if head.len() > 16 * 1024 {
            anyhow::bail!("request head too large");
        }
        head.push_str(&line);
    }
}

async fn serve_files<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: BufReader<S>,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<()> {
    loop {
        let head = read_head(&mut s).await?;
        if head.is_empty() {
            return Ok(());
        }
        let path = head.split_whitespace().nth(1).unwrap_or_default();
        let path = path.split('?').next().unwrap_or_default();
        let out = s.get_mut();
        match files.get(path) {
            Some(body) => {
                let kind = if path.ends_with(".yaml") { "text/yaml" } else { "application/x-tar" };
                out.write_all(
                    format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n", body.len())
                        .as_bytes(),
                )
                .await?;
                out.write_all(body).await?;
            }
            None => out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found").await?,
        }
        out.flush().await?;
    }
}
