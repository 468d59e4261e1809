//! Password hashes as HAProxy's `userlist` matches them
//! (`haptic:template/crypt@0.3.0`).
//!
//! `haproxy -c` stores whatever follows `password` unchecked. At runtime
//! Debian's HAProxy 2.6 passes the stored hash as the setting to
//! libxcrypt's crypt(3) and compares the result with it, so a hash of a
//! scheme libxcrypt cannot compute, or a truncated one, never matches and
//! every user of it gets 401 without a log line. Measured with HAProxy
//! 2.6.12 and libxcrypt 4.4.33 (Debian 12), `tests/crypt.rs` keeps it true:
//! every scheme below matched its password; `$apr1$` (what `htpasswd -m`
//! writes), `notahash`, `$6$bad` and a SHA-512 hash one character short
//! never did.
//!
//! The check reads the hash's structure (scheme prefix, parameters, salt,
//! digest length and alphabet) rather than computing anything: the host
//! holds no password, and the structure is what decides whether crypt(3)
//! can reproduce the hash. No crate covers libxcrypt's full set (yescrypt,
//! gost-yescrypt, scrypt); calling libxcrypt itself would need `unsafe`,
//! which the workspace forbids.

use thiserror::Error;

/// A scheme libxcrypt computes, as named in its documentation (crypt(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Yescrypt,
    GostYescrypt,
    Scrypt,
    Bcrypt,
    Sha512Crypt,
    Sha256Crypt,
    Sha1Crypt,
    SunMd5,
    Md5Crypt,
    BsdiCrypt,
    NtHash,
    DesCrypt,
}

impl Scheme {
    /// crypt(5)'s name for the scheme.
    pub fn name(self) -> &'static str {
        match self {
            Self::Yescrypt => "yescrypt",
            Self::GostYescrypt => "gost-yescrypt",
            Self::Scrypt => "scrypt",
            Self::Bcrypt => "bcrypt",
            Self::Sha512Crypt => "sha512-crypt",
            Self::Sha256Crypt => "sha256-crypt",
            Self::Sha1Crypt => "sha1-crypt",
            Self::SunMd5 => "sun-md5",
            Self::Md5Crypt => "md5-crypt",
            Self::BsdiCrypt => "bsdi-crypt",
            Self::NtHash => "nt-hash",
            Self::DesCrypt => "des-crypt",
        }
    }

    /// crypt(5) lists the scheme as weak or obsolete: HAProxy still matches
    /// it, but its hashes fall to a brute-force search.
    pub fn is_weak(self) -> bool {
        !matches!(
            self,
            Self::Yescrypt
                | Self::GostYescrypt
                | Self::Scrypt
                | Self::Bcrypt
                | Self::Sha512Crypt
                | Self::Sha256Crypt
        )
    }
}

/// Why HAProxy would never match a password against a hash. The messages
/// never quote the hash.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HashError {
    #[error("the password hash is empty")]
    Empty,
    #[error(
        "`$apr1$` (Apache MD5, what `htpasswd -m` writes) is not a crypt(3) scheme and HAProxy never \
         matches it; create the hash with `mkpasswd -m sha-512` or `htpasswd -B` (bcrypt)"
    )]
    ApacheMd5,
    #[error(
        "`{{SHA}}` (Apache SHA-1, what `htpasswd -s` writes) is not a crypt(3) scheme and HAProxy \
         never matches it; create the hash with `mkpasswd -m sha-512` or `htpasswd -B` (bcrypt)"
    )]
    ApacheSha1,
    #[error(
        "the password hash has no scheme HAProxy's crypt(3) knows (it should start with `$y$`, \
         `$6$`, `$2b$` or another crypt(5) prefix); create it with `mkpasswd -m sha-512`"
    )]
    UnknownScheme,
    #[error(
        "the {scheme} password hash is malformed ({why}), so HAProxy would never match it; \
         create it again, e.g. with `mkpasswd -m sha-512`"
    )]
    Malformed {
        scheme: &'static str,
        why: &'static str,
    },
}

/// Checks that HAProxy will match passwords against `hash` at runtime and
/// names its scheme.
pub fn check_password_hash(hash: &str) -> Result<Scheme, HashError> {
    if hash.is_empty() {
        return Err(HashError::Empty);
    }
    if hash.starts_with("$apr1$") {
        return Err(HashError::ApacheMd5);
    }
    if hash.starts_with("{SHA}") {
        return Err(HashError::ApacheSha1);
    }
    let scheme = scheme_of(hash).ok_or(HashError::UnknownScheme)?;
    check_structure(scheme, hash).map_err(|why| HashError::Malformed {
        scheme: scheme.name(),
        why,
    })?;
    Ok(scheme)
}

fn scheme_of(hash: &str) -> Option<Scheme> {
    const PREFIXES: &[(&str, Scheme)] = &[
        ("$y$", Scheme::Yescrypt),
        ("$gy$", Scheme::GostYescrypt),
        ("$7$", Scheme::Scrypt),
        ("$2b$", Scheme::Bcrypt),
        ("$2a$", Scheme::Bcrypt),
        ("$2y$", Scheme::Bcrypt),
        ("$6$", Scheme::Sha512Crypt),
        ("$5$", Scheme::Sha256Crypt),
        ("$sha1$", Scheme::Sha1Crypt),
        ("$md5", Scheme::SunMd5),
        ("$1$", Scheme::Md5Crypt),
        ("$3$", Scheme::NtHash),
        ("_", Scheme::BsdiCrypt),
    ];
    PREFIXES
        .iter()
        .find(|(prefix, _)| hash.starts_with(prefix))
        .map(|(_, scheme)| *scheme)
        .or_else(|| (hash.len() == 13 && is_b64(hash)).then_some(Scheme::DesCrypt))
}

/// crypt(3)'s base-64 alphabet.
fn is_b64(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/')
}

fn digest(text: &str, length: usize) -> Result<(), &'static str> {
    if text.len() != length {
        return Err("its digest has the wrong length");
    }
    if !is_b64(text) {
        return Err("its digest has characters outside crypt's alphabet");
    }
    Ok(())
}

fn check_structure(scheme: Scheme, hash: &str) -> Result<(), &'static str> {
    // Fields after the scheme prefix, split at `$`.
    let fields = |prefix: &str| -> Vec<&str> {
        hash.get(prefix.len()..)
            .unwrap_or_default()
            .split('$')
            .collect()
    };
    match scheme {
        Scheme::Yescrypt | Scheme::GostYescrypt | Scheme::Scrypt => {
            let prefix = match scheme {
                Scheme::Yescrypt => "$y$",
                Scheme::GostYescrypt => "$gy$",
                _ => "$7$",
            };
            let parts = fields(prefix);
            let (params, salt, hashed) = match parts.as_slice() {
                [params, salt, hashed] => (*params, *salt, *hashed),
                [params_and_salt, hashed] if scheme == Scheme::Scrypt => {
                    (*params_and_salt, "", *hashed)
                }
                _ => return Err("it needs parameters, a salt and a digest between `$` signs"),
            };
            if params.is_empty() || !is_b64(params) || !is_b64(salt) {
                return Err("its parameters or salt have characters outside crypt's alphabet");
            }
            digest(hashed, 43)
        }
        Scheme::Bcrypt => {
            let parts = fields("$2b$");
            let [cost, rest] = parts.as_slice() else {
                return Err("it needs a cost and a salted digest between `$` signs");
            };
            match cost.parse::<u8>() {
                Ok(4..=31) if cost.len() == 2 => {}
                _ => return Err("its cost must be two digits from 04 to 31"),
            }
            digest(rest, 53)
        }
        Scheme::Sha512Crypt | Scheme::Sha256Crypt => {
            let length = if scheme == Scheme::Sha512Crypt {
                86
            } else {
                43
            };
            let parts = fields("$6$");
            let (salt, hashed) = match parts.as_slice() {
                [rounds, salt, hashed] if rounds.starts_with("rounds=") => {
                    match rounds["rounds=".len()..].parse::<u64>() {
                        Ok(1_000..=999_999_999) => {}
                        _ => return Err("its rounds must be a number from 1000 to 999999999"),
                    }
                    (*salt, *hashed)
                }
                [salt, hashed] => (*salt, *hashed),
                _ => return Err("it needs a salt and a digest between `$` signs"),
            };
            if salt.len() > 16 {
                return Err("its salt is longer than 16 characters");
            }
            digest(hashed, length)
        }
        Scheme::Sha1Crypt => {
            let parts = fields("$sha1$");
            let [rounds, salt, hashed] = parts.as_slice() else {
                return Err("it needs rounds, a salt and a digest between `$` signs");
            };
            if rounds.parse::<u32>().is_err() || salt.is_empty() || salt.len() > 64 {
                return Err("its rounds or salt are out of range");
            }
            digest(hashed, 28)
        }
        Scheme::SunMd5 => {
            // `$md5[,rounds=N]$salt$$digest` (or one `$` before the digest).
            let rest = hash.get("$md5".len()..).unwrap_or_default();
            let rest = match rest.strip_prefix(",rounds=") {
                Some(rounds) => {
                    let digits = rounds.bytes().take_while(u8::is_ascii_digit).count();
                    if digits == 0 {
                        return Err("its rounds must be a number");
                    }
                    &rounds[digits..]
                }
                None => rest,
            };
            let Some(rest) = rest.strip_prefix('$') else {
                return Err("it needs a salt and a digest between `$` signs");
            };
            let Some((salt, hashed)) = rest.split_once('$') else {
                return Err("it needs a salt and a digest between `$` signs");
            };
            if salt.is_empty() || !is_b64(salt) {
                return Err("its salt is empty or has characters outside crypt's alphabet");
            }
            digest(hashed.strip_prefix('$').unwrap_or(hashed), 22)
        }
        Scheme::Md5Crypt => {
            let parts = fields("$1$");
            let [salt, hashed] = parts.as_slice() else {
                return Err("it needs a salt and a digest between `$` signs");
            };
            if salt.len() > 8 {
                return Err("its salt is longer than 8 characters");
            }
            digest(hashed, 22)
        }
        Scheme::NtHash => {
            let hex = hash
                .strip_prefix("$3$$")
                .ok_or("it must start with `$3$$`")?;
            if hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                Ok(())
            } else {
                Err("its digest must be 32 lowercase hexadecimal digits")
            }
        }
        Scheme::BsdiCrypt => digest(&hash[1..], 19),
        Scheme::DesCrypt => digest(hash, 13),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_quote_the_hash() {
        for hash in [
            "$apr1$abcdefgh$5VEbMkemELfbhC5ck.U.z1",
            "notahash",
            "$6$bad",
        ] {
            let error = check_password_hash(hash).expect_err("refused").to_string();
            assert!(!error.contains(hash), "{error}");
        }
    }

    #[test]
    fn weak_schemes_are_flagged() {
        assert!(Scheme::DesCrypt.is_weak());
        assert!(Scheme::Md5Crypt.is_weak());
        assert!(!Scheme::Yescrypt.is_weak());
        assert!(!Scheme::Sha512Crypt.is_weak());
    }
}
