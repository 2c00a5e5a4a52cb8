//! Gateway access (issue 24) on the upstream test host: clusters reached by
//! name through one shared Gateway that passes TLS through by SNI (the test
//! host's Gateway API mirror, `hostsim/src/node/gateway.rs`, on the real
//! Gateway API CRDs; the Gateway's address from the real MetalLB).
//!
//! kubectl cannot use the console's resolver and there is no root for
//! `/etc/hosts`: the tests reach `*.k.test` through a CONNECT proxy named by
//! the kubeconfig's `proxy-url` (`hostsim::testsupport::connect_proxy`), so
//! the TLS handshake inside the tunnel still carries the SNI the Gateway
//! routes by.

mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use hostsim::testhost::{Net, Simulator, TestHost};
use hostsim::testsupport as ts;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::calls::Calls;
use support::host::{Env, WAIT, env_counting, env_on, kubectl_get_ns_on, nodeport_settings, ready};

/// This binary's host: the Gateway API 1.6 standard CRDs (TLSRoute v1).
fn host() -> &'static TestHost {
    TestHost::shared(Some(Simulator::Node(Net::node_config)))
}

/// The shared Gateway's fixed address (in the host's default pool).
fn gateway_ip(net: Net) -> IpAddr {
    net.addr(226).into()
}

fn gateway_resource() -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "Gateway".into(),
        plural: "gateways".into(),
    }
}

/// A Gateway `gateway-system/<name>`: one TLS passthrough listener `tls` on
/// 443 for `*.k.test`, admitting the console's namespaces (or only its own,
/// `from: Same`), at `ip`. Waits until it has its address.
async fn apply_named_gateway(host: &TestHost, name: &str, ip: IpAddr, from: Value) {
    let client = host.client().await.unwrap();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gateway-system"}});
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    nss.patch("gateway-system", &PatchParams::apply("test").force(), &Patch::Apply(&ns)).await.unwrap();
    let gw = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": "gateway-system"},
        "spec": {
            "gatewayClassName": hostsim::node::gateway::CLASS,
            "addresses": [{"type": "IPAddress", "value": ip.to_string()}],
            "listeners": [{"name": "tls", "port": 443, "protocol": "TLS", "hostname": "*.k.test",
                           "tls": {"mode": "Passthrough"}, "allowedRoutes": {"namespaces": from}}],
        },
    });
    let api: Api<DynamicObject> = Api::namespaced_with(client, "gateway-system", &gateway_resource());
    api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&gw)).await.unwrap();
    ts::eventually("the Gateway has its address", WAIT, || async {
        let g = api.get(name).await.ok()?;
        (g.data["status"]["addresses"][0]["value"] == ip.to_string()).then_some(())
    })
    .await
    .unwrap();
}

/// The admin's Gateway `gateway-system/shared` at [`gateway_ip`].
async fn apply_gateway(host: &TestHost, from: Value) {
    apply_named_gateway(host, "shared", gateway_ip(host.net), from).await;
}

fn admit_console() -> Value {
    json!({"from": "Selector", "selector": {"matchLabels": {"app.kubernetes.io/managed-by": "kubebyon"}}})
}

/// The admin names the Gateway and the domain suffix `k.test`.
async fn offer_gateway(env: &Env) {
    offer_named_gateway(env, "shared").await;
}

async fn offer_named_gateway(env: &Env, name: &str) {
    let mut settings = nodeport_settings("");
    settings["gateway"] = json!({"namespace": "gateway-system", "name": name, "listener": "tls"});
    settings["gateway_domain_suffix"] = json!("k.test");
    let r = env.console.json("PUT", "/api/admin/system-settings", Some(&env.cookie), settings).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A kubeconfig that reaches its server through the CONNECT proxy at `proxy`.
fn through(kubeconfig: &str, proxy: SocketAddr) -> String {
    let mut out = String::new();
    for line in kubeconfig.lines() {
        out.push_str(line);
        out.push('\n');
        if let Some(indent) = line.find("server: ") {
            out.push_str(&format!("{}proxy-url: http://{proxy}\n", " ".repeat(indent)));
        }
    }
    out
}

fn proxy(host: &TestHost) -> SocketAddr {
    let listen = SocketAddr::from((host.net.addr(251), 0));
    let mut names: BTreeMap<String, IpAddr> =
        ["a.k.test", "b.k.test", "old.k.test", "none.k.test"].map(|n| (n.to_owned(), gateway_ip(host.net))).into();
    names.extend((0..20).map(|i| (format!("gw{i:02}.k.test"), gateway_ip(host.net))));
    ts::connect_proxy(listen, names).unwrap()
}

/// Two gateway clusters on one address, each reached by its own name: Ready
/// (probed through the Gateway's address with the host as SNI), the
/// downloaded kubeconfig works with kubectl (the SNI through a CONNECT
/// tunnel), a crossed one fails on the other cluster's CA; a listener that
/// stops admitting the namespace shows the Gateway's reason; gateway →
/// LoadBalancer → gateway converges and the route follows.
#[tokio::test]
async fn gateway_clusters_are_reached_by_name_through_one_address() {
    let host = host();
    apply_gateway(host, admit_console()).await;
    let env = env_on(host).await;
    offer_gateway(&env).await;
    let a = env.create("a", json!({"enabled": true, "mode": "gateway", "control_plane_host": "a.k.test"})).await;
    // The suffix fills an empty host: `<name>.<suffix>`.
    let b = env.create("b", json!({"enabled": true, "mode": "gateway"})).await;
    let ca = env.converge(a, "a Ready through the Gateway", ready).await;
    let cb = env.converge(b, "b Ready through the Gateway", ready).await;
    assert_eq!(ca["status"]["api_endpoint"], "https://a.k.test:443", "{ca}");
    assert_eq!(cb["status"]["api_endpoint"], "https://b.k.test:443", "{cb}");
    assert_eq!(cb["spec"]["public_access"]["host"], "b.k.test", "{cb}");
    assert_eq!(ca["status"]["public_access_port"], Value::Null);
    // The detail page says where the name's DNS must point: the Gateway's address.
    let page = env.console.get(&format!("/clusters/{a}"), Some(&env.cookie)).await.body;
    let dns = format!("a.k.test → {}", gateway_ip(host.net));
    assert!(page.contains(&dns), "the detail page names {dns}");

    // On the host: a ClusterIP Service and the route, as rendered.
    let client = host.client().await.unwrap();
    let svc: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "kubebyon-a");
    assert_eq!(svc.get("a").await.unwrap().spec.unwrap().type_.as_deref(), Some("ClusterIP"));
    let routes = |ns: &str| {
        let ar = ApiResource {
            group: "gateway.networking.k8s.io".into(),
            version: "v1".into(),
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "TLSRoute".into(),
            plural: "tlsroutes".into(),
        };
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
    };
    let route = routes("kubebyon-a").get("a").await.unwrap();
    assert_eq!(route.data["spec"]["hostnames"], json!(["a.k.test"]));
    assert_eq!(route.data["spec"]["parentRefs"][0]["sectionName"], "tls");
    assert_eq!(route.data["spec"]["rules"][0]["backendRefs"][0]["name"], "a");

    let proxy_at = proxy(host);
    let kc_a = env.kubeconfig(a).await;
    let kc_b = env.kubeconfig(b).await;
    assert!(kc_a.contains("server: https://a.k.test:443"), "{kc_a}");
    let listed = kubectl_get_ns_on(host, &through(&kc_a, proxy_at), "gw-a").expect("kubectl through the Gateway");
    assert!(listed.contains("namespace/default"), "{listed}");
    kubectl_get_ns_on(host, &through(&kc_b, proxy_at), "gw-b").expect("b's kubeconfig works too");
    // a's credentials and CA against b's name: b's API server answers (the
    // SNI picked it), with a certificate a's CA did not sign.
    let crossed = kc_a.replace("https://a.k.test:443", "https://b.k.test:443");
    let err =
        kubectl_get_ns_on(host, &through(&crossed, proxy_at), "gw-crossed").expect_err("a crossed kubeconfig fails");
    assert!(err.contains("certificate") || err.contains("x509"), "{err}");
    // A name no route holds: the Gateway's own default certificate (k3s's
    // Traefik), not a closed connection.
    let unrouted = kc_a.replace("https://a.k.test:443", "https://none.k.test:443");
    let err = kubectl_get_ns_on(host, &through(&unrouted, proxy_at), "gw-none").expect_err("no route for the name");
    assert!(err.contains("x509") || err.contains("certificate"), "the Gateway's default certificate: {err}");

    // The admin names a Gateway whose listener admits only its own
    // namespace: the routes follow it, and say why they are not accepted,
    // in the Gateway's words; named back, Ready again.
    apply_named_gateway(host, "narrow", host.net.addr(228).into(), json!({"from": "Same"})).await;
    offer_named_gateway(&env, "narrow").await;
    env.ctx.host.wake();
    let words = env.converge_message(a, "route_not_accepted", "NotAllowedByListeners").await;
    let page = env.console.get(&format!("/clusters/{a}"), Some(&env.cookie)).await.body;
    assert!(page.contains("allowedRoutes"), "the reason in words on the page ({words})");
    offer_gateway(&env).await;
    env.ctx.host.wake();
    env.converge(a, "a Ready again", ready).await;

    // A newer route for a's name in b's namespace, to b's API server (an
    // operator's slip, or a tenant's route). Where the Gateway serves the
    // oldest route, a keeps its name; where it serves another (k3s's Traefik
    // picks among routes for one name in its own order), a's name is
    // answered with b's certificate: "route waiting" for the grace after a's
    // route was accepted, then `route_shadowed`, in words; the Gateway back
    // to the oldest, Ready again.
    let intruder: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
        "metadata": {"name": "intruder", "namespace": "kubebyon-b"},
        "spec": {"parentRefs": [{"namespace": "gateway-system", "name": "shared", "sectionName": "tls"}],
                 "hostnames": ["a.k.test"], "rules": [{"backendRefs": [{"name": "b", "port": 443}]}]},
    }))
    .unwrap();
    routes("kubebyon-b").create(&Default::default(), &intruder).await.unwrap();
    let shared: Api<DynamicObject> =
        Api::namespaced_with(host.client().await.unwrap(), "gateway-system", &gateway_resource());
    let order =
        |o: Option<&str>| Patch::Merge(json!({"metadata": {"annotations": {hostsim::node::gateway::ROUTE_ORDER: o}}}));
    shared.patch("shared", &PatchParams::default(), &order(Some("newest"))).await.unwrap();
    env.ctx.host.wake();
    env.converge(a, "another route answers for a's name", |s| s["message"] == "route_shadowed").await;
    let page = env.console.get(&format!("/clusters/{a}"), Some(&env.cookie)).await.body;
    assert!(page.contains("another TLSRoute with the same hostname"), "the page says why in words");
    shared.patch("shared", &PatchParams::default(), &order(None)).await.unwrap();
    env.ctx.host.wake();
    env.converge(a, "a Ready again, its route the oldest", ready).await;
    routes("kubebyon-b").delete("intruder", &Default::default()).await.unwrap();

    // The Gateway publishes a name (type Hostname), as a cloud load
    // balancer's implementation does: while the name does not resolve, the
    // cluster waits for the Gateway's address; once it does, the probe goes
    // through what it resolves to, and the page says where DNS must point.
    let gateways: Api<DynamicObject> =
        Api::namespaced_with(host.client().await.unwrap(), "gateway-system", &gateway_resource());
    let named = |name: Option<&str>| {
        Patch::Merge(json!({"metadata": {"annotations": {hostsim::node::gateway::ADDRESS_HOSTNAME: name}}}))
    };
    gateways.patch("shared", &PatchParams::default(), &named(Some("gw-lb.invalid"))).await.unwrap();
    env.ctx.host.wake();
    env.converge(a, "waiting while the Gateway's name does not resolve", |s| s["message"] == "gateway_pending").await;
    env.ctx.host.resolver.insert("gw-lb.invalid", gateway_ip(host.net));
    env.ctx.host.wake();
    env.converge(a, "a Ready through the Gateway's name", ready).await;
    let page = env.console.get(&format!("/clusters/{a}"), Some(&env.cookie)).await.body;
    assert!(page.contains("a.k.test → gw-lb.invalid"), "the detail page names the Gateway's name");
    gateways.patch("shared", &PatchParams::default(), &named(None)).await.unwrap();
    env.ctx.host.wake();

    // gateway → LoadBalancer → gateway.
    let lb_ip = host.net.addr(227).to_string();
    env.patch(a, json!({"enabled": true, "mode": "loadbalancer", "control_plane_host": lb_ip})).await;
    let c = env.converge(a, "a as a LoadBalancer", ready).await;
    assert_eq!(c["status"]["api_endpoint"], format!("https://{lb_ip}:443"));
    ts::eventually("the route is gone", WAIT, || async {
        routes("kubebyon-a").get_opt("a").await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
    kubectl_get_ns_on(host, &env.kubeconfig(a).await, "gw-a-lb").expect("the LoadBalancer kubeconfig works");
    env.patch(a, json!({"enabled": true, "mode": "gateway", "control_plane_host": "a.k.test"})).await;
    env.converge(a, "a through the Gateway again", ready).await;
    kubectl_get_ns_on(host, &through(&env.kubeconfig(a).await, proxy_at), "gw-a-again").expect("gateway again");
    assert_eq!(svc.get("a").await.unwrap().spec.unwrap().type_.as_deref(), Some("ClusterIP"));
}

/// The console's routes come from a watch (listed and watched by label):
/// with a gateway cluster Ready, the observer's passes read the Gateway but
/// no TLSRoute by GET (before: one GET per gateway cluster per pass).
#[tokio::test]
async fn the_observer_reads_routes_from_a_watch() {
    static CALLS: Calls = Calls::new();
    let host = host();
    apply_gateway(host, admit_console()).await;
    let env = env_counting(host, &CALLS).await;
    offer_gateway(&env).await;
    let body = json!({"enabled": true, "mode": "gateway", "control_plane_host": "watched.k.test"});
    let id = env.create("watched", body).await;
    env.converge(id, "Ready through the Gateway", ready).await;
    let kinds = CALLS.by_kind();
    assert!(kinds.contains("LIST tlsroutes") && kinds.contains("WATCH tlsroutes"), "the routes' watch: {kinds}");
    CALLS.reset();
    // Full passes every 500 ms here (the tests' resync): each observes the cluster.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let kinds = CALLS.by_kind();
    assert!(kinds.contains("GET gateways"), "the passes ran and read the Gateway: {kinds}");
    assert!(!kinds.contains("GET tlsroutes"), "a route read by GET: {kinds}");
}

/// A host with the Gateway API 1.4 experimental CRDs serves TLSRoute only as
/// v1alpha2 and v1alpha3: the console writes v1alpha3, and the cluster is Ready.
#[tokio::test]
async fn an_older_gateway_api_gets_v1alpha3_routes() {
    let guard = TestHost::start(Some(Simulator::Node(|net: Net| hostsim::node::Config {
        gateway_api: Some("v1.4.1-experimental".into()),
        ..net.node_config()
    })))
    .expect("own host");
    let host = &guard.host;
    apply_gateway(host, admit_console()).await;
    let env = env_on(host).await;
    offer_gateway(&env).await;
    let id = env.create("old", json!({"enabled": true, "mode": "gateway"})).await;
    let c = env.converge(id, "Ready through the Gateway", ready).await;
    assert_eq!(c["status"]["api_endpoint"], "https://old.k.test:443");
    let out = ts::kubectl(
        &host.kubeconfig,
        &[
            "get",
            "tlsroutes.gateway.networking.k8s.io",
            "old",
            "-n",
            "kubebyon-old",
            "-o",
            "json",
            "--show-managed-fields",
        ],
    )
    .expect("kubectl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let route: Value = serde_json::from_slice(&out.stdout).unwrap();
    let managed: Vec<&str> = route["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["apiVersion"].as_str())
        .collect();
    assert!(managed.contains(&"gateway.networking.k8s.io/v1alpha3"), "written as v1alpha3: {managed:?}");
    let proxy_at = proxy(host);
    kubectl_get_ns_on(host, &through(&env.kubeconfig(id).await, proxy_at), "gw-old")
        .expect("kubectl through the Gateway");
}

/// Twenty NodePort clusters moved to gateway access with the move tool: the
/// dry run names each new endpoint and keeps the old host in the
/// certificate; batches of five; each old kubeconfig and node port keeps
/// answering through the grace period (the Service stays NodePort beside
/// the route); afterwards the Services are ClusterIP and the old ports refuse.
#[tokio::test]
async fn twenty_node_port_clusters_move_to_the_gateway_and_old_kubeconfigs_last_the_grace_period() {
    let host = host();
    apply_gateway(host, admit_console()).await;
    let env = env_on(host).await;
    offer_gateway(&env).await;
    let net = host.net;
    let names: Vec<String> = (0..20).map(|i| format!("gw{i:02}")).collect();
    let mut ids = Vec::new();
    for n in &names {
        ids.push(env.create(n, json!({"enabled": true, "mode": "nodeport"})).await);
    }
    // The old endpoints, `host:port` (the node the pod runs on: no NodePort host is set).
    let mut old = Vec::new();
    for id in &ids {
        let c = env.converge(*id, "NodePort Ready", ready).await;
        let endpoint = c["status"]["api_endpoint"].as_str().expect("an endpoint").to_owned();
        old.push(endpoint.trim_start_matches("https://").to_owned());
    }
    let old_kc = [env.kubeconfig(ids[0]).await, env.kubeconfig(ids[19]).await];

    // A range hands out addresses, which a gateway cannot route by: blocked.
    let by_range =
        json!({"all": true, "target": "gateway", "hosts": {"range": format!("{}-{}", net.addr(200), net.addr(219))}});
    let plan = env.console.json("POST", "/api/admin/moves/dry-run", Some(&env.cookie), by_range).await.json();
    assert_eq!(plan["blocked"], 20, "{plan}");
    assert_eq!(plan["items"][0]["problems"], json!(["not_a_gateway_host"]), "{plan}");

    let request = json!({"all": true, "target": "gateway", "hosts": {"template": "{name}.k.test"},
        "concurrency": 5, "grace_secs": 90});
    let r = env.console.json("POST", "/api/admin/moves/dry-run", Some(&env.cookie), request.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let plan = r.json();
    assert_eq!(plan["blocked"], 0, "{plan}");
    for (i, item) in plan["items"].as_array().unwrap().iter().enumerate() {
        assert_eq!(item["new_endpoint"], format!("https://{}.k.test:443", names[i]));
        let sans = item["planned_sans"].as_array().unwrap();
        assert!(sans.contains(&json!(format!("{}.k.test", names[i]))), "{item}");
        let old_host = old[i].rsplit_once(':').unwrap().0;
        assert!(sans.contains(&json!(old_host)), "the old host stays during the grace period: {item}");
    }

    let pool = env.console.pool.clone();
    tokio::spawn(kubebyon::server::controllers::move_driver::drive(pool, std::time::Duration::from_millis(300), 120));
    let r = env.console.json("POST", "/api/admin/moves", Some(&env.cookie), request).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_i64().unwrap();
    let mut most = 0;
    let mut tried = [false, false];
    let mut answered = [false; 20];
    let view = loop {
        env.ctx.host.wake();
        let v = env.console.get(&format!("/api/admin/moves/{id}"), Some(&env.cookie)).await.json();
        most = most.max(v["counts"]["switching"].as_u64().unwrap_or(0));
        for (n, index) in [(0, 0), (1, 19)] {
            if !tried[n] && v["items"][index]["state"] == "done" {
                kubectl_get_ns_on(host, &old_kc[n], &format!("gw-old-{n}"))
                    .expect("old kubeconfig during the grace period");
                tried[n] = true;
            }
        }
        for (i, addr) in old.iter().enumerate() {
            if !answered[i] && v["items"][i]["state"] == "done" {
                assert!(!ts::refused(addr).await, "old endpoint of {}", names[i]);
                answered[i] = true;
            }
        }
        if v["finished"] == true {
            break v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(view["target"], "gateway", "{view}");
    assert_eq!(view["counts"]["done"], 20, "{view}");
    assert!((1..=5).contains(&most), "concurrency 5, saw {most} switching at once");
    assert_eq!(tried, [true, true]);
    let proxy_at = proxy(host);
    for (i, cid) in ids.iter().enumerate() {
        let c = env.converge(*cid, "Ready through the Gateway", ready).await;
        assert_eq!(c["status"]["api_endpoint"], format!("https://{}.k.test:443", names[i]));
    }
    for i in [0, 7, 19] {
        let kc = through(&env.kubeconfig(ids[i]).await, proxy_at);
        kubectl_get_ns_on(host, &kc, &format!("gw-new-{i}")).expect("new kubeconfig through the Gateway");
    }
    // The grace period over: ClusterIP, the old ports refuse, the new names still work.
    let client = host.client().await.unwrap();
    for (i, addr) in old.iter().enumerate() {
        let svc: Api<k8s_openapi::api::core::v1::Service> =
            Api::namespaced(client.clone(), &format!("kubebyon-{}", names[i]));
        ts::eventually(
            "ClusterIP and the old port refused after the grace period",
            std::time::Duration::from_secs(120),
            || async {
                env.ctx.host.wake();
                let t = svc.get(&names[i]).await.ok()?.spec?.type_;
                (t.as_deref() == Some("ClusterIP") && ts::refused(addr).await).then_some(())
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}: {}", names[i]));
    }
    assert!(kubectl_get_ns_on(host, &old_kc[0], "gw-old-after").is_err(), "old kubeconfig refused");
    env.converge(ids[0], "Ready after the grace period", ready).await;
    kubectl_get_ns_on(host, &through(&env.kubeconfig(ids[0]).await, proxy_at), "gw-new-after")
        .expect("still reached by name");
}
