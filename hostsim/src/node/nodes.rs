//! The host's Nodes, as k3s agents register them: one Node per `--node-ip`, named
//! after the address, `Ready`, with its InternalIP (and ExternalIP when given) and
//! the kubelet endpoint port (hostsim's [`crate::kubelet`]), so a console lists
//! node addresses as on k3s and `kubectl logs` reaches the helm Job pods.

use std::net::Ipv4Addr;

use anyhow::Result;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// One simulated node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddr {
    pub internal: Ipv4Addr,
    pub external: Option<Ipv4Addr>,
}

impl std::str::FromStr for NodeAddr {
    type Err = String;

    /// `INTERNAL[/EXTERNAL]`, e.g. `127.0.0.1` or `127.0.0.1/203.0.113.7`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (internal, external) = match s.split_once('/') {
            Some((i, e)) => (i, Some(e)),
            None => (s, None),
        };
        let ip = |a: &str| a.trim().parse::<Ipv4Addr>().map_err(|e| format!("{a:?}: {e}"));
        Ok(Self { internal: ip(internal)?, external: external.map(ip).transpose()? })
    }
}

/// The Node name for an address (k3s names nodes after their hostname).
pub fn node_name(ip: Ipv4Addr) -> String {
    format!("hostsim-{}", ip.to_string().replace('.', "-"))
}

/// What each Node offers the scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub cpu: String,
    pub memory: String,
    pub pods: String,
    pub ephemeral_storage: String,
}

impl Default for Capacity {
    /// A small k3s server: 2 CPU, 8 GiB.
    fn default() -> Self {
        Self { cpu: "2".into(), memory: "8Gi".into(), pods: "110".into(), ephemeral_storage: "50Gi".into() }
    }
}

/// Creates or refreshes every Node (labels, addresses, Ready, its kubelet's
/// port: `kubelet_ports[i]` is `nodes[i]`'s).
pub async fn register(
    client: &Client,
    nodes: &[NodeAddr],
    kubelet_ports: &[u16],
    capacity: &Capacity,
    k3s: &str,
) -> Result<()> {
    let resources = json!({
        "cpu": capacity.cpu, "memory": capacity.memory, "pods": capacity.pods,
        "ephemeral-storage": capacity.ephemeral_storage,
    });
    let api: Api<Node> = Api::all(client.clone());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    for (i, (n, kubelet_port)) in nodes.iter().zip(kubelet_ports).enumerate() {
        let name = node_name(n.internal);
        let mut labels = json!({
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "k3s",
        });
        if i == 0 {
            labels["node-role.kubernetes.io/control-plane"] = json!("true");
            labels["node-role.kubernetes.io/master"] = json!("true");
        }
        let body = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
        });
        api.patch(&name, &PatchParams::apply("hostsim").force(), &Patch::Apply(&body)).await?;
        let mut addresses = vec![json!({"type": "InternalIP", "address": n.internal.to_string()})];
        if let Some(e) = n.external {
            addresses.push(json!({"type": "ExternalIP", "address": e.to_string()}));
        }
        addresses.push(json!({"type": "Hostname", "address": name}));
        let status = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name},
            "status": {
                "addresses": addresses,
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                }],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
                "capacity": resources,
                "allocatable": resources,
                "nodeInfo": {
                    "machineID": "", "systemUUID": "", "bootID": "",
                    "kernelVersion": "", "osImage": "hostsim", "containerRuntimeVersion": "hostsim://1",
                    "kubeletVersion": k3s, "kubeProxyVersion": k3s,
                    "operatingSystem": "linux", "architecture": "amd64",
                },
            },
        });
        api.patch_status(&name, &PatchParams::apply("hostsim").force(), &Patch::Apply(&status)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses_parse() {
        let n: NodeAddr = "127.0.0.1/203.0.113.7".parse().unwrap();
        assert_eq!(n.external, Some(Ipv4Addr::new(203, 0, 113, 7)));
        assert_eq!("127.0.0.2".parse::<NodeAddr>().unwrap().external, None);
        assert!("x".parse::<NodeAddr>().is_err());
        assert_eq!(node_name(Ipv4Addr::new(127, 0, 0, 1)), "hostsim-127-0-0-1");
    }
}
