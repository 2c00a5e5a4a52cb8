//! The part of a kubelet that `kubectl logs` reaches: kube-apiserver serves
//! `pods/log` by proxying to `https://<node InternalIP>:<kubeletEndpoint.Port>/
//! containerLogs/<ns>/<pod>/<container>` (`pkg/registry/core/pod/strategy.go`
//! `LogLocation`). This serves the logs of the pods hostsim runs (helm Jobs) from
//! memory, over TLS with a self-signed certificate (kube-apiserver does not verify
//! the kubelet's certificate unless `--kubelet-certificate-authority` is given).
//! Query options (`tailLines`, `limitBytes`, `timestamps`, `sinceSeconds`) are
//! honoured where cheap (`tailLines`, `limitBytes`); `follow` returns what there is.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::pki::Ca;

/// A container's log: the current run and the one before a restart.
#[derive(Clone, Default)]
struct ContainerLog {
    current: String,
    previous: Option<String>,
}

/// (namespace, pod, container).
type ContainerKey = (String, String, String);

/// Container logs by (namespace, pod, container).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<HashMap<ContainerKey, ContainerLog>>>);

impl Logs {
    pub fn append(&self, ns: &str, pod: &str, container: &str, text: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.entry((ns.into(), pod.into(), container.into())).or_default().current.push_str(text);
        }
    }

    /// The container restarted: its log so far becomes `--previous`.
    pub fn restart(&self, ns: &str, pod: &str, container: &str) {
        if let Ok(mut m) = self.0.lock()
            && let Some(log) = m.get_mut(&(ns.into(), pod.into(), container.into()))
        {
            log.previous = Some(std::mem::take(&mut log.current));
        }
    }

    pub fn get(&self, ns: &str, pod: &str, container: &str, previous: bool) -> Option<String> {
        let m = self.0.lock().ok()?;
        let log = m.get(&(ns.into(), pod.into(), container.into()))?;
        if previous { log.previous.clone() } else { Some(log.current.clone()) }
    }
}

/// The kubelet's HTTPS endpoint; stops when dropped.
pub struct Kubelet {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Kubelet {
    pub async fn start(ip: IpAddr, logs: Logs) -> Result<Self> {
        let ca = Ca::generate("hostsim-kubelet-ca")?;
        let serving = ca.issue_server("kubelet", &[ip.to_string()])?;
        let tls = crate::tls::server_config(&serving, &ca.pair.cert_pem)?;
        let listener = TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(tls.config);
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, logs) = (acceptor.clone(), logs.clone());
                tokio::spawn(async move {
                    if let Ok(mut conn) = acceptor.accept(sock).await {
                        let mut buf = vec![0u8; 8192];
                        let mut n = 0;
                        while n < buf.len() {
                            match conn.read(&mut buf[n..]).await {
                                Ok(0) | Err(_) => break,
                                Ok(k) => n += k,
                            }
                            if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                                break;
                            }
                        }
                        let head = String::from_utf8_lossy(&buf[..n]);
                        let target = head.split_whitespace().nth(1).unwrap_or("/");
                        let response = respond(target, &logs);
                        let _ = conn.write_all(response.as_bytes()).await;
                        let _ = conn.shutdown().await;
                    }
                });
            }
        });
        Ok(Self { addr, task })
    }
}

/// The HTTP response for one request target.
fn respond(target: &str, logs: &Logs) -> String {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (status, body) = match parts.as_slice() {
        ["containerLogs", ns, pod, container] => {
            match logs.get(ns, pod, container, query.split('&').any(|p| p == "previous=true")) {
                Some(text) => ("200 OK", apply_options(&text, query)),
                None => (
                    "404 Not Found",
                    format!("container \"{container}\" in pod \"{pod}\" is waiting to start: ContainerCreating\n"),
                ),
            }
        }
        ["healthz"] => ("200 OK", "ok".into()),
        _ => ("404 Not Found", "404 page not found\n".into()),
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn apply_options(text: &str, query: &str) -> String {
    let mut out = text.to_owned();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("tailLines", n)) => {
                if let Ok(n) = n.parse::<usize>() {
                    let lines: Vec<&str> = out.lines().collect();
                    let start = lines.len().saturating_sub(n);
                    out = lines[start..].iter().map(|l| format!("{l}\n")).collect();
                }
            }
            Some(("limitBytes", n)) => {
                if let Ok(n) = n.parse::<usize>() {
                    let mut cut = n.min(out.len());
                    while !out.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    out.truncate(cut);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_logs_with_tail_and_limit() {
        let logs = Logs::default();
        logs.append("ns", "p", "helm", "a\nb\nc\n");
        assert!(respond("/containerLogs/ns/p/helm", &logs).ends_with("\r\n\r\na\nb\nc\n"));
        assert!(respond("/containerLogs/ns/p/helm?tailLines=1", &logs).ends_with("\r\n\r\nc\n"));
        assert!(respond("/containerLogs/ns/p/helm?limitBytes=2", &logs).ends_with("\r\n\r\na\n"));
        assert!(respond("/containerLogs/ns/q/helm", &logs).starts_with("HTTP/1.1 404"));
        assert!(respond("/other", &logs).starts_with("HTTP/1.1 404"));
        logs.restart("ns", "p", "helm");
        logs.append("ns", "p", "helm", "d\n");
        assert!(respond("/containerLogs/ns/p/helm", &logs).ends_with("\r\n\r\nd\n"));
        assert!(respond("/containerLogs/ns/p/helm?previous=true", &logs).ends_with("\r\n\r\na\nb\nc\n"));
    }
}
