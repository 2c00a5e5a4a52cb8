//! The LoadBalancer provider's I/O: reads every Service, asks [`crate::lb`] what
//! each should get, writes `status.loadBalancer` and records Events for Services
//! left pending. In-use addresses are read back from the Services' status, so the
//! provider keeps no state of its own (like MetalLB rebuilding from the cluster).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::events::Recorder;
use crate::lb::{Config, Decision, Request};

fn annotation<'a>(svc: &'a Service, key: &str) -> Option<&'a str> {
    let a = svc.metadata.annotations.as_ref()?;
    a.get(&format!("metallb.io/{key}"))
        .or_else(|| a.get(&format!("metallb.universe.tf/{key}")))
        .map(String::as_str)
}

pub async fn sync(client: &Client, cfg: &Config, services: &[Service], events: &mut Recorder) {
    let is_lb =
        |s: &Service| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
    let mut ordered: Vec<&Service> = services
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .collect();
    ordered.sort_by_key(|s| s.metadata.creation_timestamp.clone().map(|t| t.0));
    // Addresses Services already hold stay theirs (the oldest wins a clash), so a
    // new Service never takes an address from one processed after it.
    let mut owner: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
    for svc in ordered.iter().filter(|s| is_lb(s)) {
        if let Some(ip) = cfg
            .addresses(svc)
            .first()
            .copied()
            .filter(|ip| cfg.contains(*ip))
        {
            owner
                .entry(ip)
                .or_insert_with(|| svc.uid().unwrap_or_default());
        }
    }
    let mut in_use: BTreeSet<Ipv4Addr> = owner.keys().copied().collect();
    for svc in &ordered {
        let ns = svc.namespace().unwrap_or_default();
        let name = svc.name_any();
        let uid = svc.uid().unwrap_or_default();
        let current = cfg
            .addresses(svc)
            .first()
            .copied()
            .filter(|ip| cfg.contains(*ip));
        if !is_lb(svc) {
            // No longer a LoadBalancer: release the address (MetalLB clears the status).
            if current.is_some() {
                write_ingress(client, &ns, &name, None).await;
            }
            continue;
        }
        let own = current.filter(|ip| owner.get(ip) == Some(&uid));
        let spec = svc.spec.as_ref();
        let req = Request {
            namespace: &ns,
            name: &name,
            class: spec.and_then(|s| s.load_balancer_class.as_deref()),
            load_balancer_ip: spec.and_then(|s| s.load_balancer_ip.as_deref()),
            ips_annotation: annotation(svc, "loadBalancerIPs"),
            pool_annotation: annotation(svc, "address-pool"),
            current: own,
        };
        match cfg.decide(&req, &in_use) {
            Decision::Assign(ip) => {
                in_use.insert(ip);
                if current != Some(ip) {
                    if let Some(old) = own {
                        in_use.remove(&old);
                    }
                    tracing::info!(service = %format!("{ns}/{name}"), %ip, "assigned");
                    write_ingress(client, &ns, &name, Some(cfg.ingress_for(ip))).await;
                }
                events.clear(&uid);
            }
            Decision::NotServed(message) => {
                events
                    .warn(*svc, "LoadBalancerClassNotServed", &message)
                    .await;
            }
            Decision::Fail { reason, message } => {
                if current.is_some() {
                    if let Some(old) = own {
                        in_use.remove(&old);
                    }
                    write_ingress(client, &ns, &name, None).await;
                }
                events.warn(*svc, reason, &message).await;
            }
        }
    }
}

async fn write_ingress(client: &Client, ns: &str, name: &str, entry: Option<serde_json::Value>) {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let ingress = match entry {
        Some(e) => json!([e]),
        None => json!([]),
    };
    let patch = json!({"status": {"loadBalancer": {"ingress": ingress}}});
    if let Err(e) = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        tracing::warn!(error = %e, service = %format!("{ns}/{name}"), "status update failed");
    }
}
