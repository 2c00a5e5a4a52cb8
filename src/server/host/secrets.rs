//! `vc-<name>`, the Secret vCluster writes its kubeconfig and credentials
//! into: read now, and remembered per cluster ([`Memo`]). Its CA and client
//! certificate change only when vCluster is installed anew (a values upgrade
//! keeps them), which a probe sees as untrusted or unauthorized: only then, or
//! on the periodic pass, is it read again. (Watching Secrets would need
//! list/watch on every Secret of the host: `vc-<name>` carries no label to
//! select it by.)

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use super::error::{Result, ignore_not_found, kube};
use super::probe::Credentials;
use crate::domain::host_objects;

/// `vc-<name>`, read now.
pub(crate) async fn read_secret(client: &Client, name: &str) -> Result<Option<Secret>> {
    let ns = host_objects::namespace(name);
    ignore_not_found(Api::<Secret>::namespaced(client.clone(), &ns).get(&host_objects::kubeconfig_secret(name)).await)
        .map_err(kube("read vc Secret"))
}

/// One key's text.
pub(crate) fn text(s: &Secret, key: &str) -> Option<String> {
    String::from_utf8(s.data.as_ref()?.get(key)?.0.clone()).ok()
}

/// The CA, client certificate and key of `vc-<name>` (its `config` repeats
/// them); `None` if any is missing or empty (the reconciler's memo may keep
/// only that they are there).
pub(crate) fn credentials(s: &Secret) -> Option<Credentials> {
    let pem = |key| text(s, key).filter(|t| !t.is_empty());
    Some(Credentials {
        ca_pem: pem("certificate-authority")?,
        cert_pem: pem("client-certificate")?,
        key_pem: pem("client-key")?,
    })
}

/// Whether `vc-<name>` holds what a kubeconfig is made of: the three
/// credentials and `config` (their values may be left out by the memo).
pub(crate) fn complete(s: &Secret) -> bool {
    ["certificate-authority", "client-certificate", "client-key", "config"]
        .iter()
        .all(|k| s.data.as_ref().is_some_and(|d| d.contains_key(*k)))
}

/// `vc-<name>` as read: when, what, and whether a probe has since doubted it.
struct Read {
    at: std::time::Instant,
    secret: Option<Secret>,
    doubted: bool,
}

/// `vc-<name>` per cluster id, as last read.
#[derive(Default)]
pub(crate) struct Memo(Mutex<BTreeMap<i64, Read>>);

/// The keys of `vc-<name>` the console reads: the credentials, and `config`
/// (the kubeconfig vCluster writes, which repeats them).
const CREDENTIAL_KEYS: [&str; 3] = ["certificate-authority", "client-certificate", "client-key"];

/// What the memo keeps of `vc-<name>`: the three credentials when they are
/// needed (a cluster whose endpoint is probed, a request reaching the
/// cluster's API), else only that they are there; `config` only as present
/// (its text repeats them, and whoever needs the text reads the Secret). No
/// metadata (managed fields, annotations). A cluster without public access
/// keeps some 60 bytes here instead of 4 KB of PEM.
fn memo_of(s: Secret, credentials: bool) -> Secret {
    let data = s.data.map(|d| {
        d.into_iter()
            .filter_map(|(k, v)| match k.as_str() {
                _ if credentials && CREDENTIAL_KEYS.contains(&k.as_str()) => Some((k, v)),
                _ if k == "config" || CREDENTIAL_KEYS.contains(&k.as_str()) => {
                    Some((k, k8s_openapi::ByteString(Vec::new())))
                }
                _ => None,
            })
            .collect()
    });
    Secret { data, ..Default::default() }
}

/// Whether the memo kept the credentials' text (not only that they are there).
fn kept_credentials(s: &Secret) -> bool {
    s.data.as_ref().is_some_and(|d| CREDENTIAL_KEYS.iter().all(|k| d.get(*k).is_some_and(|v| !v.0.is_empty())))
}

impl Memo {
    /// `vc-<name>`: read while it does not exist yet (at most once a second), or
    /// once a probe doubted it (at most once every 5 s), or when `credentials`
    /// are asked for and the memo kept only that they are there; else remembered.
    pub(crate) async fn get(&self, client: &Client, id: i64, name: &str, credentials: bool) -> Result<Option<Secret>> {
        let fresh = self.0.lock().ok().and_then(|m| {
            let memo = m.get(&id)?;
            let age = memo.at.elapsed();
            let stale = match (&memo.secret, memo.doubted) {
                (None, _) => age >= Duration::from_secs(1),
                (Some(s), _) if credentials && !kept_credentials(s) => true,
                (Some(_), true) => age >= Duration::from_secs(5),
                (Some(_), false) => false,
            };
            (!stale).then(|| memo.secret.clone())
        });
        if let Some(secret) = fresh {
            return Ok(secret);
        }
        let secret = read_secret(client, name).await?.map(|s| memo_of(s, credentials));
        if let Ok(mut m) = self.0.lock() {
            m.insert(id, Read { at: std::time::Instant::now(), secret: secret.clone(), doubted: false });
        }
        Ok(secret)
    }

    /// A probe doubted the credentials (vCluster may have new ones, a
    /// reinstall): read them again.
    pub(crate) fn doubt(&self, id: i64) {
        if let Ok(mut m) = self.0.lock()
            && let Some(memo) = m.get_mut(&id)
        {
            memo.doubted = true;
        }
    }

    /// Drops what is remembered of a removed cluster.
    pub(crate) fn forget(&self, id: i64) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(keys: &[&str]) -> Secret {
        let data = keys.iter().map(|k| (k.to_string(), ByteString(format!("{k} text").into_bytes()))).collect();
        Secret {
            data: Some(data),
            metadata: kube::api::ObjectMeta { name: Some("vc-demo".into()), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn the_secret_memo_keeps_credentials_only_when_asked_for() {
        let all = ["certificate-authority", "client-certificate", "client-key", "config", "token"];
        // (keys written, credentials asked for) -> (complete, credentials kept, credentials read back)
        for (keys, asked, complete, kept) in [
            (&all[..], true, true, true),
            (&all[..], false, true, false),
            (&all[..3], true, false, true),
            (&all[1..], false, false, false),
        ] {
            let memo = memo_of(secret(keys), asked);
            let what = format!("{keys:?} asked {asked}");
            assert_eq!(super::complete(&memo), complete, "{what}");
            assert_eq!(kept_credentials(&memo), kept, "{what}");
            assert_eq!(credentials(&memo).is_some(), kept, "{what}");
            let data = memo.data.unwrap_or_default();
            assert!(!data.contains_key("token"), "{what}: only what the console reads");
            assert!(data.get("config").is_none_or(|v| v.0.is_empty()), "{what}: config only as present");
            assert!(memo.metadata.name.is_none(), "{what}: no metadata");
        }
        // Read whole (not through the memo), a complete Secret gives its credentials.
        let whole = secret(&all);
        assert!(super::complete(&whole) && credentials(&whole).is_some());
    }
}
