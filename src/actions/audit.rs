//! The admin audit log, read by its page.

use leptos::prelude::*;

use crate::domain::AppError;
use crate::domain::audit::AuditEntry;

#[server(prefix = "/fn", endpoint = "audit/list")]
pub(crate) async fn load_audit(before: Option<i64>) -> Result<Vec<AuditEntry>, AppError> {
    use crate::server::context::{require_admin, state};
    let admin = require_admin()?;
    crate::server::service::audit::list(&state()?.pool, &admin, before).await
}
