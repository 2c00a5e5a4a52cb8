//! Values the console seals for a browser to carry back (ChaCha20-Poly1305
//! under a key of the console's, `console_keys`): the browser can neither
//! read nor alter them, and the console need not store them. Each value is
//! bound to its purpose (the associated data), so one sealed for one use is
//! refused for another.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// A key's length in bytes.
const KEY_LEN: usize = 32;

pub(crate) struct Sealer {
    key: LessSafeKey,
}

impl Sealer {
    /// The sealer of a key given as hex (`None`: not a 32-byte key).
    pub(crate) fn from_hex(secret: &str) -> Option<Self> {
        let bytes = hex::decode(secret.trim()).ok().filter(|b| b.len() == KEY_LEN)?;
        Some(Self { key: LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &bytes).ok()?) })
    }

    /// A new random key, as hex (what `console_keys` stores).
    pub(crate) fn fresh_secret() -> Option<String> {
        let mut key = [0u8; KEY_LEN];
        SystemRandom::new().fill(&mut key).ok()?;
        Some(hex::encode(key))
    }

    /// `plain` sealed for `purpose`: base64url (no padding) of a random
    /// nonce followed by the ciphertext and its tag — a cookie-safe value.
    pub(crate) fn seal(&self, purpose: &str, plain: &[u8]) -> Option<String> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).ok()?;
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(purpose.as_bytes()), &mut sealed)
            .ok()?;
        let mut out = nonce.to_vec();
        out.append(&mut sealed);
        Some(URL_SAFE_NO_PAD.encode(out))
    }

    /// What `seal` sealed for `purpose` under this key; `None` for anything
    /// else (altered, truncated, another key or purpose, not base64url).
    pub(crate) fn open(&self, purpose: &str, sealed: &str) -> Option<Vec<u8>> {
        let mut bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let mut body = bytes.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&bytes).ok()?;
        let plain = self.key.open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut body).ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer::from_hex(&Sealer::fresh_secret().unwrap()).unwrap()
    }

    #[test]
    fn keys_are_32_bytes_of_hex() {
        let fresh = Sealer::fresh_secret().unwrap();
        assert_eq!(fresh.len(), 64);
        assert_ne!(fresh, Sealer::fresh_secret().unwrap(), "each key is new");
        for bad in ["", "zz", &fresh[..62], &format!("{fresh}00"), &fresh.replace(|c: char| c.is_ascii_digit(), "g")] {
            assert!(Sealer::from_hex(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn only_the_same_key_and_purpose_open_what_was_sealed_unaltered() {
        let s = sealer();
        let sealed = s.seal("oidc", b"the pending sign-in").unwrap();
        assert!(sealed.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{sealed}");
        assert_eq!(s.open("oidc", &sealed).as_deref(), Some(&b"the pending sign-in"[..]));
        assert_ne!(sealed, s.seal("oidc", b"the pending sign-in").unwrap(), "a new nonce each time");
        let mut flipped = sealed.clone().into_bytes();
        let last = flipped.len() - 3;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        for (what, key, purpose, value) in [
            ("another purpose", &s, "session", sealed.as_str()),
            ("another key", &sealer(), "oidc", sealed.as_str()),
            ("one character changed", &s, "oidc", flipped.as_str()),
            ("truncated", &s, "oidc", &sealed[..sealed.len() - 4]),
            ("the nonce alone", &s, "oidc", &sealed[..16]),
            ("empty", &s, "oidc", ""),
            ("not base64url", &s, "oidc", "état+/="),
        ] {
            assert_eq!(key.open(purpose, value), None, "{what}");
        }
    }
}
