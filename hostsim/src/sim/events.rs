//! Kubernetes Events, recorded once per object, reason and message (the real
//! components aggregate repeats; the simulator simply does not repeat them).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub struct Recorder {
    client: Client,
    component: &'static str,
    seen: HashSet<(String, String, String)>,
}

/// Objects an Event can be about.
pub trait Involved {
    fn reference(&self) -> ObjectReference;
}

impl<K: Resource<DynamicType = ()>> Involved for K {
    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(self.name_any()),
            namespace: self.namespace(),
            uid: self.uid(),
            resource_version: self.resource_version(),
            field_path: None,
        }
    }
}

/// A HelmChart (or any dynamic object), with the type it was read with.
pub struct Dynamic<'a>(pub &'a DynamicObject);

impl Involved for Dynamic<'_> {
    fn reference(&self) -> ObjectReference {
        let o = self.0;
        let t = o.types.clone().unwrap_or_default();
        ObjectReference {
            api_version: Some(t.api_version),
            kind: Some(t.kind),
            name: Some(o.name_any()),
            namespace: o.namespace(),
            uid: o.uid(),
            resource_version: o.resource_version(),
            field_path: None,
        }
    }
}

impl Recorder {
    pub fn new(client: Client, component: &'static str) -> Self {
        Self { client, component, seen: HashSet::new() }
    }

    /// Records a Warning Event about `obj`; failures to record are only logged.
    pub async fn warn(&mut self, obj: &impl Involved, reason: &str, message: &str) {
        self.record(obj.reference(), "Warning", reason, message).await;
    }

    /// Records a Normal Event about `obj`.
    pub async fn normal(&mut self, obj: &impl Involved, reason: &str, message: &str) {
        self.record(obj.reference(), "Normal", reason, message).await;
    }

    async fn record(&mut self, involved: ObjectReference, type_: &str, reason: &str, message: &str) {
        let uid = involved.uid.clone().unwrap_or_default();
        if !self.seen.insert((uid, reason.to_owned(), message.to_owned())) {
            return;
        }
        let name = involved.name.clone().unwrap_or_default();
        tracing::info!(object = %name, type_, reason, message, "event");
        let ns = involved.namespace.clone().unwrap_or_else(|| "default".into());
        let now = OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default();
        let body = json!({
            "metadata": {"generateName": format!("{name}."), "namespace": ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let Ok(event) = serde_json::from_value::<Event>(body) else {
            return;
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(error = %e, "recording event failed");
        }
    }

    /// Forgets what was recorded about an object, so a recurrence is recorded again.
    pub fn clear(&mut self, uid: &str) {
        self.seen.retain(|(u, _, _)| u != uid);
    }
}
