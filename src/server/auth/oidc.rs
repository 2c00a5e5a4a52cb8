//! Sign-in with the organisation's OpenID Connect provider.
//!
//! The authorization code flow with PKCE (S256), `state` and `nonce`, as the
//! `openidconnect` crate does it: discovery, the code exchange and every
//! ID-token check (issuer, audience, expiry, nonce, signature against the
//! provider's JWKS) are the crate's. The console adds:
//! - the sign-in under way (`state`, nonce, PKCE verifier, return path)
//!   sealed into a short-lived cookie of the browser that started it
//!   ([`Pending`], [`super::sealed`]): a callback from another browser is
//!   refused (no sign-in forced on a victim), and starting one writes
//!   nothing (anonymous starts cannot fill a table); a finished
//!   sign-in's `state` is remembered, hashed, so its callback is good once;
//! - a bounded clock skew ([`SKEW`]) on expiry;
//! - the provider's keys fetched again on an ID token signed by a key they
//!   do not have (a rotated key), at most every [`REFRESH_MIN`];
//! - its HTTP client: hyper-rustls with the system's roots, no redirects
//!   followed, every answer bounded in time and size.
//!
//! The client secret, codes, tokens, the nonce and the PKCE verifier never
//! reach a log or an error message.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata, CoreRevocableToken,
    CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthorizationCode, ClaimsVerificationError, Client, ClientId, ClientSecret, CsrfToken,
    EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IdToken,
    IdTokenClaims, IdTokenFields, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    RequestTokenError, Scope, SignatureVerificationError, StandardErrorResponse, StandardTokenResponse, TokenResponse,
};
use serde::{Deserialize, Serialize};
use sqlx::AnyPool;

use super::sealed::Sealer;
use crate::domain::{AppError, ErrorCode};
use crate::server::db;

/// How long a sign-in may take at the provider.
pub(crate) const PENDING_SECS: i64 = 600;
/// The clock skew allowed on an ID token's expiry.
const SKEW: chrono::TimeDelta = chrono::TimeDelta::seconds(60);
/// The provider's keys are fetched again on an unknown key at most this often.
const REFRESH_MIN: Duration = Duration::from_secs(5);
/// Discovery (and the keys) are kept this long.
const METADATA_TTL: Duration = Duration::from_secs(3600);
/// Each call to the provider, headers and body.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from the provider.
const MAX_ANSWER: usize = 1024 * 1024;
/// The cookie holding the `state` of the sign-in this browser started.
pub(crate) const STATE_COOKIE: &str = "kubebyon_oidc_state";
/// Its name over https.
pub(crate) const SECURE_STATE_COOKIE: &str = "__Host-kubebyon_oidc_state";
/// After a failed discovery, sign-ins are told `oidc_unavailable` at once
/// for this long (not each made to wait for the provider's timeout in turn).
const FAILED_RETRY: Duration = Duration::from_secs(10);

/// Every claim of the ID token besides the standard ones (the groups claim
/// is named by the operator).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OtherClaims {
    #[serde(flatten)]
    rest: serde_json::Map<String, serde_json::Value>,
}
impl AdditionalClaims for OtherClaims {}

type Fields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type Tokens = StandardTokenResponse<Fields, CoreTokenType>;
type Token = IdToken<OtherClaims, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>;
type Claims = IdTokenClaims<OtherClaims, CoreGenderClaim>;
type OidcClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    Tokens,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Who the provider says signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `"<issuer> <sub>"`: immutable, never the name shown.
    pub subject: String,
    /// The console username asked for (`preferred_username`, else the
    /// verified e-mail address's local part), lowercased; checked by the caller.
    pub username: Option<String>,
    /// The console teams the groups claim names through the operator's
    /// prefix (`KUBEBYON_OIDC_TEAM_PREFIX`; none without one): [`teams_of`].
    pub teams: Vec<String>,
    /// `Some(is in the admin group)` when the operator named one.
    pub admin: Option<bool>,
}

/// A sign-in started: where to send the browser, and its state cookie's
/// value (the [`Pending`] sign-in, sealed).
pub(crate) struct Started {
    pub url: String,
    pub cookie: String,
}

/// A sign-in under way at the provider, carried by the browser that started
/// it in its state cookie, sealed ([`Sealer`]): nothing is stored until it
/// finishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// The `state` sent to the provider, which its callback must carry back.
    state: String,
    nonce: String,
    verifier: String,
    /// Where to go once signed in.
    next: String,
    /// When it started (Unix seconds).
    at: i64,
}

/// The sealed cookie's purpose (associated data) and the key's name in `console_keys`.
const SEAL_PURPOSE: &str = "kubebyon:oidc-sign-in";
const KEY_PURPOSE: &str = "oidc_state";
/// A return path longer than this is not carried (the cookie stays small).
const MAX_NEXT: usize = 1024;
/// A cookie dated later than now by more than this is refused (clock steps between replicas).
const FUTURE_SKEW_SECS: i64 = 60;

/// Pure rule: the sign-in a callback may finish — the cookie opened, it is
/// for the `state` the provider sent back, and it started within
/// [`PENDING_SECS`]; `None` otherwise (`oidc_state_invalid`).
pub(crate) fn pending_for(opened: Option<&[u8]>, state: &str, now: i64) -> Option<Pending> {
    let p: Pending = serde_json::from_slice(opened?).ok()?;
    let fresh = now - p.at < PENDING_SECS && p.at - now <= FUTURE_SKEW_SECS;
    (fresh && !state.is_empty() && p.state == state).then_some(p)
}

/// The configured provider.
pub struct Provider {
    issuer: IssuerUrl,
    client_id: ClientId,
    secret: ClientSecret,
    redirect: RedirectUrl,
    scopes: Vec<Scope>,
    groups_claim: String,
    admin_group: Option<String>,
    team_prefix: Option<String>,
    http: Http,
    /// The key that seals [`Pending`] sign-ins, read (or made) at the first one.
    sealer: tokio::sync::OnceCell<Sealer>,
    metadata: tokio::sync::Mutex<Discovered>,
}

/// An https URL, or http on loopback (a provider on the same machine, as
/// the tests run one).
fn secure(url: &openidconnect::url::Url) -> bool {
    let loopback = match url.host() {
        Some(openidconnect::url::Host::Ipv4(a)) => a.is_loopback(),
        Some(openidconnect::url::Host::Ipv6(a)) => a.is_loopback(),
        Some(openidconnect::url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    url.scheme() == "https" || (url.scheme() == "http" && loopback)
}

/// The first endpoint of a discovery document that is not [`secure`].
fn plain_http_endpoint(m: &CoreProviderMetadata) -> Option<String> {
    let urls = [
        Some(m.authorization_endpoint().url()),
        m.token_endpoint().map(|u| u.url()),
        Some(m.jwks_uri().url()),
        m.userinfo_endpoint().map(|u| u.url()),
    ];
    urls.into_iter().flatten().find(|u| !secure(u)).map(ToString::to_string)
}

/// What the operator set for sign-in with a provider (`KUBEBYON_OIDC_*` and
/// `KUBEBYON_PUBLIC_URL`: `Config::oidc`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OidcSettings<'a> {
    pub issuer: Option<&'a str>,
    pub client_id: Option<&'a str>,
    pub client_secret: Option<&'a str>,
    pub public_url: Option<&'a str>,
    pub scopes: &'a [String],
    pub groups_claim: &'a str,
    pub admin_group: Option<&'a str>,
    pub team_prefix: Option<&'a str>,
}

/// What discovery gave last: the document and when, or when it failed.
#[derive(Default)]
struct Discovered {
    metadata: Option<(CoreProviderMetadata, Instant)>,
    failed: Option<Instant>,
}

impl Provider {
    /// The provider the operator configured; `None` without an issuer. An
    /// issuer without a client id, secret or public URL, or a plain-http
    /// issuer off loopback, is an error that stops the start.
    pub fn from_settings(config: OidcSettings<'_>) -> Result<Option<Self>, String> {
        let Some(issuer) = config.issuer.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let issuer = IssuerUrl::new(issuer.to_owned()).map_err(|e| format!("KUBEBYON_OIDC_ISSUER: {e}"))?;
        if !secure(issuer.url()) {
            return Err("KUBEBYON_OIDC_ISSUER must be an https:// URL (http:// only on loopback)".into());
        }
        let client_id = config.client_id.map(str::trim).filter(|s| !s.is_empty());
        let secret = config.client_secret.filter(|s| !s.trim().is_empty());
        let (Some(client_id), Some(secret)) = (client_id, secret) else {
            return Err("KUBEBYON_OIDC_ISSUER needs KUBEBYON_OIDC_CLIENT_ID and KUBEBYON_OIDC_CLIENT_SECRET".into());
        };
        let Some(public) = config.public_url.map(|u| u.trim().trim_end_matches('/')).filter(|u| !u.is_empty()) else {
            return Err("KUBEBYON_OIDC_ISSUER needs KUBEBYON_PUBLIC_URL (the redirect URI is built from it)".into());
        };
        let redirect = RedirectUrl::new(format!("{public}/auth/oidc/callback"))
            .map_err(|e| format!("KUBEBYON_PUBLIC_URL: {e}"))?;
        let mut scopes = vec![];
        for s in config.scopes.iter().map(|s| s.trim()).filter(|s| !s.is_empty() && *s != "openid") {
            scopes.push(Scope::new(s.to_owned()));
        }
        let groups_claim = match config.groups_claim.trim() {
            "" => "groups".to_owned(),
            c => c.to_owned(),
        };
        let admin_group = config.admin_group.map(str::trim).filter(|g| !g.is_empty()).map(str::to_owned);
        let team_prefix = config.team_prefix.map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned);
        Ok(Some(Self {
            team_prefix,
            issuer,
            client_id: ClientId::new(client_id.to_owned()),
            secret: ClientSecret::new(secret.to_owned()),
            redirect,
            scopes,
            groups_claim,
            admin_group,
            http: Http::new().map_err(|e| format!("the system's root certificates: {e}"))?,
            metadata: tokio::sync::Mutex::new(Discovered::default()),
            sealer: tokio::sync::OnceCell::new(),
        }))
    }

    /// A client from the provider's discovery document: kept for
    /// [`METADATA_TTL`]; `fresh` fetches it again (keys rotated) unless it
    /// was fetched within [`REFRESH_MIN`].
    async fn client(&self, fresh: bool) -> Result<OidcClient, AppError> {
        let mut cached = self.metadata.lock().await;
        let stale = match &cached.metadata {
            None => true,
            Some((_, at)) if fresh => at.elapsed() >= REFRESH_MIN,
            Some((_, at)) => at.elapsed() >= METADATA_TTL,
        };
        if stale {
            if cached.metadata.is_none() && cached.failed.is_some_and(|at| at.elapsed() < FAILED_RETRY) {
                return Err(AppError::new(ErrorCode::OidcUnavailable));
            }
            let found =
                CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http).await.map_err(|e| e.to_string());
            // Codes, tokens and keys travel only over TLS: a document naming a
            // plain-http endpoint is refused as a failed discovery.
            let found = found.and_then(|m| match plain_http_endpoint(&m) {
                Some(url) => Err(format!("the discovery document names a plain-http endpoint: {url}")),
                None => Ok(m),
            });
            match found {
                Ok(metadata) => *cached = Discovered { metadata: Some((metadata, Instant::now())), failed: None },
                // Keys that cannot be fetched again: the ones known stay.
                Err(e) => {
                    tracing::warn!(error = %e, "the OpenID provider's discovery failed");
                    cached.failed = Some(Instant::now());
                    if cached.metadata.is_none() {
                        return Err(AppError::new(ErrorCode::OidcUnavailable));
                    }
                }
            }
        }
        let metadata =
            cached.metadata.as_ref().map(|(m, _)| m.clone()).ok_or(AppError::new(ErrorCode::OidcUnavailable))?;
        Ok(OidcClient::from_provider_metadata(metadata, self.client_id.clone(), Some(self.secret.clone()))
            .set_redirect_uri(self.redirect.clone()))
    }

    /// The prefix of the groups that stand for teams, if the operator set one.
    pub(crate) fn team_prefix(&self) -> Option<&str> {
        self.team_prefix.as_deref()
    }

    /// The sealing key, shared by every replica (made by the first).
    async fn sealer(&self, pool: &AnyPool) -> Result<&Sealer, AppError> {
        self.sealer
            .get_or_try_init(|| async {
                let fresh = Sealer::fresh_secret().ok_or(AppError::new(ErrorCode::OidcUnavailable))?;
                let stored = db::oidc::key(pool, KEY_PURPOSE, &fresh).await?;
                Sealer::from_hex(&stored).ok_or(AppError::new(ErrorCode::OidcUnavailable))
            })
            .await
    }

    /// Starts a sign-in: the provider's URL, and the sign-in (its `state`,
    /// nonce, PKCE verifier and where to go after) sealed for the browser's
    /// cookie. Writes nothing: anyone may start as many as they like.
    pub(crate) async fn start(&self, pool: &AnyPool, next: &str) -> Result<Started, AppError> {
        let client = self.client(false).await?;
        let sealer = self.sealer(pool).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request =
            client.authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random);
        for scope in &self.scopes {
            request = request.add_scope(scope.clone());
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        let pending = Pending {
            state: state.into_secret(),
            nonce: nonce.secret().clone(),
            verifier: verifier.secret().clone(),
            next: (if next.len() <= MAX_NEXT { next } else { "/clusters" }).to_owned(),
            at: db::now(),
        };
        let plain = serde_json::to_vec(&pending).map_err(|_| AppError::new(ErrorCode::OidcUnavailable))?;
        let cookie = sealer.seal(SEAL_PURPOSE, &plain).ok_or(AppError::new(ErrorCode::OidcUnavailable))?;
        Ok(Started { url: url.to_string(), cookie })
    }

    /// The sign-in the browser's state cookie (`sealed`) carries, if it is
    /// the one the provider's `state` names, within [`PENDING_SECS`], and
    /// not finished already.
    pub(crate) async fn pending(&self, pool: &AnyPool, sealed: &str, state: &str) -> Result<Pending, AppError> {
        let sealer = self.sealer(pool).await?;
        let opened = sealer.open(SEAL_PURPOSE, sealed);
        let pending =
            pending_for(opened.as_deref(), state, db::now()).ok_or(AppError::new(ErrorCode::OidcStateInvalid))?;
        if db::oidc::spent(pool, &super::session::token_hash(state)).await? {
            return Err(AppError::new(ErrorCode::OidcStateInvalid));
        }
        Ok(pending)
    }

    /// Finishes a sign-in: exchanges the code with the PKCE verifier, checks
    /// the ID token, and spends its `state` (a replayed callback is
    /// refused). Returns who signed in and where to go.
    pub(crate) async fn finish(
        &self,
        pool: &AnyPool,
        code: &str,
        pending: Pending,
    ) -> Result<(Identity, String), AppError> {
        let client = self.client(false).await?;
        let tokens = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|_| AppError::new(ErrorCode::OidcUnavailable))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier))
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        let token = tokens.id_token().ok_or(AppError::new(ErrorCode::OidcTokenInvalid))?;
        let nonce = Nonce::new(pending.nonce);
        let claims = match verify(&client, token, &nonce) {
            // Signed with a key the console does not have: the provider
            // rotated its keys. Fetch them again, check once more.
            Err(ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey)) => {
                tracing::info!("the ID token names a key the console does not have; fetching the provider's keys");
                let fresh = self.client(true).await?;
                verify(&fresh, token, &nonce).cloned()
            }
            other => other.cloned(),
        }
        .map_err(claims_error)?;
        if !db::oidc::spend(pool, &super::session::token_hash(&pending.state)).await? {
            return Err(AppError::new(ErrorCode::OidcStateInvalid));
        }
        Ok((self.identity(&claims), pending.next))
    }

    fn identity(&self, claims: &Claims) -> Identity {
        let verified = claims.email_verified() == Some(true);
        let username = console_username(
            claims.preferred_username().map(|u| u.as_str()),
            // An address the provider has not verified names nobody.
            claims.email().filter(|_| verified).map(|e| e.as_str()),
        );
        let groups = groups(claims.additional_claims().rest.get(&self.groups_claim));
        let admin = self.admin_group.as_ref().map(|g| groups.contains(g));
        let teams = teams_of(&groups, self.team_prefix.as_deref());
        Identity { subject: format!("{} {}", self.issuer.as_str(), claims.subject().as_str()), username, teams, admin }
    }
}

/// The console username a provider's claims ask for: `preferred_username`,
/// else a verified e-mail address; an e-mail-shaped name (Entra ID and Okta
/// give the user's UPN or e-mail address there) is its local part
/// (`Grace.Hopper@contoso.com` → `grace.hopper`); trimmed and lowercased.
/// Whether it is a valid, free console username is the account's to judge.
fn console_username(preferred: Option<&str>, verified_email: Option<&str>) -> Option<String> {
    let name = preferred.map(str::trim).filter(|p| !p.is_empty()).or(verified_email)?;
    let local = name.split_once('@').map_or(name, |(local, _)| local);
    Some(local.trim().to_lowercase()).filter(|n| !n.is_empty())
}

/// Pure rule: the console teams `groups` name — each group `<prefix><team>`
/// stands for team `<team>`; without a prefix none does (a bare group name
/// anyone may create at the provider must not buy a way into a team).
pub(crate) fn teams_of(groups: &[String], prefix: Option<&str>) -> Vec<String> {
    let Some(prefix) = prefix else { return Vec::new() };
    let mut teams: Vec<String> =
        groups.iter().filter_map(|g| g.strip_prefix(prefix)).filter(|t| !t.is_empty()).map(str::to_owned).collect();
    teams.sort();
    teams.dedup();
    teams
}

/// The groups claim's values: a list of strings, or one string.
fn groups(claim: Option<&serde_json::Value>) -> Vec<String> {
    match claim {
        Some(serde_json::Value::Array(items)) => items.iter().filter_map(|v| v.as_str()).map(str::to_owned).collect(),
        Some(serde_json::Value::String(one)) => vec![one.clone()],
        _ => vec![],
    }
}

fn verify<'t>(client: &OidcClient, token: &'t Token, nonce: &Nonce) -> Result<&'t Claims, ClaimsVerificationError> {
    let verifier = client.id_token_verifier().set_time_fn(|| chrono::Utc::now() - SKEW);
    token.claims(&verifier, nonce)
}

/// The translated reason an ID token is refused (the crate's text goes to the log).
fn claims_error(e: ClaimsVerificationError) -> AppError {
    tracing::warn!(error = %e, "an ID token was refused");
    AppError::new(match e {
        ClaimsVerificationError::InvalidAudience(_) => ErrorCode::OidcTokenAudience,
        ClaimsVerificationError::Expired(_) => ErrorCode::OidcTokenExpired,
        ClaimsVerificationError::InvalidNonce(_) => ErrorCode::OidcTokenNonce,
        ClaimsVerificationError::SignatureVerification(_) => ErrorCode::OidcTokenSignature,
        _ => ErrorCode::OidcTokenInvalid,
    })
}

fn token_error<RE: std::error::Error + 'static>(
    e: RequestTokenError<RE, StandardErrorResponse<CoreErrorResponseType>>,
) -> AppError {
    match e {
        RequestTokenError::ServerResponse(answer) => {
            tracing::warn!(error = %answer.error(), "the provider refused the code exchange");
            AppError::new(ErrorCode::OidcDenied)
        }
        RequestTokenError::Request(e) => {
            tracing::warn!(error = %e, "the provider's token endpoint could not be reached");
            AppError::new(ErrorCode::OidcUnavailable)
        }
        RequestTokenError::Parse(e, _) => {
            tracing::warn!(error = %e, "the provider's token answer could not be read");
            AppError::new(ErrorCode::OidcTokenInvalid)
        }
        RequestTokenError::Other(e) => {
            tracing::warn!(error = %e, "the code exchange failed");
            AppError::new(ErrorCode::OidcTokenInvalid)
        }
    }
}

type HyperClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// The HTTP client of the provider's endpoints.
struct Http(HyperClient);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HttpFailure(String);

impl<'c> openidconnect::AsyncHttpClient<'c> for Http {
    type Error = HttpFailure;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<HttpResponse, HttpFailure>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        // In the request's own task: dropped with it (a sign-in given up
        // stops its call to the provider).
        Box::pin(Self::send(self.0.clone(), request))
    }
}

impl Http {
    fn new() -> std::io::Result<Self> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(rustls::crypto::ring::default_provider())?
            .https_or_http()
            .enable_http1()
            .build();
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Self(client))
    }

    /// One request; a redirect is answered as it is (not followed).
    async fn send(client: HyperClient, request: HttpRequest) -> Result<HttpResponse, HttpFailure> {
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let answer = tokio::time::timeout(CALL_TIMEOUT, client.request(request))
            .await
            .map_err(|_| HttpFailure("the provider did not answer in time".into()))?
            .map_err(|e| HttpFailure(format!("calling the provider: {e}")))?;
        let (parts, body) = answer.into_parts();
        let body = tokio::time::timeout(CALL_TIMEOUT, Limited::new(body, MAX_ANSWER).collect())
            .await
            .map_err(|_| HttpFailure("the provider's answer did not arrive in time".into()))?
            .map_err(|e| HttpFailure(format!("reading the provider's answer: {e}")))?
            .to_bytes();
        Ok(http::Response::from_parts(parts, body.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::config::Config;

    /// Entra ID (`preferred_username` is the UPN) and Okta (the login, an
    /// e-mail address) ask for e-mail-shaped names: their local part.
    #[test]
    fn usernames_come_from_the_claims_email_shaped_ones_by_their_local_part() {
        for (preferred, email, want) in [
            (Some("ada"), None, Some("ada")),
            (Some(" Ada "), Some("x@example.com"), Some("ada")),
            (Some("Grace.Hopper@contoso.onmicrosoft.com"), None, Some("grace.hopper")),
            (Some("grace.hopper@okta.example"), None, Some("grace.hopper")),
            (None, Some("Linus@example.com"), Some("linus")),
            (Some(""), Some("kay@example.com"), Some("kay")),
            (None, None, None),
            (Some("@contoso.com"), None, None),
        ] {
            assert_eq!(console_username(preferred, email).as_deref(), want, "{preferred:?} {email:?}");
        }
    }

    /// Every endpoint of a discovery document must be https (http only on
    /// loopback): a document that sends the code exchange or the keys over
    /// plain http is a failed discovery.
    #[test]
    fn a_callback_finishes_only_the_sign_in_its_cookie_carries_within_ten_minutes() {
        let now = 1_800_000_000;
        let sealed = |state: &str, at: i64| {
            let p = Pending {
                state: state.into(),
                nonce: "n".into(),
                verifier: "v".into(),
                next: "/clusters/3".into(),
                at,
            };
            Some(serde_json::to_vec(&p).unwrap())
        };
        for (what, opened, state, finishes) in [
            ("its own state", sealed("s1", now - 5), "s1", true),
            ("a second under ten minutes", sealed("s1", now - PENDING_SECS + 1), "s1", true),
            ("ten minutes old", sealed("s1", now - PENDING_SECS), "s1", false),
            ("another state", sealed("s1", now), "s2", false),
            ("no state at all", sealed("", now), "", false),
            ("dated ahead within the skew", sealed("s1", now + FUTURE_SKEW_SECS), "s1", true),
            ("dated ahead beyond it", sealed("s1", now + FUTURE_SKEW_SECS + 1), "s1", false),
            ("not a sign-in", Some(b"{}".to_vec()), "s1", false),
            ("a cookie that did not open", None, "s1", false),
        ] {
            let got = pending_for(opened.as_deref(), state, now);
            assert_eq!(got.is_some(), finishes, "{what}");
            if let Some(p) = got {
                assert_eq!((p.next.as_str(), p.nonce.as_str()), ("/clusters/3", "n"), "{what}");
            }
        }
    }

    #[test]
    fn discovery_documents_with_plain_http_endpoints_are_refused() {
        let doc = |token: &str, jwks: &str| -> CoreProviderMetadata {
            serde_json::from_value(serde_json::json!({
                "issuer": "https://id.example.com",
                "authorization_endpoint": "https://id.example.com/auth",
                "token_endpoint": token,
                "jwks_uri": jwks,
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }))
            .unwrap()
        };
        for (token, jwks, want) in [
            ("https://id.example.com/token", "https://id.example.com/keys", None),
            ("http://id.example.com/token", "https://id.example.com/keys", Some("http://id.example.com/token")),
            ("https://id.example.com/token", "http://id.example.com/keys", Some("http://id.example.com/keys")),
            ("http://127.0.0.1:5556/token", "http://localhost:5556/keys", None),
        ] {
            assert_eq!(plain_http_endpoint(&doc(token, jwks)).as_deref(), want, "{token} {jwks}");
        }
    }

    #[test]
    fn only_groups_under_the_operators_prefix_name_teams() {
        let groups = |g: &[&str]| g.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        for (what, have, prefix, want) in [
            ("no prefix: no team", groups(&["dev", "kubebyon-team:dev"]), None, vec![]),
            (
                "the prefix stripped",
                groups(&["kubebyon-team:dev", "dev", "platform"]),
                Some("kubebyon-team:"),
                vec!["dev"],
            ),
            ("the prefix alone names nothing", groups(&["kubebyon-team:"]), Some("kubebyon-team:"), vec![]),
            (
                "a path prefix (Keycloak's full paths)",
                groups(&["/kubebyon/dev", "/other/dev"]),
                Some("/kubebyon/"),
                vec!["dev"],
            ),
            ("case counts", groups(&["KUBEBYON-TEAM:dev"]), Some("kubebyon-team:"), vec![]),
            ("sorted, once each", groups(&["t:b", "t:a", "t:b"]), Some("t:"), vec!["a", "b"]),
        ] {
            assert_eq!(teams_of(&have, prefix), want, "{what}");
        }
    }

    #[test]
    fn groups_are_a_list_or_one_name() {
        use serde_json::json;
        for (claim, want) in [
            (Some(json!(["a", "b", 3])), vec!["a", "b"]),
            (Some(json!("ops")), vec!["ops"]),
            (Some(json!({"a": 1})), vec![]),
            (None, vec![]),
        ] {
            assert_eq!(groups(claim.as_ref()), want, "{claim:?}");
        }
    }

    #[test]
    fn the_operator_configures_one_provider_or_none() {
        let base = Config {
            oidc_issuer: Some("https://id.example.com/realms/x".into()),
            oidc_client_id: Some("kubebyon".into()),
            oidc_client_secret: Some("s3cret".into()),
            public_url: Some("https://console.example.com/".into()),
            oidc_scopes: vec!["profile".into(), "openid".into(), " ".into()],
            ..Config::default()
        };
        let p = Provider::from_settings(base.oidc()).unwrap().unwrap();
        assert_eq!(p.redirect.as_str(), "https://console.example.com/auth/oidc/callback");
        assert_eq!(p.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(), ["profile"]);
        assert_eq!(p.groups_claim, "groups");
        assert!(Provider::from_settings(Config::default().oidc()).unwrap().is_none());
        let loopback = Config { oidc_issuer: Some("http://127.0.0.1:9000".into()), ..base.clone() };
        assert!(Provider::from_settings(loopback.oidc()).unwrap().is_some());
        for (bad, says) in [
            (Config { oidc_issuer: Some("http://id.example.com".into()), ..base.clone() }, "https://"),
            (Config { oidc_client_secret: None, ..base.clone() }, "CLIENT_SECRET"),
            (Config { oidc_client_id: Some(" ".into()), ..base.clone() }, "CLIENT_ID"),
            (Config { public_url: None, ..base.clone() }, "PUBLIC_URL"),
            (Config { oidc_issuer: Some("not a url".into()), ..base.clone() }, "ISSUER"),
        ] {
            let e = Provider::from_settings(bad.oidc()).err().expect("refused");
            assert!(e.contains(says), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }
}
