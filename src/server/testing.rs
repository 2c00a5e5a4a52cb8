//! What integration tests reach that is not otherwise the crate's public
//! surface (the binary's and the tests' needs: see `lib.rs`). Test helpers
//! live here, not in production modules.

use anyhow::Result;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::domain::render::MANAGED_BY;
pub use crate::server::host::objects::{charts_resource, helm_charts};

/// The namespaces of the console's clusters, by the label it puts on them.
pub async fn managed_namespaces(client: &Client) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let list = Api::<Namespace>::all(client.clone()).list(&lp).await?;
    Ok(list.items.iter().map(ResourceExt::name_any).collect())
}

/// One reconciler pass (the queue, then the observer; `full`: every cluster
/// looked at on the host), as the loop runs it.
pub async fn reconcile_pass(ctx: &crate::server::controllers::reconciler::Context, full: bool) -> Result<()> {
    crate::server::controllers::reconciler::pass(ctx, full).await.map_err(|e| anyhow::anyhow!("{e}"))
}

/// The log lines this thread writes while it is held (a `tracing`
/// subscriber set as the thread's default), as text. Tests that read logs
/// run in a test binary of their own or on a log site no other test uses:
/// tracing caches each site's interest per process.
pub struct LogCapture {
    buf: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl LogCapture {
    pub fn start() -> Self {
        #[derive(Clone)]
        struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = std::sync::Arc::default();
        let writer = Buf(std::sync::Arc::clone(&buf));
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        Self { buf, _guard: tracing::subscriber::set_default(subscriber) }
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf.lock().unwrap_or_else(std::sync::PoisonError::into_inner)).into_owned()
    }
}
