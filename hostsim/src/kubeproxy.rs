//! kube-proxy's part: node ports and LoadBalancer ingress addresses forwarding to
//! the Service's endpoint. A listener is closed (with its connections) as soon as
//! the Service no longer asks for it, so an old endpoint really stops answering.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// One address to listen on and where to send its connections.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    pub listen: SocketAddr,
    pub backend: SocketAddr,
    /// `namespace/name` of the Service, for messages.
    pub service: String,
}

/// The set of running forwarders.
#[derive(Default)]
pub struct Proxy {
    running: BTreeMap<SocketAddr, (Rule, JoinHandle<()>)>,
}

impl Proxy {
    /// Makes the running forwarders equal `rules`. Returns the rules that could
    /// not listen, with the error (they are retried next time).
    pub async fn sync(&mut self, rules: Vec<Rule>) -> Vec<(Rule, std::io::Error)> {
        let wanted: BTreeMap<SocketAddr, Rule> = rules.into_iter().map(|r| (r.listen, r)).collect();
        self.running.retain(|addr, (rule, task)| {
            let keep = wanted.get(addr) == Some(rule);
            if !keep {
                task.abort();
            }
            keep
        });
        let mut failed = Vec::new();
        for (addr, rule) in wanted {
            if self.running.contains_key(&addr) {
                continue;
            }
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    tracing::info!(listen = %addr, backend = %rule.backend, service = %rule.service, "forwarding");
                    let task = tokio::spawn(forward(listener, rule.backend));
                    self.running.insert(addr, (rule, task));
                }
                Err(e) => failed.push((rule, e)),
            }
        }
        failed
    }

    pub fn listening(&self) -> Vec<SocketAddr> {
        self.running.keys().copied().collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for (_, (_, task)) in std::mem::take(&mut self.running) {
            task.abort();
        }
    }
}

async fn forward(listener: TcpListener, backend: SocketAddr) {
    // Dropping the set (when this task is aborted) aborts every open connection.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut inbound, _)) = accepted else { continue };
                conns.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(backend).await {
                        let _ = copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
