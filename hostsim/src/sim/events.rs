//! Kubernetes Events, recorded once per object, reason and message (the real
//! components aggregate repeats; the simulator simply does not repeat them).

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub struct Recorder {
    client: Client,
    component: &'static str,
    seen: HashSet<(String, String, String)>,
}

impl Recorder {
    pub fn new(client: Client, component: &'static str) -> Self {
        Self {
            client,
            component,
            seen: HashSet::new(),
        }
    }

    /// Records a Warning Event about `obj`; failures to record are only logged.
    pub async fn warn<K>(&mut self, obj: &K, reason: &str, message: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        let uid = obj.uid().unwrap_or_default();
        if !self
            .seen
            .insert((uid.clone(), reason.to_owned(), message.to_owned()))
        {
            return;
        }
        tracing::warn!(object = %obj.name_any(), reason, message, "event");
        let ns = obj.namespace().unwrap_or_else(|| "default".into());
        let now = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default();
        let involved = ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(obj.name_any()),
            namespace: obj.namespace(),
            uid: Some(uid),
            resource_version: obj.resource_version(),
            field_path: None,
        };
        let body = json!({
            "metadata": {"generateName": format!("{}.", obj.name_any()), "namespace": ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": "Warning",
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
