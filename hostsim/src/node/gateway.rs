//! A Gateway API implementation for TLS passthrough, **mirrored** from the
//! specification (not upstream code): k3s's Traefik (`github.com/traefik/traefik/v3`)
//! does not build from the module proxy here — v3.7.13's `go get` fails on its
//! `replace`d modules (`github.com/traefik/traefik/dynamic/ext`,
//! `github.com/abbot/go-http-auth`) and on dependency versions the proxy
//! refuses (alidns, dnsimple, akamai edgegrid, …) — and its data path dials pod
//! or cluster IPs, which this simulated network does not route (docs/testing.md).
//!
//! What it follows (`sigs.k8s.io/gateway-api` v1.6.3 type docs):
//! - `GatewayClass` whose `controllerName` is [`CONTROLLER`]: `Accepted=True`
//!   (`apis/v1/gatewayclass_types.go`);
//! - each `Gateway` of such a class gets a LoadBalancer Service
//!   (`<gateway>-gateway`, one port per listener port; `spec.addresses` of type
//!   `IPAddress` become MetalLB's `loadBalancerIPs`), which the real MetalLB
//!   controller gives an address; the Gateway's status carries it
//!   (`status.addresses`), `Accepted=True`, `Programmed` True once addressed,
//!   and per listener `supportedKinds`, `attachedRoutes` and conditions
//!   (`apis/v1/gateway_types.go`);
//! - each `TLSRoute` parent status (`apis/v1/shared_types.go`,
//!   `RouteConditionType`): `Accepted=False` with `NoMatchingParent` (no
//!   listener of that `sectionName`/port), `NotAllowedByListeners` (no
//!   listener whose protocol, `allowedRoutes.namespaces` and `kinds` admit
//!   it), `NoMatchingListenerHostname` (hostnames do not intersect); else
//!   `Accepted=True`; `ResolvedRefs=False`/`BackendNotFound` when the
//!   backend Service is missing, `RefNotPermitted` across namespaces (this
//!   mirror reads no ReferenceGrant), else True;
//! - the data path: on the Gateway's address and each TLS `Passthrough`
//!   listener's port, the ClientHello's SNI picks the attached route whose
//!   hostname matches, and the TLS stream goes untouched to the backend
//!   Service's ready endpoint (as kube-proxy resolves it); a wildcard
//!   hostname routes the names under it ([`hostname_intersection`],
//!   [`route_for`]). No route for the name: k3s's Traefik's answer, its
//!   default certificate and a 404 ([`default_certificate`]). Route changes
//!   apply in place: a listener is never closed or rebound while its address
//!   is wanted.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};

use serde_json::{Value, json};
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The `controllerName` this mirror implements.
pub const CONTROLLER: &str = "kubebyon.io/hostsim-gateway";
/// The GatewayClass the host seeds (as k3s's Traefik chart installs `traefik`).
pub const CLASS: &str = "hostsim";
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway annotation: publish this name as the Gateway's address (type
/// `Hostname`) instead of its IP; the data path still listens on the IP.
pub const ADDRESS_HOSTNAME: &str = "hostsim.kubebyon.io/address-hostname";

/// A Gateway annotation: which of several routes for one hostname its data
/// path serves. Unset or `oldest`: the oldest, as gateway-api's conflict rule
/// says; `newest`: the newest — k3s's Traefik follows no such rule, its TCP
/// router picks among routes for one SNI in whatever order its rules sort
/// (`pkg/muxer/tcp/mux.go`), so any of them may answer; `newest` is the case
/// where the console's own, older route loses. Statuses are the same either
/// way (every route is `Accepted`, as Traefik reports them).
pub const ROUTE_ORDER: &str = "hostsim.kubebyon.io/route-order";

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A condition as `metav1.Condition` (all required fields).
fn condition(type_: &str, ok: bool, reason: &str, message: &str, generation: Option<i64>, now: &str) -> Value {
    json!({
        "type": type_, "status": if ok { "True" } else { "False" }, "reason": reason, "message": message,
        "observedGeneration": generation.unwrap_or(0), "lastTransitionTime": now,
    })
}

/// A wildcard-aware hostname match (`*.k.test` matches `a.k.test`, one label or more).
pub fn hostname_matches(listener: Option<&str>, host: &str) -> bool {
    match listener {
        None => true,
        Some(l) => match l.strip_prefix("*.") {
            Some(suffix) => {
                let host = host.to_ascii_lowercase();
                host.strip_suffix(&suffix.to_ascii_lowercase())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
            }
            None => l.eq_ignore_ascii_case(host),
        },
    }
}

/// The names a listener's hostname and a route's hostname both cover, as the
/// most specific of the two (gateway-api v1.6.3 `apis/v1/tlsroute_types.go`
/// `Hostnames` and `apis/v1/gateway_types.go` `Listener.Hostname`: a listener
/// `test.example.com` admits a route naming `test.example.com` or
/// `*.example.com`; a listener `*.example.com` admits `test.example.com` and
/// `*.example.com`; wildcards intersect when one's suffix holds the other's).
/// `None`: they do not intersect. No listener hostname admits every name.
pub fn hostname_intersection(listener: Option<&str>, route: &str) -> Option<String> {
    let route = route.to_ascii_lowercase();
    let Some(listener) = listener.map(str::to_ascii_lowercase) else { return Some(route) };
    let covers = |wild: &str, name: &str| hostname_matches(Some(wild), name.trim_start_matches("*."));
    match (listener.starts_with("*."), route.starts_with("*.")) {
        (false, false) => (listener == route).then_some(route),
        (true, false) => hostname_matches(Some(&listener), &route).then_some(route),
        (false, true) => hostname_matches(Some(&route), &listener).then_some(listener),
        // `*.a.k.test` within `*.k.test`: the narrower one.
        (true, true) if listener == route => Some(route),
        (true, true) if covers(&listener, &route) => Some(route),
        (true, true) if covers(&route, &listener) => Some(listener),
        (true, true) => None,
    }
}

/// Whether a label selector matches `labels` (`matchLabels`, `matchExpressions`).
fn selector_matches(sel: &Value, labels: &BTreeMap<String, String>) -> bool {
    let ml = sel["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str()));
    let me = items(&sel["matchExpressions"]).iter().all(|e| {
        let key = s(&e["key"]);
        let vals: Vec<&str> = items(&e["values"]).iter().map(s).collect();
        match s(&e["operator"]) {
            "In" => labels.get(key).is_some_and(|v| vals.contains(&v.as_str())),
            "NotIn" => labels.get(key).is_none_or(|v| !vals.contains(&v.as_str())),
            "Exists" => labels.contains_key(key),
            "DoesNotExist" => !labels.contains_key(key),
            _ => false,
        }
    });
    ml && me
}

/// What the sync reads.
pub struct World<'a> {
    pub classes: &'a [Value],
    pub gateways: &'a [Value],
    pub routes: &'a [Value],
    /// Namespace name → labels.
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// `namespace/name` of every Service.
    pub services: &'a BTreeSet<String>,
    /// The Gateway LoadBalancer Services' ingress addresses, by `namespace/gateway`.
    pub addresses: &'a BTreeMap<String, Ipv4Addr>,
    pub now: &'a str,
}

/// What the sync writes, and where the data path routes.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// (class name, status).
    pub class_status: Vec<(String, Value)>,
    /// (namespace, name, status).
    pub gateway_status: Vec<(String, String, Value)>,
    /// LoadBalancer Services to apply.
    pub services: Vec<Value>,
    /// (namespace, name, status) of routes.
    pub route_status: Vec<(String, String, Value)>,
    /// (listen address, SNI host, backend Service `namespace/name`, port).
    pub sni: Vec<(SocketAddr, String, String, i64)>,
}

fn ours<'a>(w: &World<'a>) -> BTreeSet<&'a str> {
    w.classes
        .iter()
        .filter(|c| s(&c["spec"]["controllerName"]) == CONTROLLER)
        .map(|c| s(&c["metadata"]["name"]))
        .collect()
}

/// Pure: the statuses, Services and SNI table for a world.
pub fn plan(w: &World<'_>) -> Plan {
    let mut p = Plan::default();
    let classes = ours(w);
    for c in w.classes.iter().filter(|c| classes.contains(s(&c["metadata"]["name"]))) {
        let g = c["metadata"]["generation"].as_i64();
        p.class_status.push((
            s(&c["metadata"]["name"]).to_owned(),
            json!({"conditions": [condition("Accepted", true, "Accepted", "Handled by the test host's gateway", g, w.now)]}),
        ));
    }
    let gateways: Vec<&Value> =
        w.gateways.iter().filter(|g| classes.contains(s(&g["spec"]["gatewayClassName"]))).collect();
    // Routes attached per (gateway key, listener name).
    let mut attached: BTreeMap<(String, String), i64> = BTreeMap::new();
    // Listen addresses whose Gateway serves the newest of several routes ([`ROUTE_ORDER`]).
    let mut newest: BTreeSet<SocketAddr> = BTreeSet::new();
    // Several routes for one hostname: the oldest wins, then `{namespace}/{name}`
    // in alphabetical order (gateway-api v1.6.3 `apis/v1/gateway_types.go`,
    // the conflict rule its Route types share); routes are read in that order.
    let mut routes: Vec<&Value> = w.routes.iter().collect();
    routes.sort_by_key(|r| {
        let m = &r["metadata"];
        (s(&m["creationTimestamp"]).to_owned(), s(&m["namespace"]).to_owned(), s(&m["name"]).to_owned())
    });
    for r in routes {
        let (rns, rname) = (s(&r["metadata"]["namespace"]), s(&r["metadata"]["name"]));
        let generation = r["metadata"]["generation"].as_i64();
        let hostnames: Vec<&str> = items(&r["spec"]["hostnames"]).iter().map(s).collect();
        let mut parents = Vec::new();
        for pr in items(&r["spec"]["parentRefs"]) {
            if pr.get("kind").is_some_and(|k| k != "Gateway") {
                continue;
            }
            let gns = pr["namespace"].as_str().unwrap_or(rns);
            let Some(gw) = gateways
                .iter()
                .find(|g| s(&g["metadata"]["namespace"]) == gns && s(&g["metadata"]["name"]) == s(&pr["name"]))
            else {
                continue; // not one of ours: its implementation writes this parent's status
            };
            let listeners: Vec<&Value> = items(&gw["spec"]["listeners"])
                .iter()
                .filter(|l| pr.get("sectionName").is_none_or(|n| l["name"] == *n))
                .filter(|l| pr.get("port").is_none_or(|port| l["port"] == *port))
                .collect();
            let admits = |l: &&&Value| {
                let from = l["allowedRoutes"]["namespaces"]["from"].as_str().unwrap_or("Same");
                let ns_ok = match from {
                    "All" => true,
                    "Selector" => w
                        .namespaces
                        .get(rns)
                        .is_some_and(|labels| selector_matches(&l["allowedRoutes"]["namespaces"]["selector"], labels)),
                    _ => rns == gns,
                };
                let kinds = items(&l["allowedRoutes"]["kinds"]);
                let kind_ok = kinds.is_empty() || kinds.iter().any(|k| k["kind"] == "TLSRoute");
                l["protocol"] == "TLS" && l["tls"]["mode"] == "Passthrough" && ns_ok && kind_ok
            };
            let allowed: Vec<&&Value> = listeners.iter().filter(admits).collect();
            // Per listener, the names it serves this route by (none: no intersection).
            let served = |l: &Value| -> Vec<String> {
                let lh = l["hostname"].as_str();
                if hostnames.is_empty() {
                    return vec![lh.unwrap_or("*").to_ascii_lowercase()];
                }
                hostnames.iter().filter_map(|h| hostname_intersection(lh, h)).collect()
            };
            let matching: Vec<&&Value> = allowed.iter().copied().filter(|l| !served(l).is_empty()).collect();
            let accepted = match (listeners.is_empty(), allowed.is_empty(), matching.is_empty()) {
                (true, _, _) => condition(
                    "Accepted",
                    false,
                    "NoMatchingParent",
                    "no listener of that name or port",
                    generation,
                    w.now,
                ),
                (_, true, _) => condition(
                    "Accepted",
                    false,
                    "NotAllowedByListeners",
                    "no TLS passthrough listener admits routes from this namespace",
                    generation,
                    w.now,
                ),
                (_, _, true) => condition(
                    "Accepted",
                    false,
                    "NoMatchingListenerHostname",
                    "no listener hostname matches the route's hostnames",
                    generation,
                    w.now,
                ),
                _ => condition("Accepted", true, "Accepted", "", generation, w.now),
            };
            let backends: Vec<&Value> =
                items(&r["spec"]["rules"]).iter().flat_map(|rule| items(&rule["backendRefs"])).collect();
            let unresolved = backends.iter().find_map(|b| {
                let bns = b["namespace"].as_str().unwrap_or(rns);
                if bns != rns {
                    Some(("RefNotPermitted", "backends in other namespaces need a ReferenceGrant"))
                } else if !w.services.contains(&format!("{bns}/{}", s(&b["name"]))) {
                    Some(("BackendNotFound", "the backend Service does not exist"))
                } else {
                    None
                }
            });
            let resolved = match unresolved {
                Some((reason, message)) => condition("ResolvedRefs", false, reason, message, generation, w.now),
                None => condition("ResolvedRefs", true, "ResolvedRefs", "", generation, w.now),
            };
            let ok = accepted["status"] == "True" && resolved["status"] == "True";
            if ok {
                let key = format!("{gns}/{}", s(&gw["metadata"]["name"]));
                for l in &matching {
                    *attached.entry((key.clone(), s(&l["name"]).to_owned())).or_default() += 1;
                    let (Some(ip), Some(port), Some(b)) = (
                        w.addresses.get(&key),
                        l["port"].as_u64().and_then(|p| u16::try_from(p).ok()),
                        backends.first(),
                    ) else {
                        continue;
                    };
                    if gw["metadata"]["annotations"][ROUTE_ORDER] == "newest" {
                        newest.insert(SocketAddr::from((*ip, port)));
                    }
                    for h in served(l) {
                        p.sni.push((
                            SocketAddr::from((*ip, port)),
                            h,
                            format!("{rns}/{}", s(&b["name"])),
                            b["port"].as_i64().unwrap_or(443),
                        ));
                    }
                }
            }
            parents.push(json!({"parentRef": pr, "controllerName": CONTROLLER, "conditions": [accepted, resolved]}));
        }
        // Parents of other implementations are kept as they wrote them.
        let mut all: Vec<Value> =
            items(&r["status"]["parents"]).iter().filter(|p| p["controllerName"] != CONTROLLER).cloned().collect();
        if parents.is_empty() && all.len() == items(&r["status"]["parents"]).len() {
            continue;
        }
        all.extend(parents);
        p.route_status.push((rns.to_owned(), rname.to_owned(), json!({"parents": all})));
    }
    for g in gateways {
        let (ns, name) = (s(&g["metadata"]["namespace"]), s(&g["metadata"]["name"]));
        let key = format!("{ns}/{name}");
        let generation = g["metadata"]["generation"].as_i64();
        let ports: BTreeSet<i64> = items(&g["spec"]["listeners"]).iter().filter_map(|l| l["port"].as_i64()).collect();
        let mut annotations = serde_json::Map::new();
        let ips: Vec<&str> = items(&g["spec"]["addresses"])
            .iter()
            .filter(|a| a["type"].as_str().is_none_or(|t| t == "IPAddress"))
            .map(|a| s(&a["value"]))
            .collect();
        if !ips.is_empty() {
            annotations.insert("metallb.io/loadBalancerIPs".into(), ips.join(",").into());
        }
        p.services.push(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("{name}-gateway"), "namespace": ns, "annotations": annotations,
                         "labels": {"gateway.networking.k8s.io/gateway-name": name}},
            "spec": {"type": "LoadBalancer",
                     "ports": ports.iter().map(|p| json!({"name": format!("p{p}"), "port": p, "protocol": "TCP"})).collect::<Vec<_>>()},
        }));
        let address = w.addresses.get(&key);
        let listeners: Vec<Value> = items(&g["spec"]["listeners"])
            .iter()
            .map(|l| {
                let supported = l["protocol"] == "TLS" && l["tls"]["mode"] == "Passthrough";
                let n = attached.get(&(key.clone(), s(&l["name"]).to_owned())).copied().unwrap_or(0);
                json!({
                    "name": l["name"], "attachedRoutes": n,
                    "supportedKinds": if supported { json!([{"group": GROUP, "kind": "TLSRoute"}]) } else { json!([]) },
                    "conditions": [
                        if supported { condition("Accepted", true, "Accepted", "", generation, w.now) }
                        else { condition("Accepted", false, "UnsupportedProtocol", "this test host's gateway does TLS passthrough only", generation, w.now) },
                        condition("Programmed", supported && address.is_some(), if address.is_some() { "Programmed" } else { "Pending" }, "", generation, w.now),
                        condition("ResolvedRefs", true, "ResolvedRefs", "", generation, w.now),
                    ],
                })
            })
            .collect();
        // Some implementations publish a name, not an IP (a cloud load
        // balancer's; gateway-api v1.6 `AddressType` `Hostname`): on demand,
        // once the address is there, that name instead.
        let named = g["metadata"]["annotations"][ADDRESS_HOSTNAME].as_str();
        let addresses: Vec<Value> = match (address, named) {
            (Some(_), Some(name)) => vec![json!({"type": "Hostname", "value": name})],
            _ => address.iter().map(|ip| json!({"type": "IPAddress", "value": ip.to_string()})).collect(),
        };
        p.gateway_status.push((
            ns.to_owned(),
            name.to_owned(),
            json!({
                "addresses": addresses,
                "conditions": [
                    condition("Accepted", true, "Accepted", "", generation, w.now),
                    match address {
                        Some(_) => condition("Programmed", true, "Programmed", "", generation, w.now),
                        None => condition("Programmed", false, "AddressNotAssigned", "waiting for the LoadBalancer address", generation, w.now),
                    },
                ],
                "listeners": listeners,
            }),
        ));
    }
    // The oldest route holds each (address, hostname); the newest where the
    // Gateway asks for it (routes were read oldest first).
    let mut seen = BTreeSet::new();
    let mut held: Vec<_> = std::mem::take(&mut p.sni);
    let last_first: Vec<_> = held.iter().rev().filter(|(l, ..)| newest.contains(l)).cloned().collect();
    held.retain(|(l, ..)| !newest.contains(l));
    p.sni = last_first
        .into_iter()
        .chain(held)
        .filter(|(listen, host, _, _)| seen.insert((*listen, host.clone())))
        .collect();
    p
}

/// The server name of a TLS ClientHello (RFC 8446 §4.1.2, RFC 6066 §3), if
/// `buf` holds a whole one.
pub fn sni(buf: &[u8]) -> Option<String> {
    // record: type 22, version(2), length(2); handshake: type 1, length(3)
    if buf.len() < 9 || buf[0] != 22 || buf[5] != 1 {
        return None;
    }
    let mut i = 9 + 2 + 32; // client_version, random
    let skip8 = |i: &mut usize| -> Option<()> {
        *i += 1 + usize::from(*buf.get(*i)?);
        Some(())
    };
    let skip16 = |i: &mut usize| -> Option<()> {
        *i += 2 + usize::from(u16::from_be_bytes([*buf.get(*i)?, *buf.get(*i + 1)?]));
        Some(())
    };
    skip8(&mut i)?; // session id
    skip16(&mut i)?; // cipher suites
    skip8(&mut i)?; // compression methods
    let end = i + 2 + usize::from(u16::from_be_bytes([*buf.get(i)?, *buf.get(i + 1)?]));
    i += 2;
    while i + 4 <= end.min(buf.len()) {
        let kind = u16::from_be_bytes([buf[i], buf[i + 1]]);
        let len = usize::from(u16::from_be_bytes([buf[i + 2], buf[i + 3]]));
        let body = buf.get(i + 4..i + 4 + len)?;
        if kind == 0 {
            // server_name_list: length(2), then type(1) = 0 host_name, length(2), name
            let n = usize::from(u16::from_be_bytes([*body.get(3)?, *body.get(4)?]));
            return body.get(5..5 + n).and_then(|b| std::str::from_utf8(b).ok()).map(str::to_ascii_lowercase);
        }
        i += 4 + len;
    }
    None
}

/// SNI host → backend address, shared by a listener and the sync that updates it.
type Routes = std::sync::Arc<std::sync::RwLock<BTreeMap<String, SocketAddr>>>;

/// The running SNI listeners: listen address → (SNI host → backend address).
/// A listener stays up while its address is wanted and its routes change in
/// place: a route added or removed elsewhere never drops a connection or
/// refuses a new one (as a real Gateway's data plane reloads its config).
#[derive(Default)]
pub struct SniProxy {
    running: BTreeMap<SocketAddr, (Routes, JoinHandle<()>)>,
}

impl SniProxy {
    /// Makes the listeners equal `table`; returns addresses that could not listen.
    pub async fn sync(
        &mut self,
        mut table: BTreeMap<SocketAddr, BTreeMap<String, SocketAddr>>,
    ) -> Vec<(SocketAddr, std::io::Error)> {
        self.running.retain(|addr, (routes, task)| match table.remove(addr) {
            Some(wanted) => {
                if let Ok(mut r) = routes.write()
                    && *r != wanted
                {
                    tracing::info!(listen = %addr, routes = ?wanted, "gateway: routes updated");
                    *r = wanted;
                }
                true
            }
            None => {
                task.abort();
                false
            }
        });
        let mut failed = Vec::new();
        for (addr, wanted) in table {
            match TcpListener::bind(addr).await {
                Ok(listener) => {
                    tracing::info!(listen = %addr, routes = ?wanted, "gateway: routing by SNI");
                    let routes: Routes = std::sync::Arc::new(std::sync::RwLock::new(wanted));
                    let task = tokio::spawn(serve(listener, routes.clone()));
                    self.running.insert(addr, (routes, task));
                }
                Err(e) => failed.push((addr, e)),
            }
        }
        failed
    }
}

impl Drop for SniProxy {
    fn drop(&mut self) {
        for (_, (_, task)) in std::mem::take(&mut self.running) {
            task.abort();
        }
    }
}

/// The backend for a server name: the exact name, else the narrowest wildcard
/// (`*.a.k.test` before `*.k.test`), else a route for any name (`*`).
pub fn route_for(routes: &BTreeMap<String, SocketAddr>, host: Option<&str>) -> Option<SocketAddr> {
    if let Some(host) = host {
        if let Some(b) = routes.get(host) {
            return Some(*b);
        }
        let mut rest = host;
        while let Some((_, parent)) = rest.split_once('.') {
            if let Some(b) = routes.get(&format!("*.{parent}")) {
                return Some(*b);
            }
            rest = parent;
        }
    }
    routes.get("*").copied()
}

/// What k3s's Traefik does with a TLS connection no passthrough route takes:
/// its HTTPS entry point terminates it with Traefik's self-signed default
/// certificate (`CN=TRAEFIK DEFAULT CERT`, `pkg/tls/generate/generate.go`)
/// and answers `404 page not found` (no router matches).
async fn default_certificate(inbound: TcpStream) {
    static DEFAULT: std::sync::OnceLock<Option<std::sync::Arc<rustls::ServerConfig>>> = std::sync::OnceLock::new();
    let config = DEFAULT.get_or_init(|| {
        let ca = crate::pki::Ca::generate("TRAEFIK DEFAULT CERT").ok()?;
        let name = format!("{:x}.traefik.default", fastrand::u64(..));
        let pair = ca.issue_server("TRAEFIK DEFAULT CERT", &[name]).ok()?;
        crate::tls::server_config(&pair, &ca.pair.cert_pem).ok().map(|t| t.config)
    });
    let Some(config) = config.clone() else { return };
    let Ok(Ok(mut tls)) = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio_rustls::TlsAcceptor::from(config).accept(inbound),
    )
    .await
    else {
        return;
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    if let Ok(Ok(n)) = tokio::time::timeout(std::time::Duration::from_secs(5), tls.read(&mut buf)).await
        && n > 0
    {
        let body = "404 page not found\n";
        let head = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = tls.write_all(format!("{head}{body}").as_bytes()).await;
    }
    let _ = tls.shutdown().await;
}

async fn serve(listener: TcpListener, routes: Routes) {
    // Dropping the set (the address no longer wanted) closes its connections.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut inbound, _)) = accepted else { continue };
                let routes = routes.clone();
                conns.spawn(async move {
                    // Peek (the bytes stay for the backend) until the ClientHello is whole.
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut host = None;
                    for _ in 0..50 {
                        let Ok(n) = inbound.peek(&mut buf).await else { return };
                        if n == 0 { return; }
                        host = sni(&buf[..n]);
                        if host.is_some() || n >= 5 && n >= 5 + usize::from(u16::from_be_bytes([buf[3], buf[4]])) { break; }
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    let backend = routes.read().ok().and_then(|r| route_for(&r, host.as_deref()));
                    let Some(backend) = backend else {
                        default_certificate(inbound).await;
                        return;
                    };
                    if let Ok(mut outbound) = TcpStream::connect(backend).await {
                        let _ = copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_hostnames() {
        assert!(hostname_matches(Some("*.k.test"), "a.k.test"));
        assert!(hostname_matches(Some("*.k.test"), "a.b.k.test"));
        assert!(!hostname_matches(Some("*.k.test"), "k.test"));
        assert!(hostname_matches(Some("a.k.test"), "A.k.test"));
        assert!(hostname_matches(None, "x.example"));
    }

    /// Listener × route hostnames, as gateway-api v1.6.3's `Hostnames` docs list them.
    #[test]
    fn listener_and_route_hostnames_intersect_as_the_spec_says() {
        let cases: [(Option<&str>, &str, Option<&str>); 11] = [
            (Some("test.example.com"), "test.example.com", Some("test.example.com")),
            (Some("test.example.com"), "*.example.com", Some("test.example.com")),
            (Some("test.example.com"), "other.example.com", None),
            (Some("test.example.com"), "*.example.net", None),
            (Some("*.example.com"), "test.example.com", Some("test.example.com")),
            (Some("*.example.com"), "*.example.com", Some("*.example.com")),
            (Some("*.example.com"), "example.com", None),
            (Some("*.example.com"), "test.example.net", None),
            (Some("*.example.com"), "*.a.example.com", Some("*.a.example.com")),
            (Some("*.a.example.com"), "*.example.com", Some("*.a.example.com")),
            (None, "Any.Example.com", Some("any.example.com")),
        ];
        for (listener, route, want) in cases {
            assert_eq!(hostname_intersection(listener, route).as_deref(), want, "{listener:?} × {route}");
        }
    }

    #[test]
    fn a_server_name_finds_its_exact_route_then_the_narrowest_wildcard() {
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let routes: BTreeMap<String, SocketAddr> =
            [("a.k.test", 1), ("*.k.test", 2), ("*.b.k.test", 3)].map(|(h, p)| (h.to_owned(), at(p))).into();
        let cases = [
            (Some("a.k.test"), Some(1)),
            (Some("x.k.test"), Some(2)),
            (Some("x.b.k.test"), Some(3)),
            (Some("k.test"), None),
            (Some("a.other"), None),
            (None, None),
        ];
        for (host, want) in cases {
            assert_eq!(route_for(&routes, host), want.map(at), "{host:?}");
        }
        let any: BTreeMap<String, SocketAddr> = [("*".to_owned(), at(9))].into();
        assert_eq!(route_for(&any, Some("z.example")), Some(at(9)));
    }

    fn world_plan(listener: Value, route_ns_labels: &[(&str, &str)], services: &[&str]) -> Plan {
        let classes = [json!({"metadata": {"name": CLASS, "generation": 1}, "spec": {"controllerName": CONTROLLER}})];
        let gateways = [json!({"metadata": {"namespace": "gw", "name": "shared", "generation": 1},
            "spec": {"gatewayClassName": CLASS, "listeners": [listener]}})];
        let routes = [json!({"metadata": {"namespace": "kubebyon-a", "name": "a", "generation": 3},
            "spec": {"parentRefs": [{"namespace": "gw", "name": "shared", "sectionName": "tls"}], "hostnames": ["a.k.test"],
                     "rules": [{"backendRefs": [{"name": "a", "port": 443}]}]}})];
        let namespaces = BTreeMap::from([(
            "kubebyon-a".to_owned(),
            route_ns_labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        )]);
        let services = services.iter().map(|s| s.to_string()).collect();
        let addresses = BTreeMap::from([("gw/shared".to_owned(), Ipv4Addr::new(127, 0, 0, 230))]);
        plan(&World {
            classes: &classes,
            gateways: &gateways,
            routes: &routes,
            namespaces: &namespaces,
            services: &services,
            addresses: &addresses,
            now: "2026-12-03T00:00:00Z",
        })
    }

    fn reasons(p: &Plan) -> Vec<String> {
        items(&p.route_status[0].2["parents"][0]["conditions"])
            .iter()
            .map(|c| format!("{}={}", s(&c["type"]), s(&c["reason"])))
            .collect()
    }

    /// Two routes for one hostname: the oldest holds it, whichever is listed
    /// first (and at one creation time, `{namespace}/{name}` alphabetically).
    #[test]
    fn the_oldest_route_holds_a_hostname() {
        let classes = [json!({"metadata": {"name": CLASS, "generation": 1}, "spec": {"controllerName": CONTROLLER}})];
        let listener = json!({"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"},
            "allowedRoutes": {"namespaces": {"from": "All"}}});
        let gateways = [json!({"metadata": {"namespace": "gw", "name": "shared", "generation": 1},
            "spec": {"gatewayClassName": CLASS, "listeners": [listener]}})];
        let route = |ns: &str, created: &str| {
            json!({"metadata": {"namespace": ns, "name": "r", "generation": 1, "creationTimestamp": created},
                "spec": {"parentRefs": [{"namespace": "gw", "name": "shared"}], "hostnames": ["same.k.test"],
                         "rules": [{"backendRefs": [{"name": "r", "port": 443}]}]}})
        };
        let namespaces = BTreeMap::new();
        let services: BTreeSet<String> = ["b-newer/r", "c-older/r", "a-tie/r"].iter().map(|s| s.to_string()).collect();
        let addresses = BTreeMap::from([("gw/shared".to_owned(), Ipv4Addr::new(127, 0, 0, 230))]);
        for (routes, winner) in [
            (vec![route("b-newer", "2026-12-03T10:00:00Z"), route("c-older", "2026-12-03T09:00:00Z")], "c-older/r"),
            (vec![route("c-older", "2026-12-03T09:00:00Z"), route("a-tie", "2026-12-03T09:00:00Z")], "a-tie/r"),
        ] {
            let p = plan(&World {
                classes: &classes,
                gateways: &gateways,
                routes: &routes,
                namespaces: &namespaces,
                services: &services,
                addresses: &addresses,
                now: "2026-12-03T11:00:00Z",
            });
            let held: Vec<&str> = p.sni.iter().map(|(_, _, b, _)| b.as_str()).collect();
            assert_eq!(held, [winner]);
        }
        // The Gateway asks for the newest (Traefik's order is its own): the newer route answers.
        let mut newest = gateways[0].clone();
        newest["metadata"]["annotations"] = json!({ROUTE_ORDER: "newest"});
        let routes = [route("b-newer", "2026-12-03T10:00:00Z"), route("c-older", "2026-12-03T09:00:00Z")];
        let p = plan(&World {
            classes: &classes,
            gateways: std::slice::from_ref(&newest),
            routes: &routes,
            namespaces: &namespaces,
            services: &services,
            addresses: &addresses,
            now: "2026-12-03T11:00:00Z",
        });
        let held: Vec<&str> = p.sni.iter().map(|(_, _, b, _)| b.as_str()).collect();
        assert_eq!(held, ["b-newer/r"]);
        let accepted = p.route_status.iter().filter(|(_, _, st)| st.to_string().contains("\"Accepted\"")).count();
        assert_eq!(accepted, 2, "both routes are reported Accepted either way");
    }

    #[test]
    fn routes_are_accepted_as_the_spec_says() {
        let tls = |from: Value, hostname: Option<&str>| {
            let mut l = json!({"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}, "allowedRoutes": {"namespaces": from}});
            if let Some(h) = hostname {
                l["hostname"] = h.into();
            }
            l
        };
        let managed = [("app.kubernetes.io/managed-by", "kubebyon")];
        let selector =
            json!({"from": "Selector", "selector": {"matchLabels": {"app.kubernetes.io/managed-by": "kubebyon"}}});
        let ok = world_plan(tls(selector.clone(), Some("*.k.test")), &managed, &["kubebyon-a/a"]);
        assert_eq!(reasons(&ok), ["Accepted=Accepted", "ResolvedRefs=ResolvedRefs"]);
        assert_eq!(
            ok.sni,
            [(SocketAddr::from(([127, 0, 0, 230], 443)), "a.k.test".into(), "kubebyon-a/a".into(), 443)]
        );
        assert_eq!(ok.gateway_status[0].2["addresses"][0]["value"], "127.0.0.230");
        assert_eq!(ok.gateway_status[0].2["listeners"][0]["attachedRoutes"], 1);
        let same = world_plan(tls(json!({"from": "Same"}), None), &managed, &["kubebyon-a/a"]);
        assert_eq!(reasons(&same)[0], "Accepted=NotAllowedByListeners");
        assert!(same.sni.is_empty());
        let other_host = world_plan(tls(selector.clone(), Some("*.other.test")), &managed, &["kubebyon-a/a"]);
        assert_eq!(reasons(&other_host)[0], "Accepted=NoMatchingListenerHostname");
        let no_backend = world_plan(tls(selector.clone(), None), &managed, &[]);
        assert_eq!(reasons(&no_backend)[1], "ResolvedRefs=BackendNotFound");
        let mut named = tls(selector, None);
        named["name"] = "other".into();
        assert_eq!(reasons(&world_plan(named, &managed, &["kubebyon-a/a"]))[0], "Accepted=NoMatchingParent");
    }

    #[test]
    fn server_names_are_read_from_client_hellos() {
        // A ClientHello as rustls writes it, for `a.k.test`.
        let name = b"a.k.test";
        let mut ext = vec![0u8, 0];
        let list_len = (name.len() + 3) as u16;
        ext.extend((list_len + 2).to_be_bytes());
        ext.extend(list_len.to_be_bytes());
        ext.push(0);
        ext.extend((name.len() as u16).to_be_bytes());
        ext.extend(name);
        let mut body = vec![3, 3];
        body.extend([0u8; 32]);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend((ext.len() as u16).to_be_bytes());
        body.extend(&ext);
        let mut hs = vec![1, 0, 0, body.len() as u8];
        hs.extend(&body);
        let mut rec = vec![22, 3, 1];
        rec.extend((hs.len() as u16).to_be_bytes());
        rec.extend(&hs);
        assert_eq!(sni(&rec).as_deref(), Some("a.k.test"));
        assert_eq!(sni(&rec[..20]), None);
        assert_eq!(sni(b"GET / HTTP/1.1\r\n"), None);
    }
}
