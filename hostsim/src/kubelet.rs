//! The part of a kubelet that `kubectl logs` reaches: kube-apiserver serves
//! `pods/log` by proxying to `https://<node InternalIP>:<kubeletEndpoint.Port>/
//! containerLogs/<ns>/<pod>/<container>` (`pkg/registry/core/pod/strategy.go`
//! `LogLocation`). This serves the logs of the pods the node runs (helm Jobs) from
//! memory, over TLS with a self-signed certificate (kube-apiserver does not verify
//! the kubelet's certificate unless `--kubelet-certificate-authority` is given).
//! Query options (`tailLines`, `limitBytes`, `timestamps`, `sinceSeconds`) are
//! honoured where cheap (`tailLines`, `limitBytes`); `follow=true` streams the
//! log (chunked, as the kubelet's `ServeContainerLogs` does) until the container's
//! run ends, so `kubectl logs -f` prints helm's lines as they come.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::pki::Ca;

/// A container's log: the current run and the one before a restart.
#[derive(Clone, Default)]
struct ContainerLog {
    current: String,
    previous: Option<String>,
    /// The current run has ended (a follower stops there).
    ended: bool,
}

/// (namespace, pod, container).
type ContainerKey = (String, String, String);

#[derive(Default)]
struct Inner {
    logs: Mutex<HashMap<ContainerKey, ContainerLog>>,
    /// Woken on every append and end (followers re-read).
    changed: tokio::sync::Notify,
}

/// Container logs by (namespace, pod, container).
#[derive(Clone, Default)]
pub struct Logs(Arc<Inner>);

impl Logs {
    fn with(&self, ns: &str, pod: &str, container: &str, f: impl FnOnce(&mut ContainerLog)) {
        if let Ok(mut m) = self.0.logs.lock() {
            f(m.entry((ns.into(), pod.into(), container.into())).or_default());
        }
        self.0.changed.notify_waiters();
    }

    pub fn append(&self, ns: &str, pod: &str, container: &str, text: &str) {
        self.with(ns, pod, container, |log| log.current.push_str(text));
    }

    /// The container's run ended (exited or killed).
    pub fn end(&self, ns: &str, pod: &str, container: &str) {
        self.with(ns, pod, container, |log| log.ended = true);
    }

    /// Ends the current run's log when dropped (a task aborted mid-run).
    pub fn ends_on_drop(&self, ns: &str, pod: &str, container: &str) -> EndsOnDrop {
        EndsOnDrop { logs: self.clone(), key: (ns.into(), pod.into(), container.into()) }
    }

    /// A new pod's container starts: a pod of the same name before it (a
    /// StatefulSet's `<name>-0` made again) leaves it nothing.
    pub fn fresh(&self, ns: &str, pod: &str, container: &str) {
        self.with(ns, pod, container, |log| *log = ContainerLog::default());
    }

    /// The container's run ended and it waits to restart (CrashLoopBackOff):
    /// the kubelet then reads `lastState.terminated` for a plain read and for
    /// `--previous` alike (kubernetes v1.36 `pkg/kubelet/kubelet_pods.go`
    /// `validateContainerLogStatus`), so both give this run until the next start.
    pub fn crashed(&self, ns: &str, pod: &str, container: &str) {
        self.with(ns, pod, container, |log| {
            log.ended = true;
            log.previous = Some(log.current.clone());
        });
    }

    /// The container restarted: its log so far becomes `--previous`.
    pub fn restart(&self, ns: &str, pod: &str, container: &str) {
        self.with(ns, pod, container, |log| {
            log.previous = Some(std::mem::take(&mut log.current));
            log.ended = false;
        });
    }

    pub fn get(&self, ns: &str, pod: &str, container: &str, previous: bool) -> Option<String> {
        let m = self.0.logs.lock().ok()?;
        let log = m.get(&(ns.into(), pod.into(), container.into()))?;
        if previous { log.previous.clone() } else { Some(log.current.clone()) }
    }

    fn current(&self, key: &ContainerKey) -> Option<(String, bool)> {
        let m = self.0.logs.lock().ok()?;
        m.get(key).map(|log| (log.current.clone(), log.ended))
    }
}

/// See [`Logs::ends_on_drop`].
pub struct EndsOnDrop {
    logs: Logs,
    key: ContainerKey,
}

impl Drop for EndsOnDrop {
    fn drop(&mut self) {
        let (ns, pod, container) = &self.key;
        self.logs.end(ns, pod, container);
    }
}

/// `follow=true`: the log so far (with the query's options), then each new
/// part as it is appended, as HTTP/1.1 chunks, until the run ends.
async fn follow<W: AsyncWrite + Unpin>(conn: &mut W, logs: &Logs, key: ContainerKey, query: &str) -> Result<()> {
    conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await?;
    let mut sent = None;
    loop {
        let changed = logs.0.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let Some((text, ended)) = logs.current(&key) else { break };
        let part = match sent {
            None => apply_options(&text, query),
            Some(n) if text.len() >= n => text[n..].to_owned(),
            // Restarted: a follower of the old run stops.
            Some(_) => break,
        };
        if !part.is_empty() {
            conn.write_all(format!("{:x}\r\n{part}\r\n", part.len()).as_bytes()).await?;
            conn.flush().await?;
        }
        sent = Some(text.len());
        if ended {
            break;
        }
        tokio::select! {
            _ = &mut changed => {}
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
        }
    }
    conn.write_all(b"0\r\n\r\n").await?;
    Ok(())
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
                        match following(target, &logs) {
                            Some((key, query)) => {
                                let _ = follow(&mut conn, &logs, key, &query).await;
                            }
                            None => {
                                let _ = conn.write_all(respond(target, &logs).as_bytes()).await;
                            }
                        }
                        let _ = conn.shutdown().await;
                    }
                });
            }
        });
        Ok(Self { addr, task })
    }
}

/// A request to follow a log there is (`follow=true`, not `previous`).
fn following(target: &str, logs: &Logs) -> Option<(ContainerKey, String)> {
    let (path, query) = target.split_once('?')?;
    let params: Vec<&str> = query.split('&').collect();
    if !params.contains(&"follow=true") || params.contains(&"previous=true") {
        return None;
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ["containerLogs", ns, pod, container] = parts.as_slice() else { return None };
    let key: ContainerKey = (ns.to_string(), pod.to_string(), container.to_string());
    logs.current(&key)?;
    Some((key, query.to_owned()))
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

    /// While a crashed container waits to restart, a plain read and
    /// `--previous` both give its last run; once it runs again, `--previous`
    /// is that run and a plain read the new one.
    #[test]
    fn a_crashed_run_is_both_reads_until_the_next_start() {
        let logs = Logs::default();
        let read = |previous| logs.get("ns", "p", "c", previous);
        logs.append("ns", "p", "c", "run 1\n");
        assert_eq!(read(true), None, "no previous run yet");
        logs.crashed("ns", "p", "c");
        assert_eq!((read(false), read(true)), (Some("run 1\n".into()), Some("run 1\n".into())));
        logs.restart("ns", "p", "c");
        logs.append("ns", "p", "c", "run 2\n");
        assert_eq!((read(false), read(true)), (Some("run 2\n".into()), Some("run 1\n".into())));
        logs.crashed("ns", "p", "c");
        assert_eq!((read(false), read(true)), (Some("run 2\n".into()), Some("run 2\n".into())));
        // The pod made again under its name: a new log.
        logs.fresh("ns", "p", "c");
        assert_eq!((read(false), read(true)), (Some(String::new()), None));
    }

    async fn read_until(theirs: &mut tokio::io::DuplexStream, got: &mut Vec<u8>, want: &str) -> String {
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(got).contains(want) {
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), theirs.read(&mut buf))
                .await
                .expect("a chunk in time")
                .unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(got).into_owned()
    }

    /// `kubectl logs -f`: what is there, then each line as it comes, until the run ends.
    #[tokio::test]
    async fn follow_streams_until_the_run_ends() {
        let logs = Logs::default();
        logs.append("ns", "p", "helm", "a\n");
        assert!(following("/containerLogs/ns/p/helm?follow=true&previous=true", &logs).is_none());
        assert!(following("/containerLogs/ns/q/helm?follow=true", &logs).is_none());
        let (key, query) = following("/containerLogs/ns/p/helm?follow=true", &logs).unwrap();
        let (mut ours, mut theirs) = tokio::io::duplex(4096);
        let stream = {
            let logs = logs.clone();
            tokio::spawn(async move { follow(&mut ours, &logs, key, &query).await })
        };
        let mut got = Vec::new();
        let head = read_until(&mut theirs, &mut got, "2\r\na\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 200 OK") && head.contains("Transfer-Encoding: chunked"), "{head}");
        logs.append("ns", "p", "helm", "bc\n");
        read_until(&mut theirs, &mut got, "3\r\nbc\n\r\n").await;
        assert!(!stream.is_finished(), "still following while the run goes on");
        logs.end("ns", "p", "helm");
        let all = read_until(&mut theirs, &mut got, "0\r\n\r\n").await;
        assert!(all.ends_with("0\r\n\r\n"), "{all}");
        stream.await.unwrap().unwrap();
    }
}
