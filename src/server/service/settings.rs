//! Reading and changing the platform defaults (admins only for changes).

use sqlx::AnyPool;

use crate::domain::settings::SettingsInput;
use crate::domain::user::CurrentUser;
use crate::domain::{AppError, ErrorCode, SystemSettings};
use crate::server::db;

pub async fn get(pool: &AnyPool) -> Result<SystemSettings, AppError> {
    Ok(db::settings::load(pool).await?)
}

pub async fn update(pool: &AnyPool, user: &CurrentUser, input: &SettingsInput<'_>) -> Result<SystemSettings, AppError> {
    if !user.is_admin() {
        return Err(AppError::new(ErrorCode::Forbidden));
    }
    let settings = SystemSettings::parse(input)?;
    db::settings::save(pool, &settings).await?;
    tracing::info!(admin = %user.username, default_mode = %settings.default_mode, "system settings changed");
    Ok(settings)
}
