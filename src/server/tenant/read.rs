//! Bounded reads from a virtual cluster's API server. The tenant is
//! cluster-admin there, so whatever the console lists is theirs to make huge:
//! kube-rs's `Api::list` collects a whole answer, copies it and parses it
//! (about three times the JSON in memory), and a page of 100 objects of
//! 1.5 MiB is 150 MiB. Here every list is paged (`limit`/`continue`), each
//! answer is cut at a byte cap *as it arrives* (`http_body_util::Limited`),
//! a list stops past an item cap, each page is mapped to what the caller
//! keeps before the next is asked for, and lists that need only names ask
//! for metadata alone (`PartialObjectMetadataList`). Past a cap the caller
//! gets [`ReadError::TooLarge`], which users see as
//! `ErrorCode::VirtualAnswerTooLarge` (translated), never a half list.

use http_body_util::{BodyExt, Limited};
use hyper::body::Bytes;
use kube::api::{ListParams, ObjectList, PartialObjectMeta};
use kube::core::{Request, Resource, Status};
use serde::de::DeserializeOwned;

/// How much of one list the console reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Objects asked for per page (`limit`).
    pub page: u32,
    /// Bytes one page's answer may have.
    pub page_bytes: usize,
    /// Objects the whole list may have.
    pub items: usize,
}

const MIB: usize = 1 << 20;

/// One object's answer (etcd's default object limit is 1.5 MiB).
pub(crate) const OBJECT_BYTES: usize = 2 * MIB;

/// An error answer (a `Status`): a few KiB when honest.
const ERROR_BYTES: usize = 64 << 10;

/// Join token Secrets (label-selected; ~1 KiB each as the console writes them).
pub(crate) const TOKENS: Caps = Caps { page: 100, page_bytes: 2 * MIB, items: 1_000 };
/// Kubelet bootstrap CSRs (~2 KiB each; kept up to an hour once approved).
pub(crate) const CSRS: Caps = Caps { page: 100, page_bytes: 2 * MIB, items: 1_000 };
/// Nodes, whole (a Node with its image list is 5–20 KiB).
pub(crate) const NODES: Caps = Caps { page: 50, page_bytes: 2 * MIB, items: 1_000 };
/// Names only (metadata): Nodes' names, the pods on a node being drained.
pub(crate) const NAMES: Caps = Caps { page: 250, page_bytes: 2 * MIB, items: 5_000 };

#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An answer over its byte cap, or a list over its item cap.
    #[error("the answer is over the console's cap ({0})")]
    TooLarge(&'static str),
}

impl ReadError {
    /// The API server's `Status` code, when it answered with one.
    pub(crate) fn api_code(&self) -> Option<u16> {
        match self {
            Self::Kube(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    }
}

/// Every `K` that `lp` selects (in `namespace`, or all), each mapped by `keep`
/// as its page arrives (`None`: dropped), within `caps`.
pub(crate) async fn list<K, T>(
    client: &kube::Client,
    namespace: Option<&str>,
    lp: &ListParams,
    caps: Caps,
    keep: impl FnMut(K) -> Option<T>,
) -> Result<Vec<T>, ReadError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned,
{
    let request = Request::new(K::url_path(&(), namespace));
    pages(client, |lp| request.list(lp), lp, caps, keep).await
}

/// As [`list`], the objects' metadata only.
pub(crate) async fn list_metadata<K, T>(
    client: &kube::Client,
    namespace: Option<&str>,
    lp: &ListParams,
    caps: Caps,
    keep: impl FnMut(PartialObjectMeta<K>) -> Option<T>,
) -> Result<Vec<T>, ReadError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned,
{
    let request = Request::new(K::url_path(&(), namespace));
    pages(client, |lp| request.list_metadata(lp), lp, caps, keep).await
}

async fn pages<I: Clone + DeserializeOwned, T>(
    client: &kube::Client,
    build: impl Fn(&ListParams) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    lp: &ListParams,
    caps: Caps,
    mut keep: impl FnMut(I) -> Option<T>,
) -> Result<Vec<T>, ReadError> {
    let mut lp = lp.clone().limit(caps.page);
    let mut seen = 0usize;
    let mut out = Vec::new();
    loop {
        let request = build(&lp).map_err(kube::Error::BuildRequest)?;
        let page: ObjectList<I> = parse(&Box::pin(fetch(client, request, caps.page_bytes)).await?)?;
        seen += page.items.len();
        if seen > caps.items {
            return Err(ReadError::TooLarge("items"));
        }
        out.extend(page.items.into_iter().filter_map(&mut keep));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp.continue_token = Some(token),
            _ => return Ok(out),
        }
    }
}

/// `K` named `name` (in `namespace`, or cluster-wide), if there is one, its
/// answer within [`OBJECT_BYTES`].
pub(crate) async fn get_opt<K>(
    client: &kube::Client,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<K>, ReadError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let request = Request::new(K::url_path(&(), namespace)).get(name, &Default::default());
    found(get(client, request.map_err(kube::Error::BuildRequest)?).await)
}

/// Whether `K` named `name` exists (its metadata only).
pub(crate) async fn exists<K>(client: &kube::Client, namespace: Option<&str>, name: &str) -> Result<bool, ReadError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned,
{
    let request = Request::new(K::url_path(&(), namespace)).get_metadata(name, &Default::default());
    let meta: Option<PartialObjectMeta<K>> = found(get(client, request.map_err(kube::Error::BuildRequest)?).await)?;
    Ok(meta.is_some())
}

async fn get<K: DeserializeOwned>(client: &kube::Client, request: http::Request<Vec<u8>>) -> Result<K, ReadError> {
    parse(&Box::pin(fetch(client, request, OBJECT_BYTES)).await?)
}

fn found<K>(answer: Result<K, ReadError>) -> Result<Option<K>, ReadError> {
    match answer {
        Ok(k) => Ok(Some(k)),
        Err(e) if e.api_code() == Some(404) => Ok(None),
        Err(e) => Err(e),
    }
}

fn parse<K: DeserializeOwned>(body: &[u8]) -> Result<K, ReadError> {
    serde_json::from_slice(body).map_err(|e| ReadError::Kube(kube::Error::SerdeError(e)))
}

/// Sends `request` and reads its answer's body up to `cap` bytes (an error
/// answer up to [`ERROR_BYTES`]), refusing as soon as more arrives.
async fn fetch(client: &kube::Client, request: http::Request<Vec<u8>>, cap: usize) -> Result<Bytes, ReadError> {
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let status = response.status();
    let cap = if status.is_success() { cap } else { cap.min(ERROR_BYTES) };
    let body = match Limited::new(response.into_body(), cap).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(ReadError::TooLarge("bytes")),
        Err(e) => return Err(ReadError::Kube(kube::Error::Service(e))),
    };
    if status.is_success() {
        return Ok(body);
    }
    // As kube-rs reads an error answer: its `Status`, or one made of its text.
    let status = serde_json::from_slice::<Status>(&body).unwrap_or_else(|_| {
        Status::failure(String::from_utf8_lossy(&body).trim(), "Failed to parse error data").with_code(status.as_u16())
    });
    Err(ReadError::Kube(kube::Error::Api(status.boxed())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cap holds at least one full page, and a page's worth of honest
    /// objects fits its byte cap (sizes as the doc comments say).
    #[test]
    fn every_cap_holds_a_page_of_honest_objects() {
        for (caps, honest_object_bytes) in [(TOKENS, 1 << 10), (CSRS, 2 << 10), (NODES, 20 << 10), (NAMES, 1 << 10)] {
            assert!(caps.items >= caps.page as usize, "{caps:?}");
            assert!(caps.page as usize * honest_object_bytes <= caps.page_bytes, "{caps:?}");
            assert!(caps.page_bytes <= OBJECT_BYTES, "{caps:?}: a page costs no more than one object read");
        }
    }
}
