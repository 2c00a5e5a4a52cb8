//! The names of a cluster's objects on the host: its namespace, helm's Job
//! and the Secret vCluster writes its kubeconfig to. Pure, shared by the
//! console's writes and reads, the forms' planned names and the tests.

/// The host namespace of a cluster (its HelmChart, Service and Secrets).
pub(crate) fn namespace(name: &str) -> String {
    format!("kubebyon-{name}")
}

/// The cluster a host namespace is [`namespace`] of (by name alone: whether
/// the console made it is the reader's to check).
pub(crate) fn cluster_of_namespace(ns: &str) -> Option<&str> {
    ns.strip_prefix("kubebyon-").filter(|n| !n.is_empty())
}

/// helm-controller's Job for the cluster's HelmChart (named after the cluster):
/// `helm-install-<chart>`, in [`namespace`].
pub(crate) fn helm_job(name: &str) -> String {
    format!("helm-install-{name}")
}

/// The Secret vCluster writes its kubeconfig to: `vc-<release>`, in [`namespace`].
pub(crate) fn kubeconfig_secret(name: &str) -> String {
    format!("vc-{name}")
}
