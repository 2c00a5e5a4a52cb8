//! Kubernetes Events the console records on the objects it owns (kube's
//! `Recorder`, as controller-rs does), so `kubectl describe helmchart <name>
//! -n kubebyon-<name>` on the host tells an operator what the console did.
//! Best effort: an Event that cannot be recorded never fails the work.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder as KubeRecorder, Reporter};

use crate::domain::render;

/// The Events' `reportingController`.
pub(crate) const CONTROLLER: &str = "kubebyon.io/console";

/// Why the console applied a cluster's HelmChart (its Event's reason).
pub(crate) const APPLIED: &str = "Applied";

pub(crate) struct Recorder(KubeRecorder);

impl Recorder {
    /// `instance`: this process's reconciler (`reportingInstance`).
    pub(crate) fn new(client: Client, instance: &str) -> Self {
        let reporter = Reporter { controller: CONTROLLER.into(), instance: Some(instance.into()) };
        Self(KubeRecorder::new(client, reporter))
    }

    /// A Normal Event on cluster `name`'s HelmChart.
    pub(crate) async fn on_helm_chart(&self, name: &str, uid: Option<String>, reason: &str, note: String) {
        let chart = super::apply::charts_resource();
        let regarding = ObjectReference {
            api_version: Some(chart.api_version),
            kind: Some(chart.kind),
            name: Some(name.into()),
            namespace: Some(render::namespace(name)),
            uid,
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.0.publish(&event, &regarding).await {
            tracing::debug!(cluster = name, reason, error = %e, "event not recorded");
        }
    }
}
