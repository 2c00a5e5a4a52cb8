//! MetalLB's controller (metallb/metallb v0.16.1 `controller/service.go`,
//! `internal/allocator`): reads its `IPAddressPool` objects in `metallb-system`,
//! asks [`crate::lb`] what each LoadBalancer Service gets, writes
//! `status.loadBalancer` and the `metallb.io/ip-allocated-from-pool` annotation,
//! records Normal `IPAllocated` (`Assigned IP ["…"]`) and Warning
//! `AllocationFailed` Events, and publishes each pool's assigned/available counts.
//! A class it does not serve is only logged, as MetalLB does. In-use addresses are
//! read back from the Services' status, so it keeps no state of its own.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::events::Recorder;
use crate::lb::{self, Config, Decision, Holder, InUse, Pool, Request, Sharing};

fn pool_resource() -> ApiResource {
    ApiResource {
        group: "metallb.io".into(),
        version: "v1beta1".into(),
        api_version: "metallb.io/v1beta1".into(),
        kind: "IPAddressPool".into(),
        plural: "ipaddresspools".into(),
    }
}

fn pools_api(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), lb::METALLB_NAMESPACE, &pool_resource())
}

/// Writes the command line's pools as `IPAddressPool` objects (an administrator
/// configuring MetalLB), creating `metallb-system` if needed.
pub async fn seed_pools(client: &Client, pools: &[Pool]) -> Result<()> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": lb::METALLB_NAMESPACE}});
    Api::<Namespace>::all(client.clone())
        .patch(lb::METALLB_NAMESPACE, &PatchParams::apply("hostsim").force(), &Patch::Apply(&ns))
        .await?;
    for p in pools {
        pools_api(client).patch(&p.name, &PatchParams::apply("hostsim").force(), &Patch::Apply(&p.to_object())).await?;
    }
    Ok(())
}

/// The pools as MetalLB sees them now (sorted by name: MetalLB's own order across
/// pools is unspecified). Unreadable pools are skipped with a log line.
pub async fn read_pools(client: &Client, base: &Config) -> Config {
    let mut pools = Vec::new();
    match pools_api(client).list(&ListParams::default()).await {
        Ok(list) => {
            for obj in list.items {
                let value = serde_json::to_value(&obj).unwrap_or_default();
                match Pool::from_object(&value) {
                    Ok(p) => pools.push(p),
                    Err(e) => tracing::warn!(error = %e, "IPAddressPool ignored"),
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "listing IPAddressPools"),
    }
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    Config { pools, class: base.class.clone() }
}

fn annotation<'a>(svc: &'a Service, key: &str) -> Option<&'a str> {
    let a = svc.metadata.annotations.as_ref()?;
    a.get(&format!("metallb.io/{key}")).or_else(|| a.get(&format!("metallb.universe.tf/{key}"))).map(String::as_str)
}

fn sharing(svc: &Service) -> Sharing {
    let spec = svc.spec.as_ref();
    let backend = if spec.and_then(|s| s.external_traffic_policy.as_deref()) == Some("Local") {
        let sel = spec.and_then(|s| s.selector.clone()).unwrap_or_default();
        sel.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    } else {
        String::new()
    };
    Sharing {
        key: annotation(svc, "allow-shared-ip").unwrap_or_default().to_owned(),
        backend,
        ports: spec
            .and_then(|s| s.ports.as_ref())
            .into_iter()
            .flatten()
            .map(|p| (p.protocol.clone().unwrap_or_else(|| "TCP".into()), p.port))
            .collect(),
    }
}

pub async fn sync(client: &Client, cfg: &Config, services: &[Service], events: &mut Recorder) {
    let is_lb = |s: &Service| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
    let key = |s: &Service| format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any());
    let current = |s: &Service| cfg.addresses(s).first().copied().filter(|ip| cfg.contains(*ip));
    let mut ordered: Vec<&Service> = services.iter().filter(|s| s.metadata.deletion_timestamp.is_none()).collect();
    // Services that hold an address first, oldest first (MetalLB's reprocess
    // order), so a pending Service never takes an address from a holder.
    ordered.sort_by_key(|s| (current(s).is_none(), s.metadata.creation_timestamp.clone().map(|t| t.0)));
    let mut in_use = InUse::new();
    for svc in &ordered {
        let ns = svc.namespace().unwrap_or_default();
        let name = svc.name_any();
        let uid = svc.uid().unwrap_or_default();
        let cur = current(svc);
        if !is_lb(svc) {
            // No longer a LoadBalancer: release the address (MetalLB clears the status).
            if cur.is_some() {
                write_ingress(client, &ns, &name, None, None).await;
            }
            continue;
        }
        let spec = svc.spec.as_ref();
        let share = sharing(svc);
        let req = Request {
            namespace: &ns,
            name: &name,
            class: spec.and_then(|s| s.load_balancer_class.as_deref()),
            load_balancer_ip: spec.and_then(|s| s.load_balancer_ip.as_deref()),
            ips_annotation: annotation(svc, "loadBalancerIPs"),
            pool_annotation: annotation(svc, "address-pool"),
            current: cur,
            sharing: share.clone(),
        };
        match cfg.decide(&req, &in_use) {
            Decision::Assign(ip) => {
                in_use.entry(ip).or_default().push(Holder { service: key(svc), sharing: share });
                if cur != Some(ip) {
                    tracing::info!(service = %key(svc), %ip, "assigned");
                    let pool = cfg.pool_of(ip).map(|p| p.name.clone());
                    write_ingress(client, &ns, &name, Some(cfg.ingress_for(ip)), pool).await;
                    events.clear(&uid);
                    events.normal(*svc, "IPAllocated", &format!("Assigned IP [\"{ip}\"]")).await;
                }
            }
            Decision::NotServed => {
                tracing::debug!(service = %key(svc), "filtered service: loadBalancerClass not served");
            }
            Decision::Fail { reason, message } => {
                if cur.is_some() {
                    write_ingress(client, &ns, &name, None, None).await;
                }
                events.warn(*svc, reason, &message).await;
            }
        }
    }
    publish_pool_status(client, cfg, &in_use).await;
}

/// `IPAddressPool` status: distinct addresses assigned and still available.
async fn publish_pool_status(client: &Client, cfg: &Config, in_use: &InUse) {
    for p in &cfg.pools {
        let used: BTreeSet<&Ipv4Addr> = in_use.keys().filter(|ip| p.addresses.contains(ip)).collect();
        let status = json!({"assignedIPv4": used.len(), "assignedIPv6": 0,
            "availableIPv4": p.addresses.len() - used.len(), "availableIPv6": 0});
        let api = pools_api(client);
        let Ok(Some(obj)) = api.get_opt(&p.name).await else { continue };
        if obj.data.get("status") == Some(&status) {
            continue;
        }
        if let Err(e) =
            api.patch_status(&p.name, &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await
        {
            tracing::debug!(error = %e, pool = %p.name, "pool status");
        }
    }
}

async fn write_ingress(client: &Client, ns: &str, name: &str, entry: Option<serde_json::Value>, pool: Option<String>) {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let ingress = match entry {
        Some(e) => json!([e]),
        None => json!([]),
    };
    let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
    if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await {
        tracing::warn!(error = %e, service = %format!("{ns}/{name}"), "status update failed");
        return;
    }
    let annotation = json!({"metadata": {"annotations": {"metallb.io/ip-allocated-from-pool": pool}}});
    if let Err(e) = api.patch(name, &PatchParams::default(), &Patch::Merge(annotation)).await {
        tracing::debug!(error = %e, "pool annotation");
    }
}
