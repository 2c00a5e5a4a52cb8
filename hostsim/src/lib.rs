//! KubeBYON's test host: a real etcd + kube-apiserver ([`controlplane`],
//! [`testhost`]) and a simulator of what a k3s host runs around them ([`sim`]).
//! Not part of the console; see `docs/testing.md`.

pub mod apiproxy;
pub mod chart;
pub mod controlplane;
pub mod crd;
pub mod kubeconfig;
pub mod kubelet;
pub mod kubeproxy;
pub mod latency;
pub mod lb;
pub mod node;
pub mod pki;
pub mod sim;
pub mod testhost;
pub mod testsupport;
pub mod tls;
