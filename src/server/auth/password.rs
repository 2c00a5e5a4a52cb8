//! Argon2id password hashes (PHC strings). Hashing runs off the async runtime.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("hashing failed: {0}")]
    Hash(String),
    #[error("hashing task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

pub async fn hash(password: String) -> Result<String, PasswordError> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| PasswordError::Hash(e.to_string()))
    })
    .await?
}

/// False for a wrong password and for an unreadable stored hash.
pub(crate) async fn verify(password: String, stored: String) -> Result<bool, PasswordError> {
    Ok(tokio::task::spawn_blocking(move || {
        PasswordHash::new(&stored)
            .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
            .unwrap_or(false)
    })
    .await?)
}

/// Verifies against a hash of a random password (made once): what an unknown
/// username costs, so it takes as long as a wrong password. Always false.
pub(crate) async fn verify_decoy(password: String) -> Result<bool, PasswordError> {
    static DECOY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    let decoy = DECOY.get_or_try_init(|| hash(generate_password())).await?;
    verify(password, decoy.clone()).await.map(|_| false)
}

/// A random password for the bootstrap admin: 20 characters, ~119 bits.
pub fn generate_password() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::thread_rng();
    (0..20).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hash_and_verify() {
        let h = hash("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse battery".into(), h.clone()).await.unwrap());
        assert!(!verify("wrong horse battery".into(), h).await.unwrap());
        assert!(!verify("x".into(), "not a hash".into()).await.unwrap());
    }

    #[test]
    fn generated_passwords_differ_and_meet_the_policy() {
        let (a, b) = (generate_password(), generate_password());
        assert_ne!(a, b);
        assert!(crate::domain::user::NewPassword::parse(&a).is_ok());
    }
}
