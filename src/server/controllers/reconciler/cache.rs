//! Watch caches of what the observer reads on every pass: the console's
//! HelmCharts (label `app.kubernetes.io/managed-by=kubebyon`), helm-controller's
//! Jobs and their pods (label `helmcharts.helm.cattle.io/chart`), the vCluster
//! Services, StatefulSets, pods and claims (label `app=vcluster`; the
//! StatefulSet controller gives its claims the set's selector labels), the
//! Warning Events and the `FailedBinding` Events (a claim's, which is Normal),
//! and the Nodes. One watch each (kube-rs's `watcher`): a rollout that does
//! not come up is explained from them without a request to the host.
//!
//! What is kept is only what the console reads: each object is cut
//! down on arrival ([`slim`]) to its name, namespace, UID, labels and the few
//! spec and status fields `gather` and `observe` use — no managed fields, no
//! pod templates, no container specs, no images — and objects outside the
//! console's namespaces (`kubebyon-<name>`) are not kept at all (a host's own
//! Jobs and Events match the same selectors). Objects are indexed by
//! namespace, so reading one cluster costs a lookup, not a scan.
//!
//! Every change records its namespace ([`Touched`]): the observer looks at
//! the clusters whose host objects changed, not at every cluster. A relist
//! (after a watch broke) and a Node change touch everything.

use std::collections::{BTreeMap, HashSet};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Event, Node,
    NodeCondition, NodeStatus, PersistentVolumeClaim, PersistentVolumeClaimStatus, Pod, PodCondition, PodSpec,
    PodStatus, PodTemplateSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::Notify;

use super::gather::{Listed, Raw};
use crate::domain::gateway::RouteVersion;
use crate::domain::host_objects;
use crate::domain::render;
use crate::server::host::objects::{ANNOTATION_PREFIX, FIELD_MANAGER, charts_resource, routes_resource};

/// What changed since the observer last looked: the namespaces of the
/// objects that changed, or everything.
#[derive(Default, Debug)]
pub(crate) struct Touched {
    pub namespaces: HashSet<String>,
    pub all: bool,
}

pub(crate) type SharedTouched = Arc<Mutex<Touched>>;

/// One watch's objects by namespace (`""` for cluster-scoped) and name, each
/// kept as the JSON of its slim form and decoded when read. A decoded
/// k8s-openapi object carries every optional field inline (a `Pod` is 2.4 KB
/// before its strings, a `Job` or `StatefulSet` 2.6 KB, with the pod template
/// inline) and its vectors keep the capacity the full object had; the slim
/// form's JSON is a few hundred bytes. A read decodes one cluster's few
/// objects (microseconds), far less than the host call it replaces.
pub(crate) struct Index<K> {
    objects: RwLock<Kept>,
    ready: tokio::sync::watch::Sender<bool>,
    kind: PhantomData<fn() -> K>,
}

/// Slim objects' JSON by (namespace, name).
type Kept = BTreeMap<(String, String), Box<[u8]>>;

/// The slim object's JSON (`None` only if it cannot be written, which a
/// k8s-openapi object always can).
fn encode<K: serde::Serialize>(o: &K) -> Option<Box<[u8]>> {
    serde_json::to_vec(o).ok().map(Vec::into_boxed_slice)
}

impl<K: serde::de::DeserializeOwned> Index<K> {
    fn new() -> Arc<Self> {
        Arc::new(Self { objects: RwLock::default(), ready: tokio::sync::watch::Sender::new(false), kind: PhantomData })
    }

    /// A kept object back (its slim form's JSON: the round trip is exact, so
    /// a failure means a type changed under the cache, and is said).
    fn decode(json: &[u8]) -> Option<K> {
        serde_json::from_slice(json)
            .inspect_err(
                |e| tracing::warn!(kind = std::any::type_name::<K>(), error = %e, "a cached object did not decode"),
            )
            .ok()
    }

    pub(crate) fn get(&self, ns: &str, name: &str) -> Option<K> {
        let objects = self.objects.read().ok()?;
        objects.get(&(ns.to_owned(), name.to_owned())).and_then(|j| Self::decode(j))
    }

    pub(crate) fn in_namespace(&self, ns: &str) -> Vec<K> {
        let Ok(objects) = self.objects.read() else { return Vec::new() };
        objects
            .range((ns.to_owned(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .filter_map(|(_, j)| Self::decode(j))
            .collect()
    }

    pub(crate) fn all(&self) -> Vec<K> {
        let objects = self.objects.read();
        objects.ok().map(|o| o.values().filter_map(|j| Self::decode(j)).collect()).unwrap_or_default()
    }

    /// How many objects are kept.
    pub(crate) fn len(&self) -> usize {
        self.objects.read().map(|o| o.len()).unwrap_or(0)
    }

    /// The bytes of the objects' JSON kept (what `make bench-scale` prints).
    pub(crate) fn bytes(&self) -> usize {
        self.objects.read().map(|o| o.iter().map(|((n, m), j)| n.len() + m.len() + j.len()).sum()).unwrap_or(0)
    }

    async fn wait_until_ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }
}

fn key(meta: &ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

/// Whether an object is in one of the console's namespaces (cluster-scoped
/// objects always are kept).
fn in_console_namespace(meta: &ObjectMeta) -> bool {
    meta.namespace.as_deref().is_none_or(|ns| host_objects::cluster_of_namespace(ns).is_some())
}

/// What a watched kind must be.
trait Watched:
    Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

/// Where one watch's objects go, cut down how, and whom it tells.
struct Sink<K> {
    /// The watch's name in logs (as [`Caches::sizes`] names it).
    watch: &'static str,
    index: Arc<Index<K>>,
    /// The object cut down to what is read (a function of [`slim`]).
    slim: fn(K) -> K,
    /// Whether it is kept at all (its namespace aside).
    kept: fn(&K) -> bool,
    touched: SharedTouched,
    wake: Arc<Notify>,
}

impl<K> Sink<K> {
    /// Every object of the console's namespaces kept, cut down by `slim`.
    fn new(
        watch: &'static str,
        index: Arc<Index<K>>,
        slim: fn(K) -> K,
        touched: &SharedTouched,
        wake: &Arc<Notify>,
    ) -> Self {
        Self { watch, index, slim, kept: |_| true, touched: touched.clone(), wake: wake.clone() }
    }

    /// Only the objects `kept` says.
    fn keeping(self, kept: fn(&K) -> bool) -> Self {
        Self { kept, ..self }
    }
}

/// Runs one watch into its sink until the process ends (or the task is aborted).
fn spawn<K: Watched>(api: Api<K>, cfg: watcher::Config, sink: Sink<K>) -> tokio::task::AbortHandle {
    tokio::spawn(follow(watcher(api, cfg).default_backoff().boxed(), sink)).abort_handle()
}

/// Takes a watch's events into its sink until the stream ends. An error is
/// logged and skipped: kube-rs's watcher retries with back-off (relisting
/// when it must) and the index keeps what it had meanwhile.
async fn follow<K: Watched>(
    mut stream: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin,
    sink: Sink<K>,
) {
    let Sink { watch, index, slim, kept, touched, wake } = sink;
    let mut building: Option<Kept> = None;
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(watch, error = %e, "a watch of the host failed; retrying with back-off");
                continue;
            }
        };
        let changed = match ev {
            watcher::Event::Init => {
                building = Some(BTreeMap::new());
                None
            }
            watcher::Event::InitApply(o) => {
                if in_console_namespace(o.meta())
                    && kept(&o)
                    && let o = slim(o)
                    && let Some(json) = encode(&o)
                {
                    building.get_or_insert_default().insert(key(o.meta()), json);
                }
                None
            }
            watcher::Event::InitDone => {
                if let Ok(mut objects) = index.objects.write() {
                    *objects = building.take().unwrap_or_default();
                }
                index.ready.send_replace(true);
                Some(None)
            }
            watcher::Event::Apply(o) => {
                if !in_console_namespace(o.meta()) || !kept(&o) {
                    continue;
                }
                let o = slim(o);
                let Some(json) = encode(&o) else { continue };
                let (ns, name) = key(o.meta());
                if let Ok(mut objects) = index.objects.write() {
                    objects.insert((ns.clone(), name), json);
                }
                Some(Some(ns))
            }
            watcher::Event::Delete(o) => {
                if !in_console_namespace(o.meta()) {
                    continue;
                }
                let (ns, name) = key(o.meta());
                let kept = index.objects.write().is_ok_and(|mut objects| objects.remove(&(ns.clone(), name)).is_some());
                // An object never kept (an Event about the tenant's pods) changes nothing.
                if !kept {
                    continue;
                }
                Some(Some(ns))
            }
        };
        let Some(changed) = changed else { continue };
        if let Ok(mut t) = touched.lock() {
            match changed {
                // A (re)list, or a cluster-scoped object (a Node): everything.
                None => t.all = true,
                Some(ns) if ns.is_empty() => t.all = true,
                Some(ns) => {
                    t.namespaces.insert(ns);
                }
            }
        }
        wake.notify_one();
    }
}

pub(crate) struct Caches {
    pub charts: Arc<Index<DynamicObject>>,
    pub jobs: Arc<Index<Job>>,
    /// The helm Jobs' pods (restarts tell when to read helm's log).
    pub pods: Arc<Index<Pod>>,
    pub services: Arc<Index<Service>>,
    /// The vCluster pods (label `app=vcluster`): which node each runs on.
    pub control_planes: Arc<Index<Pod>>,
    /// The charts' StatefulSets (label `app=vcluster`): their rollout status.
    pub stateful_sets: Arc<Index<StatefulSet>>,
    /// The charts' claims (label `app=vcluster`): which are still `Pending`.
    pub claims: Arc<Index<PersistentVolumeClaim>>,
    /// Warning Events (why a LoadBalancer address is pending, why a pod is
    /// not scheduled or not ready, why the StatefulSet cannot create it).
    pub warnings: Arc<Index<Event>>,
    /// `FailedBinding` Events (the persistentvolume-controller's, Normal): why a claim waits.
    pub bindings: Arc<Index<Event>>,
    pub nodes: Arc<Index<Node>>,
    /// The console's `TLSRoute`s (label `app.kubernetes.io/managed-by=kubebyon`),
    /// watched in the version the host serves once it is known ([`Caches::watch_routes`]).
    routes: Mutex<Option<RouteWatch>>,
    /// What changed since the observer last took it.
    pub touched: SharedTouched,
    wake: Arc<Notify>,
}

/// The route watch: its version, its index, and its task (aborted when the
/// host starts serving another version, or none).
struct RouteWatch {
    version: RouteVersion,
    index: Arc<Index<DynamicObject>>,
    task: tokio::task::AbortHandle,
}

impl Caches {
    /// Starts the watches and waits until each has listed once.
    pub(crate) async fn start(client: &Client, wake: Arc<Notify>) -> Self {
        let managed = format!("{}={}", render::MANAGED_BY.0, render::MANAGED_BY.1);
        let labels = |l: &str| watcher::Config::default().labels(l);
        let helm = "helmcharts.helm.cattle.io/chart";
        let touched = SharedTouched::default();
        let caches = Self {
            charts: Index::new(),
            jobs: Index::new(),
            pods: Index::new(),
            services: Index::new(),
            control_planes: Index::new(),
            stateful_sets: Index::new(),
            claims: Index::new(),
            warnings: Index::new(),
            bindings: Index::new(),
            nodes: Index::new(),
            routes: Mutex::new(None),
            touched: touched.clone(),
            wake: wake.clone(),
        };
        let (t, w) = (&touched, &wake);
        let charts = Api::<DynamicObject>::all_with(client.clone(), &charts_resource());
        spawn(charts, labels(&managed), Sink::new("helmcharts", caches.charts.clone(), slim::chart, t, w));
        spawn(Api::all(client.clone()), labels(helm), Sink::new("jobs", caches.jobs.clone(), slim::job, t, w));
        spawn(Api::all(client.clone()), labels(helm), Sink::new("job_pods", caches.pods.clone(), slim::pod, t, w));
        let vcluster = labels("app=vcluster");
        let sink = Sink::new("services", caches.services.clone(), slim::service, t, w);
        spawn(Api::all(client.clone()), vcluster.clone(), sink);
        let sink = Sink::new("vcluster_pods", caches.control_planes.clone(), slim::pod, t, w);
        spawn(Api::all(client.clone()), vcluster.clone(), sink);
        let sink = Sink::new("statefulsets", caches.stateful_sets.clone(), slim::stateful_set, t, w);
        spawn(Api::all(client.clone()), vcluster.clone(), sink);
        spawn(Api::all(client.clone()), vcluster, Sink::new("claims", caches.claims.clone(), slim::claim, t, w));
        let fields = |f: &str| watcher::Config::default().fields(f);
        let (warnings, bindings) = (fields("type=Warning"), fields("reason=FailedBinding"));
        spawn(
            Api::all(client.clone()),
            warnings,
            Sink::new("warning_events", caches.warnings.clone(), slim::event, t, w).keeping(slim::is_about_the_chart),
        );
        spawn(
            Api::all(client.clone()),
            bindings,
            Sink::new("binding_events", caches.bindings.clone(), slim::event, t, w).keeping(slim::is_about_the_chart),
        );
        let all = watcher::Config::default();
        spawn(Api::all(client.clone()), all, Sink::new("nodes", caches.nodes.clone(), slim::node, t, w));
        caches.charts.wait_until_ready().await;
        caches.jobs.wait_until_ready().await;
        caches.pods.wait_until_ready().await;
        caches.services.wait_until_ready().await;
        caches.control_planes.wait_until_ready().await;
        caches.stateful_sets.wait_until_ready().await;
        caches.claims.wait_until_ready().await;
        caches.warnings.wait_until_ready().await;
        caches.bindings.wait_until_ready().await;
        caches.nodes.wait_until_ready().await;
        caches
    }

    /// A cluster's objects as the watches last saw them.
    pub(crate) fn raw(&self, name: &str) -> Raw {
        let ns = host_objects::namespace(name);
        let warnings = self.warnings.in_namespace(&ns);
        let service_events = warnings
            .iter()
            .filter(|e| e.involved_object.kind.as_deref() == Some("Service"))
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .cloned()
            .collect();
        let bindings = self.bindings.in_namespace(&ns);
        let claims = self.claims.in_namespace(&ns);
        let workload = Listed::of(
            warnings.iter().chain(&bindings),
            claims.iter().filter(|c| c.labels().get("release").map(String::as_str) == Some(name)),
        );
        Raw {
            control_plane_pods: self.control_planes.in_namespace(&ns),
            stateful_set: self.stateful_sets.get(&ns, name),
            service_events: Some(service_events),
            chart: self.charts.get(&ns, name),
            job: self.jobs.get(&ns, &host_objects::helm_job(name)),
            job_pods: Some(self.pods.in_namespace(&ns)),
            service: self.services.get(&ns, name),
            secret: None,
            workload: Some(workload),
        }
    }

    pub(crate) fn nodes(&self) -> Vec<Node> {
        self.nodes.all()
    }

    /// Watches the console's `TLSRoute`s in `version` (the one the host
    /// serves; none: no watch), starting or replacing the watch when the
    /// version changed. Cheap when it did not.
    pub(crate) fn watch_routes(&self, client: &Client, version: Option<RouteVersion>) {
        let Ok(mut current) = self.routes.lock() else { return };
        if current.as_ref().map(|w| w.version) == version {
            return;
        }
        if let Some(old) = current.take() {
            old.task.abort();
        }
        let Some(version) = version else { return };
        let index = Index::new();
        let managed = format!("{}={}", render::MANAGED_BY.0, render::MANAGED_BY.1);
        let api = Api::<DynamicObject>::all_with(client.clone(), &routes_resource(version));
        let sink = Sink::new("tlsroutes", index.clone(), slim::route, &self.touched, &self.wake);
        let task = spawn(api, watcher::Config::default().labels(&managed), sink);
        *current = Some(RouteWatch { version, index, task });
    }

    /// A cluster's `TLSRoute` in `version` as the watch last saw it: `None`
    /// when no watch of that version has listed yet (read it from the host),
    /// `Some(None)` when the console has none of that name.
    pub(crate) fn route(&self, version: RouteVersion, ns: &str, name: &str) -> Option<Option<DynamicObject>> {
        let current = self.routes.lock().ok()?;
        let watch = current.as_ref().filter(|w| w.version == version && *w.index.ready.borrow())?;
        Some(watch.index.get(ns, name))
    }

    /// What changed since the last call.
    pub(crate) fn take_touched(&self) -> Touched {
        self.touched.lock().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default()
    }

    /// Objects and bytes kept, per watch (`/metrics`, what `make bench-scale` prints).
    pub(crate) fn sizes(&self) -> [(&'static str, usize, usize); 11] {
        fn size<K: serde::de::DeserializeOwned>(name: &'static str, i: &Index<K>) -> (&'static str, usize, usize) {
            (name, i.len(), i.bytes())
        }
        [
            size("helmcharts", &self.charts),
            size("jobs", &self.jobs),
            size("job_pods", &self.pods),
            size("services", &self.services),
            size("vcluster_pods", &self.control_planes),
            size("statefulsets", &self.stateful_sets),
            size("claims", &self.claims),
            size("warning_events", &self.warnings),
            size("binding_events", &self.bindings),
            size("nodes", &self.nodes),
            self.routes.lock().ok().and_then(|w| w.as_ref().map(|w| size("tlsroutes", &w.index))).unwrap_or((
                "tlsroutes",
                0,
                0,
            )),
        ]
    }
}

/// Each watched kind cut down to what `gather` and `observe` read. Pure.
pub(crate) mod slim {
    use super::*;

    /// A `TLSRoute`: its metadata as [`meta`] keeps it, its spec (compared
    /// with the rendering, a few hundred bytes) and its parents' status (the
    /// Gateway's conditions); nothing else.
    pub(crate) fn route(r: DynamicObject) -> DynamicObject {
        let data = serde_json::json!({
            "spec": r.data.get("spec").cloned().unwrap_or_default(),
            "status": {"parents": r.data.pointer("/status/parents").cloned().unwrap_or_default()},
        });
        DynamicObject { types: r.types, metadata: meta(r.metadata), data }
    }

    /// Name, namespace, UID, labels, creation and deletion times, generation
    /// and finalizers; no annotations, no managed fields, no owners.
    pub(crate) fn meta(m: ObjectMeta) -> ObjectMeta {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            labels: m.labels,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            generation: m.generation,
            finalizers: m.finalizers,
            ..ObjectMeta::default()
        }
    }

    /// The spec as a digest per field (compared with the rendering's: the
    /// values text is a kilobyte or two per cluster), the console's
    /// annotations and the console's own managed-fields entries (when it
    /// last applied; their field sets dropped). No status.
    pub(crate) fn chart(mut c: DynamicObject) -> DynamicObject {
        let digest = super::super::gather::spec_digest(&c).unwrap_or_default();
        let data = serde_json::json!({ super::super::gather::SPEC_DIGEST: digest });
        let annotations = c
            .metadata
            .annotations
            .take()
            .map(|a| a.into_iter().filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX)).collect());
        let managed = c.metadata.managed_fields.take().map(|m| {
            m.into_iter()
                .filter(|e| e.manager.as_deref() == Some(FIELD_MANAGER))
                .map(|mut e| {
                    e.fields_v1 = None;
                    e
                })
                .collect()
        });
        let mut metadata = meta(c.metadata);
        metadata.annotations = annotations;
        metadata.managed_fields = managed;
        DynamicObject { types: c.types, metadata, data }
    }

    pub(crate) fn job(j: Job) -> Job {
        let conditions = j.status.and_then(|s| s.conditions).map(|c| {
            c.into_iter()
                .map(|c| JobCondition { type_: c.type_, status: c.status, ..JobCondition::default() })
                .collect()
        });
        // helm-controller's expectation ([`super::super::gather::expected`]) and the proxies it passes on.
        let spec = j.spec.and_then(|s| s.template.spec).and_then(|s| s.containers.into_iter().next()).map(|c| {
            let env = c.env.map(|e| {
                e.into_iter()
                    .filter(|v| {
                        let n = v.name.as_str();
                        super::super::gather::EXPECTED_ENV.contains(&n) || super::super::gather::PROXY_ENV.contains(&n)
                    })
                    .collect()
            });
            let container = Container { name: c.name, env, ..Container::default() };
            JobSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec { containers: vec![container], ..PodSpec::default() }),
                    ..PodTemplateSpec::default()
                },
                ..JobSpec::default()
            }
        });
        Job { metadata: meta(j.metadata), spec, status: Some(JobStatus { conditions, ..JobStatus::default() }) }
    }

    /// The node it runs on, phase, conditions (type, status, message) and
    /// each container's and init container's restarts, image and trouble.
    pub(crate) fn pod(p: Pod) -> Pod {
        let spec = p.spec.map(|s| PodSpec { node_name: s.node_name, ..PodSpec::default() });
        let status = p.status.map(|s| PodStatus {
            phase: s.phase,
            conditions: s.conditions.map(|c| {
                c.into_iter()
                    .map(|c| PodCondition {
                        type_: c.type_,
                        status: c.status,
                        message: c.message,
                        ..PodCondition::default()
                    })
                    .collect()
            }),
            container_statuses: s.container_statuses.map(slim_statuses),
            init_container_statuses: s.init_container_statuses.map(slim_statuses),
            ..PodStatus::default()
        });
        Pod { metadata: meta(p.metadata), spec, status }
    }

    /// Why a container waits, how it last ended (reason, code, message): a
    /// container in trouble says so in its own words, and names its image.
    fn slim_statuses(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
        statuses
            .into_iter()
            .map(|c| {
                let state = c.state.map(|st| ContainerState {
                    waiting: st.waiting.map(|w| ContainerStateWaiting { reason: w.reason, message: w.message }),
                    ..ContainerState::default()
                });
                let last_state = c.last_state.map(|st| ContainerState {
                    terminated: st.terminated.map(|t| ContainerStateTerminated {
                        reason: t.reason,
                        exit_code: t.exit_code,
                        message: t.message,
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                });
                ContainerStatus {
                    name: c.name,
                    image: c.image,
                    restart_count: c.restart_count,
                    ready: c.ready,
                    state,
                    last_state,
                    ..ContainerStatus::default()
                }
            })
            .collect()
    }

    /// Type and ports; the status (its load balancer addresses) whole.
    pub(crate) fn service(s: Service) -> Service {
        let spec = s.spec.map(|sp| ServiceSpec {
            type_: sp.type_,
            ports: sp.ports.map(|ports| {
                ports
                    .into_iter()
                    .map(|p| ServicePort {
                        name: p.name,
                        port: p.port,
                        node_port: p.node_port,
                        ..ServicePort::default()
                    })
                    .collect()
            }),
            ..ServiceSpec::default()
        });
        Service { metadata: meta(s.metadata), spec, status: s.status }
    }

    /// Replicas; the status whole (a handful of numbers).
    pub(crate) fn stateful_set(s: StatefulSet) -> StatefulSet {
        let spec = s.spec.map(|sp| StatefulSetSpec { replicas: sp.replicas, ..StatefulSetSpec::default() });
        StatefulSet { metadata: meta(s.metadata), spec, status: s.status }
    }

    /// The phase: whether it is still `Pending`.
    pub(crate) fn claim(c: PersistentVolumeClaim) -> PersistentVolumeClaim {
        let status = c.status.map(|s| PersistentVolumeClaimStatus { phase: s.phase, ..Default::default() });
        PersistentVolumeClaim { metadata: meta(c.metadata), spec: None, status }
    }

    /// Whether an Event is about one of the chart's own objects (its Service
    /// and StatefulSet `<name>`, pods `<name>-<n>`, claims
    /// `<template>-<name>-<n>`); any other Event of the namespace is not the
    /// console's to keep (vCluster syncs the tenant's pods and Services into it).
    pub(crate) fn is_about_the_chart(e: &Event) -> bool {
        let cluster = e.metadata.namespace.as_deref().and_then(host_objects::cluster_of_namespace);
        let (kind, name) = (e.involved_object.kind.as_deref(), e.involved_object.name.as_deref());
        matches!((cluster, kind, name), (Some(c), Some(k), Some(n)) if about_the_chart(c, k, n))
    }

    /// Whether `kind`/`name` is one of the objects the chart of `cluster` makes.
    pub(crate) fn about_the_chart(cluster: &str, kind: &str, name: &str) -> bool {
        let ordinal = || {
            let (rest, n) = name.rsplit_once('-')?;
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(rest)
        };
        match kind {
            "Service" | "StatefulSet" => name == cluster,
            "Pod" => ordinal() == Some(cluster),
            "PersistentVolumeClaim" => {
                ordinal().and_then(|rest| rest.strip_suffix(cluster)).is_some_and(|t| t.len() > 1 && t.ends_with('-'))
            }
            _ => false,
        }
    }

    /// The object it is about, reason, message, type and times.
    pub(crate) fn event(e: Event) -> Event {
        Event {
            metadata: meta(e.metadata),
            involved_object: k8s_openapi::api::core::v1::ObjectReference {
                name: e.involved_object.name,
                kind: e.involved_object.kind,
                uid: e.involved_object.uid,
                ..Default::default()
            },
            reason: e.reason,
            message: e.message,
            type_: e.type_,
            first_timestamp: e.first_timestamp,
            last_timestamp: e.last_timestamp,
            event_time: e.event_time,
            series: e.series,
            ..Event::default()
        }
    }

    /// Conditions (type, status) and addresses; no images, no capacity.
    pub(crate) fn node(n: Node) -> Node {
        let status = n.status.map(|s| NodeStatus {
            conditions: s.conditions.map(|c| {
                c.into_iter()
                    .map(|c| NodeCondition { type_: c.type_, status: c.status, ..NodeCondition::default() })
                    .collect()
            }),
            addresses: s.addresses,
            ..NodeStatus::default()
        });
        Node { metadata: meta(n.metadata), spec: None, status }
    }
}

impl crate::server::host::Watched for Caches {
    fn sizes(&self) -> Vec<(&'static str, usize, usize)> {
        Caches::sizes(self).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_json() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "demo-0", "namespace": "kubebyon-demo", "uid": "u1",
                "labels": {"app": "vcluster", "release": "demo"},
                "annotations": {"big": "x".repeat(4096)},
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]},
            "spec": {"nodeName": "node-a", "containers": [{"name": "syncer", "image": "ghcr.io/loft-sh/vcluster-pro:0.30.0",
                "env": [{"name": "A", "value": "b"}], "args": ["--a", "--b"]}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-03T00:00:00Z"},
                {"type": "PodScheduled", "status": "False", "message": "0/1 nodes are available"}],
                "containerStatuses": [{"name": "syncer", "image": "i", "imageID": "sha", "ready": true, "restartCount": 2}]}
        }))
        .unwrap()
    }

    /// A watch that fails (here the API server's 403 in the stream) is
    /// logged with its name and the host's words, and the index keeps what it
    /// had and takes what comes after (kube-rs's watcher retries by itself).
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_watch_is_logged_and_the_index_keeps_what_it_had() {
        let log = crate::server::testing::LogCapture::start();

        let node = |name: &str| Node {
            metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
            ..Node::default()
        };
        let forbidden: kube::core::Status =
            serde_json::from_value(json!({"status": "Failure", "reason": "Forbidden", "code": 403,
            "message": "nodes is forbidden: User \"kubebyon\" cannot watch resource \"nodes\""}))
            .unwrap();
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(node("a"))),
            Ok(watcher::Event::InitDone),
            Err(watcher::Error::WatchError(Box::new(forbidden))),
            Ok(watcher::Event::Apply(node("b"))),
        ];
        let (index, touched) = (Index::<Node>::new(), SharedTouched::default());
        let sink = Sink::new("nodes", index.clone(), slim::node, &touched, &Arc::new(Notify::new()));
        follow(futures::stream::iter(events), sink).await;
        let names: Vec<_> = index.all().into_iter().filter_map(|n| n.metadata.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(touched.lock().unwrap().all, "a Node change touches every cluster");
        let log = log.text();
        assert!(log.contains("a watch of the host failed") && log.contains("watch=\"nodes\""), "{log}");
        assert!(log.contains("cannot watch resource"), "the host's words: {log}");
    }

    #[test]
    fn an_index_gives_back_the_slim_objects_by_namespace_and_name() {
        let index = Index::<Pod>::new();
        let pod = |ns: &str, name: &str| {
            let mut p = slim::pod(pod_json());
            (p.metadata.namespace, p.metadata.name) = (Some(ns.to_owned()), Some(name.to_owned()));
            p
        };
        let kept =
            [pod("kubebyon-a", "a-0"), pod("kubebyon-a", "a-1"), pod("kubebyon-ab", "ab-0"), pod("kubebyon-b", "b-0")];
        if let Ok(mut objects) = index.objects.write() {
            for p in &kept {
                objects.insert(key(&p.metadata), encode(p).unwrap());
            }
        }
        assert_eq!(index.get("kubebyon-a", "a-1").as_ref(), Some(&kept[1]), "decoded as kept");
        assert_eq!(index.get("kubebyon-a", "ab-0"), None);
        // A namespace's objects, not those of a namespace it is a prefix of.
        assert_eq!(index.in_namespace("kubebyon-a"), kept[..2].to_vec());
        assert_eq!(index.in_namespace("kubebyon-ab"), vec![kept[2].clone()]);
        assert_eq!(index.in_namespace("kubebyon-c"), Vec::<Pod>::new());
        assert_eq!(index.all().len(), 4);
        assert_eq!(index.len(), 4);
        // The JSON of a slim pod: a few hundred bytes, against 2.4 KB of a decoded Pod's fields alone.
        let per_pod = index.bytes() / 4;
        assert!((100..600).contains(&per_pod), "{per_pod} bytes per pod");
        assert!(std::mem::size_of::<Pod>() > 2000);
    }

    #[test]
    fn a_slim_pod_keeps_what_the_observer_reads_and_nothing_else() {
        let full = pod_json();
        let slim = slim::pod(full.clone());
        // What gather reads is the same on both.
        assert_eq!(super::super::gather::pod_facts(&slim), super::super::gather::pod_facts(&full));
        assert_eq!(slim.spec.as_ref().unwrap().node_name.as_deref(), Some("node-a"));
        assert_eq!(slim.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0].restart_count, 2);
        assert_eq!(slim.metadata.labels, full.metadata.labels);
        // What it does not read is gone.
        assert!(slim.metadata.annotations.is_none() && slim.metadata.managed_fields.is_none());
        assert!(slim.spec.as_ref().unwrap().containers.is_empty());
        let size = |p: &Pod| serde_json::to_string(p).unwrap().len();
        assert!(size(&slim) * 10 < size(&full), "{} vs {}", size(&slim), size(&full));
    }

    #[test]
    fn a_slim_chart_keeps_its_spec_digest_the_consoles_annotations_and_apply_times() {
        let chart: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
            "metadata": {"name": "demo", "namespace": "kubebyon-demo", "uid": "c1",
                "labels": {"kubebyon.io/cluster-id": "7"},
                "annotations": {"kubebyon.io/generation": "3", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "managedFields": [
                    {"manager": FIELD_MANAGER, "operation": "Apply", "time": "2026-12-03T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
                    {"manager": "helm-controller", "operation": "Update", "time": "2026-12-03T00:00:01Z"}]},
            "spec": {"chart": "vcluster", "valuesContent": "a: b"},
            "status": {"jobName": "helm-install-demo"}
        }))
        .unwrap();
        let whole = super::super::gather::spec_digest(&chart).unwrap();
        let slim = slim::chart(chart);
        assert_eq!(whole.len(), 2);
        assert_eq!(super::super::gather::spec_digest(&slim), Some(whole), "the same digests, read back");
        assert!(slim.data.get("spec").is_none() && slim.data.get("status").is_none(), "{:?}", slim.data);
        let annotations = slim.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1, "{annotations:?}");
        assert_eq!(annotations["kubebyon.io/generation"], "3");
        let managed = slim.metadata.managed_fields.unwrap();
        assert_eq!(managed.len(), 1);
        assert!(managed[0].time.is_some() && managed[0].fields_v1.is_none());
    }

    #[test]
    fn a_slim_claim_keeps_its_phase_and_a_slim_event_what_the_rollout_rule_reads() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-demo-0", "namespace": "kubebyon-demo", "uid": "c1",
                "labels": {"app": "vcluster", "release": "demo"}, "annotations": {"big": "x".repeat(1024)}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": "data-demo-0.1", "namespace": "kubebyon-demo", "annotations": {"a": "b"}},
            "involvedObject": {"kind": "PersistentVolumeClaim", "name": "data-demo-0", "uid": "c1", "apiVersion": "v1"},
            "reason": "FailedBinding", "type": "Normal", "source": {"component": "persistentvolume-controller"},
            "message": "no persistent volumes available for this claim and no storage class is set",
            "lastTimestamp": "2026-12-04T00:00:00Z", "count": 7
        }))
        .unwrap();
        let whole = super::super::gather::Listed::of([&event], [&claim]);
        assert!(slim::is_about_the_chart(&event), "about the chart's claim");
        let (event, claim) = (slim::event(event), slim::claim(claim));
        let kept = super::super::gather::Listed::of([&event], [&claim]);
        assert_eq!(kept, whole);
        assert_eq!(kept.pending_claims(), ["c1"]);
        assert!(claim.spec.is_none() && claim.metadata.annotations.is_none() && event.source.is_none());
    }

    #[test]
    fn only_events_about_the_charts_own_objects_are_kept() {
        for (kind, name, kept) in [
            ("Service", "demo", true),
            ("StatefulSet", "demo", true),
            ("Pod", "demo-0", true),
            ("Pod", "demo-12", true),
            ("PersistentVolumeClaim", "data-demo-0", true),
            ("PersistentVolumeClaim", "demo-0", false),
            ("PersistentVolumeClaim", "-demo-0", false),
            ("Pod", "demo-", false),
            ("Pod", "demo-x", false),
            ("Pod", "demo", false),
            ("Pod", "api-0", false),
            // What vCluster syncs from the tenant: `<name>-x-<namespace>-x-<vcluster>`.
            ("Pod", "demo-0-x-default-x-demo", false),
            ("Service", "demo-x-default-x-demo", false),
            ("Service", "demo-headless", false),
            ("Node", "demo", false),
            ("StatefulSet", "demo2", false),
        ] {
            assert_eq!(slim::about_the_chart("demo", kind, name), kept, "{kind} {name}");
        }
        let event = |ns: &str| -> Event {
            serde_json::from_value(json!({"metadata": {"name": "e", "namespace": ns},
                "involvedObject": {"kind": "Pod", "name": "demo-0"}, "type": "Warning"}))
            .unwrap()
        };
        assert!(slim::is_about_the_chart(&event("kubebyon-demo")));
        assert!(!slim::is_about_the_chart(&event("kubebyon-other")), "another cluster's namespace");
    }

    #[test]
    fn only_the_consoles_namespaces_are_kept() {
        let meta = |ns: Option<&str>| ObjectMeta { namespace: ns.map(str::to_owned), ..ObjectMeta::default() };
        assert!(in_console_namespace(&meta(Some("kubebyon-demo"))));
        assert!(in_console_namespace(&meta(None)), "cluster-scoped (Nodes)");
        assert!(!in_console_namespace(&meta(Some("kube-system"))));
        assert!(!in_console_namespace(&meta(Some("kubebyon-"))));
    }
}
