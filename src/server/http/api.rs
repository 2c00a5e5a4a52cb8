//! The JSON HTTP API (`docs/http-api.md`): the same services as the pages.
//! Every failure is `{"code": …, "field": …}` with a 4xx status; only a
//! storage failure is a 500, and its detail stays in the log.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, FromRequest, FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use http::header;
use serde::{Deserialize, Serialize};

use crate::domain::change::ClusterEvent;
use crate::domain::cluster::Cluster;
use crate::domain::settings::SettingsInput;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode, SystemSettings};
use crate::server::http::request::RequestFacts;
use crate::server::service::{accounts, clusters, join, settings};
use crate::server::state::AppState;

pub(crate) struct ApiError(pub AppError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        let mut res = (status, Json(self.0)).into_response();
        let after = match self.0.code {
            ErrorCode::RateLimited => Some(crate::server::service::write_limit::RETRY_AFTER_SECS),
            ErrorCode::CallsRateLimited => Some(crate::server::service::call_budget::RETRY_AFTER_SECS),
            ErrorCode::JoinRateLimited => Some(crate::server::auth::rate_limit::WINDOW_SECS.unsigned_abs()),
            _ => None,
        };
        if let Some(after) = after {
            res.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(after));
        }
        res
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        Self(e)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let code = match &rejection {
            JsonRejection::MissingJsonContentType(_) => ErrorCode::UnsupportedMediaType,
            JsonRejection::BytesRejection(_) => ErrorCode::PayloadTooLarge,
            _ => ErrorCode::BadRequest,
        };
        tracing::debug!(error = %rejection.body_text(), "json body refused");
        Self(AppError::new(code))
    }
}

/// A JSON body whose every rejection is an `ApiError`.
#[derive(FromRequest)]
#[from_request(via(Json), rejection(ApiError))]
pub(crate) struct ApiJson<T>(pub T);

/// The signed-in user, or 401.
pub(crate) struct ApiUser(pub CurrentUser);

impl<S: Send + Sync> FromRequestParts<S> for ApiUser {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<CurrentUser>()
            .cloned()
            .map(ApiUser)
            .ok_or(ApiError(AppError::new(ErrorCode::Unauthenticated)))
    }
}

/// Cluster ids in paths; anything else is simply not found.
pub(crate) fn cluster_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse().map_err(|_| ApiError(AppError::new(ErrorCode::NotFound)))
}

type ApiResult<T> = Result<Json<T>, ApiError>;

/// `per_page` of the API list when not given, and its upper bound.
const API_PAGE: u32 = 100;
const API_PAGE_MAX: u32 = 500;

/// One page of clusters, filtered like the list page (`q`, `mode`, `phase`,
/// `owner`, `page`, plus `per_page`); the body stays an array, the count of
/// every match is in `X-Total-Count`.
pub(crate) async fn list_clusters(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    axum::extract::Query(params): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let query = crate::domain::listing::ListQuery::from_params(|k| params.get(k).cloned());
    let per_page =
        params.get("per_page").and_then(|p| p.parse::<u32>().ok()).unwrap_or(API_PAGE).clamp(1, API_PAGE_MAX);
    let page = clusters::list_page(&st.pool, &u, &query, per_page).await?;
    Ok(([("x-total-count", page.total.to_string())], Json(page.items)).into_response())
}

pub(crate) async fn create_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(draft): ApiJson<clusters::ClusterDraft>,
) -> Result<(StatusCode, Json<Cluster>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(clusters::create(&st.pool, &st.spec_writes, &st.config.host_policy(), &u, &draft).await?),
    ))
}

pub(crate) async fn get_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Cluster> {
    Ok(Json(clusters::get(&st.pool, &u, cluster_id(&id)?).await?))
}

pub(crate) async fn update_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(patch): ApiJson<clusters::ClusterPatch>,
) -> ApiResult<Cluster> {
    Ok(Json(clusters::update(&st.pool, &st.spec_writes, &st.config.host_policy(), &u, cluster_id(&id)?, &patch).await?))
}

pub(crate) async fn delete_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Cluster>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(clusters::delete(&st.pool, &st.spec_writes, &u, cluster_id(&id)?, None).await?)))
}

/// `GET /api/console/clusters/{id}/events[?before=ID]`: the newest 50
/// requests (older ones with `before`, the last id of the previous page).
pub(crate) async fn cluster_events(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    query: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Vec<ClusterEvent>> {
    let axum::extract::Query(q) = query.map_err(|_| ApiError(AppError::new(ErrorCode::BadRequest)))?;
    Ok(Json(clusters::events(&st.pool, &u, cluster_id(&id)?, q.before).await?))
}

/// The settings as the API shows them: every stored field, what the console
/// detected on the host (`null` without a host) and, after a change, how many
/// clusters are re-rendered.
#[derive(Serialize)]
pub(crate) struct SettingsReply {
    #[serde(flatten)]
    settings: SystemSettings,
    detected_address_request: Option<crate::domain::settings::AddressRequest>,
    /// k3s's ServiceLB seen serving the console's LoadBalancer Services
    /// (`null` without a host).
    detected_servicelb: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clusters_rerendered: Option<usize>,
}

/// `?before=ID`: the page of a newest-first list older than entry ID.
#[derive(Deserialize)]
pub(crate) struct AuditQuery {
    before: Option<i64>,
}

/// `GET /api/admin/audit[?before=ID]`: the newest 50 entries (older ones
/// with `before` = the last id seen).
pub(crate) async fn list_audit(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    query: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Vec<crate::domain::audit::AuditEntry>> {
    let axum::extract::Query(q) = query.map_err(|_| ApiError(AppError::new(ErrorCode::BadRequest)))?;
    Ok(Json(crate::server::service::audit::list(&st.pool, &u, q.before).await?))
}

/// What the signed-in user holds of their quota, and their limits (`limit`
/// is `null` for admins).
pub(crate) async fn my_quota(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
) -> ApiResult<crate::domain::quota::QuotaView> {
    Ok(Json(crate::server::service::quota::view(&st.pool, &u).await?))
}

pub(crate) async fn get_settings(State(st): State<AppState>, ApiUser(u): ApiUser) -> ApiResult<SettingsReply> {
    let (detected_address_request, detected_servicelb) = settings::detected(st.host.as_ref());
    Ok(Json(SettingsReply {
        settings: settings::get(&st.pool, &u).await?,
        detected_address_request,
        detected_servicelb,
        clusters_rerendered: None,
    }))
}

/// The settings body: the four original fields are required (a PUT replaces
/// the whole set; `null` clears the optional ones); the fields added later
/// (address request, chart, quota, pod security, network policy) keep their
/// stored value when left out.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SettingsBody {
    default_cluster_public_access_mode: String,
    #[serde(deserialize_with = "present")]
    nodeport_public_host: Option<String>,
    #[serde(deserialize_with = "present")]
    load_balancer_annotations: Option<std::collections::BTreeMap<String, String>>,
    #[serde(deserialize_with = "present")]
    load_balancer_class: Option<String>,
    #[serde(default)]
    load_balancer_address_request: Option<String>,
    #[serde(default)]
    chart_repo: Option<String>,
    #[serde(default)]
    chart_version: Option<String>,
    /// The platform's quota, as the GET reply shows it (`null` per dimension: no limit).
    #[serde(default)]
    quota: Option<crate::domain::quota::Quota>,
    #[serde(default)]
    pod_security: Option<String>,
    #[serde(default)]
    network_policy: Option<bool>,
    #[serde(default)]
    private_nodes: Option<bool>,
    /// `namespace/name`; `""` clears it; missing keeps it.
    #[serde(default)]
    platform_api_key: Option<String>,
    /// `{namespace, name, listener}`; `null` clears it (no gateway mode); missing keeps it.
    #[serde(default, deserialize_with = "given")]
    gateway: Option<Option<crate::domain::gateway::GatewayRef>>,
    /// A DNS name; `null` clears it; missing keeps it.
    #[serde(default, deserialize_with = "given")]
    gateway_domain_suffix: Option<Option<String>>,
    /// `{spread, topology_key, storage_class}` for new clusters; missing keeps it.
    #[serde(default)]
    placement: Option<crate::domain::placement::Placement>,
    /// Read-only fields of the GET reply, accepted (and ignored) so a client
    /// can GET, change a field and PUT the result back.
    #[serde(default, rename = "detected_address_request")]
    _detected_address_request: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "clusters_rerendered")]
    _clusters_rerendered: Option<serde::de::IgnoredAny>,
    #[serde(default, rename = "detected_servicelb")]
    _detected_servicelb: Option<serde::de::IgnoredAny>,
}

/// A nullable field that may be missing: missing is `None`, `null` is `Some(None)`.
fn given<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A nullable field that must still be present: serde treats a missing
/// `Option` as `None` unless a custom deserializer is named.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

pub(crate) async fn update_settings(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<SettingsBody>,
) -> ApiResult<SettingsReply> {
    let current = settings::get(&st.pool, &u).await?;
    // Annotations go through the same text parser as the form, so the rules are one.
    let annotations = body.load_balancer_annotations.unwrap_or_default();
    if annotations.values().any(|v| v.contains('\n')) || annotations.keys().any(|k| k.contains([':', '=', '\n'])) {
        return Err(ApiError(AppError::at(
            ErrorCode::AnnotationsInvalid,
            crate::domain::Field::LoadBalancerAnnotations,
        )));
    }
    let annotations: String = annotations.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    let quota_text = crate::domain::quota::QuotaText::of(&body.quota.unwrap_or(current.quota));
    let mut kept = current.gateway_placement_text();
    // The objects through the form's text, so the rules are one.
    let given = SystemSettings {
        gateway: body.gateway.clone().unwrap_or(current.gateway.clone()),
        gateway_domain_suffix: None,
        placement: body.placement.clone().unwrap_or(current.placement.clone()),
        ..SystemSettings::default()
    }
    .gateway_placement_text();
    kept.gateway = given.gateway;
    kept.gateway_listener = given.gateway_listener;
    kept.spread = given.spread;
    kept.spread_topology_key = given.spread_topology_key;
    kept.storage_class = given.storage_class;
    if let Some(suffix) = &body.gateway_domain_suffix {
        kept.gateway_domain_suffix = suffix.clone().unwrap_or_default();
    }
    let input = SettingsInput {
        default_mode: &body.default_cluster_public_access_mode,
        nodeport_public_host: body.nodeport_public_host.as_deref().unwrap_or_default(),
        load_balancer_annotations: &annotations,
        load_balancer_class: body.load_balancer_class.as_deref().unwrap_or_default(),
        load_balancer_address_request: body
            .load_balancer_address_request
            .as_deref()
            .unwrap_or(current.load_balancer_address_request.as_str()),
        chart_repo: body.chart_repo.as_deref().unwrap_or(&current.chart_repo),
        chart_version: body.chart_version.as_deref().unwrap_or(&current.chart_version),
        // Through the form's text, so the bounds are checked in one place.
        quota: quota_text.as_input(),
        pod_security: body.pod_security.as_deref().unwrap_or(current.pod_security.as_str()),
        network_policy: if body.network_policy.unwrap_or(current.network_policy) { "on" } else { "off" },
        private_nodes: if body.private_nodes.unwrap_or(current.private_nodes) { "on" } else { "off" },
        platform_api_key: &body
            .platform_api_key
            .unwrap_or_else(|| current.platform_api_key.as_ref().map(ToString::to_string).unwrap_or_default()),
        gateway: &kept.gateway,
        gateway_listener: &kept.gateway_listener,
        gateway_domain_suffix: &kept.gateway_domain_suffix,
        spread: &kept.spread,
        spread_topology_key: &kept.spread_topology_key,
        storage_class: &kept.storage_class,
    };
    let (saved, rerendered) =
        settings::update(&st.pool, st.host.as_ref(), &u, &input, &st.config.operator_limits()).await?;
    let (detected_address_request, detected_servicelb) = settings::detected(st.host.as_ref());
    Ok(Json(SettingsReply {
        settings: saved,
        detected_address_request,
        detected_servicelb,
        clusters_rerendered: Some(rerendered),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoginBody {
    username: String,
    password: String,
}

#[derive(Serialize)]
pub(crate) struct LoginReply {
    username: String,
    role: crate::domain::user::Role,
}

pub(crate) async fn login(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    headers: http::HeaderMap,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Response, ApiError> {
    let (user, cookie) = accounts::sign_in(
        &st.pool,
        &st.limiter,
        &body.username,
        &body.password,
        &request.client_key,
        cookies(&request, &headers),
    )
    .await?;
    let reply = LoginReply { username: user.username, role: user.role };
    Ok(([(header::SET_COOKIE, cookie)], Json(reply)).into_response())
}

pub(crate) async fn logout(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    headers: http::HeaderMap,
) -> Result<Response, ApiError> {
    let cookie = accounts::sign_out(&st.pool, cookies(&request, &headers)).await?;
    Ok(([(header::SET_COOKIE, cookie)], StatusCode::NO_CONTENT).into_response())
}

/// The request's cookies, and whether the session cookie is `Secure`
/// (served over https: [`RequestFacts::https`]).
fn cookies<'a>(request: &RequestFacts, headers: &'a http::HeaderMap) -> accounts::Cookies<'a> {
    accounts::Cookies { header: headers.get(header::COOKIE).and_then(|v| v.to_str().ok()), secure: request.https }
}

/// Any other `/api/...` path: a JSON 404, not the HTML page.
pub(crate) async fn not_found() -> ApiError {
    ApiError(AppError::new(ErrorCode::NotFound))
}

/// The kubeconfig of a cluster, read from the host now: owner or admin only,
/// an attachment, never cached, never stored or logged. 409 when there is none.
pub(crate) async fn cluster_kubeconfig(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (name, text) = clusters::kubeconfig(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?;
    let disposition = format!("attachment; filename=\"kubeconfig-{}.yaml\"", name.as_str());
    let headers = [
        (header::CONTENT_TYPE, "application/yaml".to_owned()),
        (header::CACHE_CONTROL, "no-store".to_owned()),
        (header::CONTENT_DISPOSITION, disposition),
    ];
    Ok((headers, text).into_response())
}

/// Runs the connection check now (owner or admin) and wakes the reconciler.
pub(crate) async fn probe_cluster(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<crate::domain::cluster::ProbeOutcome> {
    Ok(Json(clusters::probe(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?))
}

// ---- join tokens of own-nodes clusters (owner or admin) ----

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenRequest {
    /// `10m` … `7d`; absent: 1 hour.
    #[serde(default)]
    lifetime: Option<String>,
}

pub(crate) async fn list_join_tokens(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Vec<crate::domain::join::TokenView>> {
    Ok(Json(join::list_tokens(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?))
}

pub(crate) async fn list_nodes(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Vec<crate::domain::nodes::NodeView>> {
    Ok(Json(join::list_nodes(&st.pool, st.host.as_ref(), &u, cluster_id(&id)?).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoveQuery {
    /// `false`: delete the Node without draining (a machine that is gone).
    #[serde(default = "yes")]
    drain: bool,
}

fn yes() -> bool {
    true
}

/// `202` with the removal: it runs in the background (`GET …/node-removals`).
pub(crate) async fn remove_node(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, node)): Path<(String, String)>,
    query: Result<axum::extract::Query<RemoveQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let axum::extract::Query(q) = query.map_err(|_| ApiError(AppError::new(ErrorCode::BadRequest)))?;
    let removal =
        join::remove_node(&st.pool, st.host.as_ref(), &st.spec_writes, &u, cluster_id(&id)?, &node, q.drain).await?;
    Ok((StatusCode::ACCEPTED, Json(removal)).into_response())
}

/// The cluster's latest node removals, newest first.
pub(crate) async fn list_node_removals(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<Vec<crate::domain::nodes::RemovalView>> {
    Ok(Json(join::removals(&st.pool, &u, cluster_id(&id)?).await?))
}

/// `201` with the token (shown this once) and `Cache-Control: no-store`.
pub(crate) async fn create_join_token(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Response, ApiError> {
    let lifetime = body.lifetime.unwrap_or_default();
    let created =
        join::create_token(&st.pool, st.host.as_ref(), &st.spec_writes, &u, cluster_id(&id)?, &lifetime).await?;
    Ok((StatusCode::CREATED, [(header::CACHE_CONTROL, "no-store")], Json(created)).into_response())
}

pub(crate) async fn revoke_join_token(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, token)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    join::revoke_token(&st.pool, st.host.as_ref(), &st.spec_writes, &u, cluster_id(&id)?, &token).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/join/clusters/{id}/script?token=…`: no session; the control
/// plane's join script, byte for byte (`service::join_script`).
pub(crate) async fn join_script(
    State(st): State<AppState>,
    Extension(request): Extension<RequestFacts>,
    Path(id): Path<String>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let token = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let client = request.client_key;
    // The id is the service's to judge: a malformed one is one more refusal.
    let answer = crate::server::service::join_script::script(&st.pool, st.host.as_ref(), &id, &token, &client)
        .await
        .map_err(ApiError);
    let mut res = match answer {
        Ok(body) => ([(header::CONTENT_TYPE, "text/x-shellscript")], body).into_response(),
        Err(e) => e.into_response(),
    };
    res.headers_mut().insert(header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    res
}

// ---- moves (admins): NodePort clusters to LoadBalancer ----

use crate::domain::moves::{MoveRequest, MoveView, Plan};
use crate::server::service::{HostLink, moves};

pub(crate) async fn move_dry_run(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<MoveRequest>,
) -> ApiResult<Plan> {
    Ok(Json(moves::dry_run(&st.pool, &u, HostLink::of(st.host.as_ref()), &body).await?))
}

pub(crate) async fn start_move(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    ApiJson(body): ApiJson<MoveRequest>,
) -> Result<Response, ApiError> {
    let id = moves::start(&st.pool, &u, HostLink::of(st.host.as_ref()), &body).await?;
    let view = moves::view(&st.pool, &u, id).await?;
    Ok((StatusCode::CREATED, [(header::LOCATION, format!("/api/admin/moves/{id}"))], Json(view)).into_response())
}

pub(crate) async fn list_moves(State(st): State<AppState>, ApiUser(u): ApiUser) -> ApiResult<Vec<MoveView>> {
    Ok(Json(moves::recent(&st.pool, &u).await?))
}

pub(crate) async fn get_move(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path(id): Path<String>,
) -> ApiResult<MoveView> {
    Ok(Json(moves::view(&st.pool, &u, cluster_id(&id)?).await?))
}

/// `POST /api/admin/moves/{id}/clusters/{cluster}/{retry|rollback}`.
pub(crate) async fn move_item_action(
    State(st): State<AppState>,
    ApiUser(u): ApiUser,
    Path((id, cluster, action)): Path<(String, String, String)>,
) -> ApiResult<MoveView> {
    let (id, cluster) = (cluster_id(&id)?, cluster_id(&cluster)?);
    moves::item_action(&st.pool, st.host.as_ref(), &u, id, cluster, &action).await?;
    Ok(Json(moves::view(&st.pool, &u, id).await?))
}
