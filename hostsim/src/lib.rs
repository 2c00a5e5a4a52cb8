//! KubeBYON's test host: a real etcd + kube-apiserver and upstream's own
//! controllers ([`controlplane`], [`testhost`]), and a simulated node ([`node`]):
//! what needs a machine (kubelet, kube-proxy, MetalLB's speaker, storage).
//! Not part of the console; see `docs/testing.md`.

pub mod apiproxy;
pub mod controlplane;
pub mod kubeconfig;
pub mod kubelet;
pub mod kubeproxy;
pub mod latency;
pub mod lb;
pub mod machine;
pub mod node;
pub mod pki;
pub mod testhost;
pub mod testsupport;
pub mod tls;
