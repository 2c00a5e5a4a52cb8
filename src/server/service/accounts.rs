//! Sign-in, sign-out and user management. Passwords and tokens are never
//! logged (`skip` on every instrumented function that sees them).

use sqlx::AnyPool;

use crate::domain::audit::AuditAction;
use crate::domain::user::{CurrentUser, NewPassword, Role, UserSummary, Username};
use crate::domain::{AppError, ErrorCode, Field};
use crate::server::auth::rate_limit::LoginLimiter;
use crate::server::auth::{password, session};
use crate::server::db::users::{RoleChange, UserRow};
use crate::server::db::{self};

use super::{HostHandle, internal};
use crate::server::auth::LocalSignIn;

/// Checks credentials and opens a session. Returns the user and the cookie token.
/// The typed username is logged only when it names an existing account (a
/// password typed into the username field must not reach the log).
pub async fn login(
    pool: &AnyPool,
    limiter: &LoginLimiter,
    username: &str,
    secret: &str,
    client: &str,
) -> Result<(CurrentUser, String), AppError> {
    login_as(pool, limiter, (username, secret), client, LocalSignIn::On).await
}

/// [`login`] under the operator's password sign-in policy (`local`): an
/// account it leaves out is refused after its password checked, before any
/// session or "signed in" entry.
#[tracing::instrument(skip_all, fields(account = tracing::field::Empty))]
async fn login_as(
    pool: &AnyPool,
    limiter: &LoginLimiter,
    (username, secret): (&str, &str),
    client: &str,
    local: LocalSignIn,
) -> Result<(CurrentUser, String), AppError> {
    let t = db::now();
    // A name that cannot exist (a public rule) costs no password check, but
    // counts against the client like any failure.
    let account = Username::parse(username).ok();
    if !limiter.begin(account.as_ref().map(Username::as_str), client, t) {
        tracing::warn!("login refused: too many failures");
        return Err(AppError::new(ErrorCode::LoginRateLimited));
    }
    // The same limits, counted in the database: every replica sees them.
    if !db::shared::begin_attempt(pool, account.as_ref().map(Username::as_str), client, t).await? {
        tracing::warn!("login refused: too many failures (all replicas)");
        return Err(AppError::new(ErrorCode::LoginRateLimited));
    }
    let Some(username) = account else {
        tracing::warn!("login failed: no such account");
        return Err(AppError::new(ErrorCode::LoginFailed));
    };
    let username = username.as_str();
    let row = db::users::by_username(pool, username).await?;
    if row.is_some() {
        tracing::Span::current().record("account", username);
    }
    let Some(_slot) = limiter.check_slot().await else {
        tracing::warn!("login refused: too many password checks waiting");
        return Err(AppError::new(ErrorCode::LoginRateLimited));
    };
    // Unknown users cost one verify, like known ones.
    // An account made at an OpenID Connect sign-in has no password (an
    // empty hash): it costs a decoy check and never verifies.
    let ok = match row.as_ref().filter(|r| !r.password_hash.is_empty()) {
        Some(r) => password::verify(secret.to_owned(), r.password_hash.clone()).await,
        None => password::verify_decoy(secret.to_owned()).await.map(|_| false),
    }
    .map_err(internal)?;
    let exists = row.is_some();
    let Some(row) = row.filter(|_| ok) else {
        tracing::warn!("login failed");
        if exists {
            super::audit::sign_in(pool, username, None, client).await;
        }
        return Err(AppError::new(ErrorCode::LoginFailed));
    };
    limiter.record_success(username, client);
    db::shared::attempt_succeeded(pool, username, client).await?;
    // Said only to whoever knows the password.
    if row.disabled_at.is_some() {
        tracing::warn!("login refused: the account is disabled");
        return Err(AppError::new(ErrorCode::AccountDisabled));
    }
    if local == LocalSignIn::Admins && !row.current_user().is_admin() {
        tracing::warn!("login refused: password sign-in is for admins only here");
        return Err(AppError::new(ErrorCode::LocalSignInOff));
    }
    let token = session::new_token();
    db::sessions::insert(pool, &session::token_hash(&token), row.id, session::TTL_SECS).await?;
    tracing::info!("signed in");
    super::audit::sign_in(pool, username, Some(&row.current_user()), client).await;
    Ok((row.current_user(), token))
}

#[tracing::instrument(skip_all)]
pub(crate) async fn logout(pool: &AnyPool, token: &str) -> Result<(), AppError> {
    db::sessions::delete(pool, &session::token_hash(token)).await?;
    Ok(())
}

/// The client's side of a sign-in or sign-out: the request's `Cookie` header
/// and whether the session cookie is `Secure` ([`crate::server::http::request::https`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cookies<'a> {
    pub header: Option<&'a str>,
    pub secure: bool,
}

impl<'a> Cookies<'a> {
    fn session(&self) -> Option<&'a str> {
        self.header.and_then(|c| session::token(c, self.secure))
    }
}

/// What the sign-in form and `POST /api/auth/login` both do: [`login`], end
/// the session this client had before (a new session per sign-in), and return
/// the user with the `Set-Cookie` value.
/// `local` is the operator's password sign-in policy: with `admins`, only
/// console admins sign in with a password (the way in while the provider is
/// down); with `off`, nobody.
pub(crate) async fn sign_in(
    pool: &AnyPool,
    limiter: &LoginLimiter,
    (username, secret): (&str, &str),
    client: &str,
    local: LocalSignIn,
    cookies: Cookies<'_>,
) -> Result<(CurrentUser, String), AppError> {
    if local == LocalSignIn::Off {
        return Err(AppError::new(ErrorCode::LocalSignInOff));
    }
    let (user, token) = login_as(pool, limiter, (username, secret), client, local).await?;
    Ok((user, open_session(pool, &token, cookies).await?))
}

/// The `Set-Cookie` of a new session, the client's previous one ended (a
/// new session per sign-in).
pub(crate) async fn open_session(pool: &AnyPool, token: &str, cookies: Cookies<'_>) -> Result<String, AppError> {
    if let Some(previous) = cookies.session() {
        logout(pool, previous).await?;
    }
    Ok(session::set_cookie(token, cookies.secure))
}

/// What the sign-out button and `POST /api/auth/logout` both do: end the
/// client's session, if it has one, and return the `Set-Cookie` value that
/// clears the cookie.
pub(crate) async fn sign_out(pool: &AnyPool, cookies: Cookies<'_>) -> Result<String, AppError> {
    if let Some(token) = cookies.session() {
        logout(pool, token).await?;
    }
    Ok(session::clear_cookie(cookies.secure))
}

/// The user behind a session cookie token.
#[tracing::instrument(skip_all)]
pub async fn user_for_token(pool: &AnyPool, token: &str) -> Result<Option<CurrentUser>, AppError> {
    Ok(db::sessions::user_for(pool, &session::token_hash(token), session::IDLE_SECS, session::TOUCH_SECS)
        .await?
        .map(|r| r.current_user()))
}

pub async fn list_users(pool: &AnyPool, admin: &CurrentUser) -> Result<Vec<UserSummary>, AppError> {
    admin.require_admin()?;
    let rows = db::users::list(pool).await?;
    Ok(rows
        .into_iter()
        .map(|r: UserRow| UserSummary {
            id: r.id,
            role: r.current_user().role,
            quota: r.quota(),
            disabled: r.disabled_at.is_some(),
            organisation: r.oidc_subject.is_some(),
            username: r.username,
            created_at: r.created_at,
        })
        .collect())
}

#[tracing::instrument(skip(pool, secret), fields(admin = %admin.username))]
pub async fn create_user(
    pool: &AnyPool,
    admin: &CurrentUser,
    username: &str,
    secret: &str,
    role: &str,
) -> Result<i64, AppError> {
    admin.require_admin()?;
    let username = Username::parse(username)?;
    let new_password = NewPassword::parse(secret)?;
    let role = Role::parse(role)?;
    let hash = password::hash(new_password.expose().to_owned()).await.map_err(internal)?;
    let id = db::users::insert(pool, &username, &hash, role).await.map_err(|e| {
        if e.is_unique_violation() { AppError::at(ErrorCode::UsernameTaken, Field::Username) } else { e.into() }
    })?;
    tracing::info!(user = %username, role = role.as_str(), "user created");
    let target = format!("user:{username}");
    super::audit::record(pool, admin, AuditAction::UserCreated, &target, &format!("role: {}", role.as_str())).await;
    Ok(id)
}

#[tracing::instrument(skip(pool, host), fields(admin = %admin.username))]
pub async fn set_role(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    admin: &CurrentUser,
    user_id: i64,
    role: &str,
) -> Result<(), AppError> {
    admin.require_admin()?;
    let role = Role::parse(role)?;
    let before = db::users::by_id(pool, user_id).await?;
    match db::users::set_role(pool, user_id, role).await? {
        RoleChange::Done => {
            tracing::info!(user = user_id, role = role.as_str(), "role changed");
            if let Some(before) = before {
                let was = before.current_user().role;
                let detail = format!("role: {} → {}", was.as_str(), role.as_str());
                let target = format!("user:{}", before.username);
                super::audit::record(pool, admin, AuditAction::RoleChanged, &target, &detail).await;
                if was != role {
                    // A console admin is every cluster's admin: each
                    // cluster's bindings change (in the background).
                    resync_all(pool, host).await;
                }
            }
            Ok(())
        }
        RoleChange::NoSuchUser => Err(AppError::new(ErrorCode::NotFound)),
        RoleChange::LastAdmin => Err(AppError::at(ErrorCode::LastAdmin, Field::Role)),
    }
}

#[tracing::instrument(skip(pool, secret), fields(admin = %admin.username))]
pub async fn reset_password(pool: &AnyPool, admin: &CurrentUser, user_id: i64, secret: &str) -> Result<(), AppError> {
    admin.require_admin()?;
    let new_password = NewPassword::parse(secret)?;
    // An organisation account signs in at its provider only: a password
    // here would be a second way in that the provider cannot take back.
    let row = db::users::by_id(pool, user_id).await?.ok_or(AppError::new(ErrorCode::NotFound))?;
    if row.oidc_subject.is_some() {
        return Err(AppError::at(ErrorCode::OrganisationAccount, Field::Password));
    }
    let hash = password::hash(new_password.expose().to_owned()).await.map_err(internal)?;
    if !db::users::set_password(pool, user_id, &hash).await? {
        return Err(AppError::new(ErrorCode::NotFound));
    }
    tracing::info!(user = user_id, "password reset; sessions ended");
    if let Some(row) = db::users::by_id(pool, user_id).await? {
        let target = format!("user:{}", row.username);
        super::audit::record(pool, admin, AuditAction::PasswordReset, &target, "sessions ended").await;
    }
    Ok(())
}

/// Every cluster's bindings brought in step (a console admin came or went).
pub(crate) async fn resync_all(pool: &AnyPool, host: Option<&HostHandle>) {
    match db::users::all_cluster_ids(pool).await {
        Ok(ids) => {
            super::credentials::resync(pool, host, &ids).await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "listing clusters to bring their bindings in step failed; the slow loop does")
        }
    }
}

/// Disables (`disabled`) or enables an account. A disabled account's
/// sessions end, it signs in no more, and every cluster's bindings drop it:
/// its kubeconfigs still authenticate but are authorised to nothing. An
/// admin cannot disable themself, nor the last enabled admin.
#[tracing::instrument(skip(pool, host), fields(admin = %admin.username))]
pub(crate) async fn set_disabled(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    admin: &CurrentUser,
    user_id: i64,
    disabled: bool,
) -> Result<(), AppError> {
    admin.require_admin()?;
    if disabled && user_id == admin.id {
        return Err(AppError::new(ErrorCode::CannotDisableSelf));
    }
    let row = db::users::by_id(pool, user_id).await?.ok_or(AppError::new(ErrorCode::NotFound))?;
    if row.disabled_at.is_some() == disabled {
        return Ok(());
    }
    match db::users::set_disabled(pool, user_id, disabled).await? {
        RoleChange::Done => {}
        RoleChange::NoSuchUser => return Err(AppError::new(ErrorCode::NotFound)),
        RoleChange::LastAdmin => return Err(AppError::new(ErrorCode::LastAdmin)),
    }
    tracing::info!(user = user_id, disabled, "account disabled or enabled");
    let (action, detail) = if disabled {
        (AuditAction::UserDisabled, "sessions ended; cluster bindings removed")
    } else {
        (AuditAction::UserEnabled, "")
    };
    super::audit::record(pool, admin, action, &format!("user:{}", row.username), detail).await;
    if row.current_user().is_admin() {
        resync_all(pool, host).await;
    } else {
        super::credentials::resync(pool, host, &db::users::clusters_reaching(pool, user_id).await?).await;
    }
    Ok(())
}

/// Creates the admin account, or resets its password and role if it exists
/// (the CLI and the first start). Returns true when the account was created.
#[tracing::instrument(skip(pool, secret))]
/// The first start's admin: created with `secret`, or left as another replica
/// created it a moment ago (its password stands). True when created here.
pub async fn create_first_admin(pool: &AnyPool, username: &str, secret: &str) -> Result<bool, AppError> {
    let username = Username::parse(username)?;
    let new_password = NewPassword::parse(secret)?;
    let hash = password::hash(new_password.expose().to_owned()).await.map_err(internal)?;
    match db::users::insert(pool, &username, &hash, Role::Admin).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_unique_violation() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub async fn upsert_admin(pool: &AnyPool, username: &str, secret: &str) -> Result<bool, AppError> {
    let username = Username::parse(username)?;
    let new_password = NewPassword::parse(secret)?;
    let hash = password::hash(new_password.expose().to_owned()).await.map_err(internal)?;
    match db::users::by_username(pool, username.as_str()).await? {
        // An organisation account gets no password (docs/runbooks/sign-in.md).
        Some(row) if row.oidc_subject.is_some() => Err(AppError::new(ErrorCode::OrganisationAccount)),
        Some(row) => {
            db::users::set_password_and_role(pool, row.id, &hash, Some(Role::Admin)).await?;
            Ok(false)
        }
        None => match db::users::insert(pool, &username, &hash, Role::Admin).await {
            Ok(_) => Ok(true),
            // Another replica's first start created it a moment ago.
            Err(e) if e.is_unique_violation() => {
                let row =
                    db::users::by_username(pool, username.as_str()).await?.ok_or(AppError::new(ErrorCode::Internal))?;
                db::users::set_password_and_role(pool, row.id, &hash, Some(Role::Admin)).await?;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        },
    }
}

/// An OpenID Connect sign-in the provider vouched for: [`oidc_account`],
/// then a session.
pub(crate) async fn sign_in_oidc(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    who: &crate::server::auth::oidc::Identity,
    client: &str,
    cookies: Cookies<'_>,
) -> Result<(CurrentUser, String), AppError> {
    let user = oidc_account(pool, host, who).await?;
    let token = session::new_token();
    db::sessions::insert(pool, &session::token_hash(&token), user.id, session::TTL_SECS).await?;
    tracing::info!(account = %user.username, "signed in with OpenID Connect");
    let detail = format!("client: {client}; OpenID Connect");
    super::audit::record(pool, &user, AuditAction::SignedIn, &format!("user:{}", user.username), &detail).await;
    Ok((user.clone(), open_session(pool, &token, cookies).await?))
}

/// The account of a subject the provider vouched for: made now if it is new
/// (named as the provider asks, if that name is free: a local account is
/// never taken over); its console role from the admin group and its teams
/// from the teams its groups name through the operator's prefix (those that
/// exist), both at each
/// sign-in, audited and put into the clusters' bindings. A disabled account
/// is refused.
#[tracing::instrument(skip_all, fields(account = tracing::field::Empty))]
pub async fn oidc_account(
    pool: &AnyPool,
    host: Option<&HostHandle>,
    who: &crate::server::auth::oidc::Identity,
) -> Result<CurrentUser, AppError> {
    let row = match db::users::by_oidc_subject(pool, &who.subject).await? {
        Some(row) => row,
        None => {
            let unusable = || AppError::new(ErrorCode::OidcUsernameUnusable);
            let name = who.username.as_deref().ok_or_else(unusable)?;
            let username = Username::parse(name).map_err(|_| unusable())?;
            // Made a user; the admin group (below) promotes, audited like any change.
            let role = Role::User;
            // Another account has the name (a local one, or another subject
            // whose e-mail shares the local part): refused in words, never
            // taken over or suffixed behind the person's back.
            let taken = || AppError::new(ErrorCode::OidcUsernameTaken);
            let id = db::users::insert_oidc(pool, &username, &who.subject, role)
                .await
                .map_err(|e| if e.is_unique_violation() { taken() } else { e.into() })?;
            tracing::info!(user = %username, role = role.as_str(), "account made at an OpenID Connect sign-in");
            db::users::by_id(pool, id).await?.ok_or(AppError::new(ErrorCode::Internal))?
        }
    };
    tracing::Span::current().record("account", row.username.as_str());
    if row.disabled_at.is_some() {
        tracing::warn!("OpenID Connect sign-in refused: the account is disabled");
        return Err(AppError::new(ErrorCode::AccountDisabled));
    }
    let mut user = row.current_user();
    let target = format!("user:{}", user.username);
    if let Some(admin) = who.admin {
        let want = if admin { Role::Admin } else { Role::User };
        if want != user.role && db::users::set_role(pool, user.id, want).await? == RoleChange::Done {
            let detail = format!("role: {} → {} (the provider's groups)", user.role.as_str(), want.as_str());
            user.role = want;
            super::audit::record(pool, &user, AuditAction::RoleChanged, &target, &detail).await;
            resync_all(pool, host).await;
        }
    }
    let mut changed = Vec::new();
    for team in db::members::teams(pool).await? {
        let (want, have) = (who.teams.contains(&team.name), team.members.contains(&user.username));
        if want != have && db::members::set_in_team(pool, team.id, user.id, want).await? {
            let action = if want { AuditAction::TeamMemberAdded } else { AuditAction::TeamMemberRemoved };
            let detail = format!("{target} (the provider's groups)");
            super::audit::record(pool, &user, action, &format!("team:{}", team.name), &detail).await;
            changed.extend(db::members::clusters_of_team(pool, team.id).await?);
        }
    }
    changed.sort_unstable();
    changed.dedup();
    super::credentials::resync(pool, host, &changed).await;
    Ok(user)
}
