//! Watch caches (kube-rs reflectors) of what the loop reads on every pass: the
//! console's HelmCharts (label `app.kubernetes.io/managed-by=kubebyon`),
//! helm-controller's Jobs and their pods (label `helmcharts.helm.cattle.io/chart`), the vCluster
//! Services, StatefulSets and pods (label `app=vcluster`) and the Nodes. One watch each; every event
//! wakes the loop. Reading a cluster then costs no API call; only `vc-<name>`
//! (read once per install Job), the Service's Events (while its address is
//! pending) and helm's log (while helm fails) are fetched.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use tokio::sync::Notify;

use super::apply::charts_resource;
use super::gather::Raw;
use crate::domain::render;

pub(crate) struct Caches {
    pub charts: Store<DynamicObject>,
    pub jobs: Store<Job>,
    /// The helm Jobs' pods (restarts tell when to read helm's log).
    pub pods: Store<Pod>,
    pub services: Store<Service>,
    /// The vCluster pods (label `app=vcluster`): which node each runs on.
    pub control_planes: Store<Pod>,
    /// The charts' StatefulSets (label `app=vcluster`): their rollout status.
    pub stateful_sets: Store<StatefulSet>,
    /// Warning Events about Services (why a LoadBalancer address is pending).
    pub events: Store<Event>,
    pub nodes: Store<Node>,
}

fn spawn<K>(api: Api<K>, cfg: watcher::Config, dyntype: K::DynamicType, wake: Arc<Notify>) -> Store<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    let writer = reflector::store::Writer::new(dyntype);
    let reader = writer.as_reader();
    tokio::spawn(async move {
        let mut stream = reflector::reflector(writer, watcher(api, cfg)).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            if ev.is_ok() {
                wake.notify_one();
            }
        }
    });
    reader
}

/// The objects of one namespace a watch holds.
fn in_namespace<K>(store: &Store<K>, ns: &str) -> Vec<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash,
{
    store.state().iter().filter(|o| o.meta().namespace.as_deref() == Some(ns)).map(|o| (**o).clone()).collect()
}

impl Caches {
    /// Starts the watches and waits until each has listed once.
    pub(crate) async fn start(client: &Client, wake: Arc<Notify>) -> Self {
        let managed = format!("{}={}", render::MANAGED_BY.0, render::MANAGED_BY.1);
        let labels = |l: &str| watcher::Config::default().labels(l);
        let helm = "helmcharts.helm.cattle.io/chart";
        let ar = charts_resource();
        let caches = Self {
            charts: spawn(
                Api::<DynamicObject>::all_with(client.clone(), &ar),
                labels(&managed),
                ar.clone(),
                wake.clone(),
            ),
            jobs: spawn(Api::<Job>::all(client.clone()), labels(helm), (), wake.clone()),
            pods: spawn(Api::<Pod>::all(client.clone()), labels(helm), (), wake.clone()),
            services: spawn(Api::<Service>::all(client.clone()), labels("app=vcluster"), (), wake.clone()),
            control_planes: spawn(Api::<Pod>::all(client.clone()), labels("app=vcluster"), (), wake.clone()),
            stateful_sets: spawn(Api::<StatefulSet>::all(client.clone()), labels("app=vcluster"), (), wake.clone()),
            events: spawn(
                Api::<Event>::all(client.clone()),
                watcher::Config::default().fields("involvedObject.kind=Service,type=Warning"),
                (),
                wake.clone(),
            ),
            nodes: spawn(Api::<Node>::all(client.clone()), watcher::Config::default(), (), wake),
        };
        let _ = caches.charts.wait_until_ready().await;
        let _ = caches.jobs.wait_until_ready().await;
        let _ = caches.pods.wait_until_ready().await;
        let _ = caches.services.wait_until_ready().await;
        let _ = caches.control_planes.wait_until_ready().await;
        let _ = caches.stateful_sets.wait_until_ready().await;
        let _ = caches.events.wait_until_ready().await;
        let _ = caches.nodes.wait_until_ready().await;
        caches
    }

    /// A cluster's HelmChart, install Job and Service as the watches last saw them.
    pub(crate) fn raw(&self, name: &str) -> Raw {
        let ns = render::namespace(name);
        let chart = self.charts.get(&ObjectRef::new_with(name, charts_resource()).within(&ns));
        let job = self.jobs.get(&ObjectRef::new(&render::helm_job(name)).within(&ns));
        let service = self.services.get(&ObjectRef::new(name).within(&ns));
        let job_pods = in_namespace(&self.pods, &ns);
        let service_events = in_namespace(&self.events, &ns)
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .collect();
        let control_plane_pods = in_namespace(&self.control_planes, &ns);
        let stateful_set = self.stateful_sets.get(&ObjectRef::new(name).within(&ns)).map(|s| (*s).clone());
        Raw {
            control_plane_pods,
            stateful_set,
            service_events: Some(service_events),
            chart: chart.map(|c| (*c).clone()),
            job: job.map(|j| (*j).clone()),
            job_pods: Some(job_pods),
            service: service.map(|s| (*s).clone()),
            secret: None,
        }
    }

    pub(crate) fn nodes(&self) -> Vec<Node> {
        self.nodes.state().iter().map(|n| (**n).clone()).collect()
    }
}
