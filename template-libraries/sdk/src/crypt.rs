//! Password hashes, checked by the host (`haptic:template/crypt@0.3.0`).
//!
//! `haproxy -c` accepts any string as a `userlist` password hash; at
//! runtime HAProxy hands the hash to crypt(3), and one it cannot compute
//! (Apache's `$apr1$`, which `htpasswd -m` writes, a truncated hash, a typo)
//! never matches, so every request of that user gets 401 without a word.
//! [`check_password_hash`] tells a library before it writes the line.
//!
//! Outside WebAssembly (native unit tests) there is no host: checks fail with
//! a message saying so. Test hashes with `haptic test` fixtures, which run on
//! the real host.

/// What the host found in a hash HAProxy will match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordHash {
    /// crypt(5)'s name for the scheme: `yescrypt`, `sha512-crypt`, `bcrypt`,
    /// `md5-crypt`, ...
    pub scheme: String,
    /// The scheme is weak or obsolete (DES, MD5, NT hash, SHA-1): HAProxy
    /// matches it, but the library should [warn](crate::Output::warning).
    pub weak: bool,
}

/// Checks that HAProxy will match passwords against `hash` at runtime. The
/// error is one sentence saying what is wrong and how to make a good hash;
/// it never contains the hash.
pub fn check_password_hash(hash: &str) -> Result<PasswordHash, String> {
    #[cfg(target_arch = "wasm32")]
    {
        crate::wit::haptic::template::crypt::check_password_hash(hash).map(|info| PasswordHash {
            scheme: info.scheme,
            weak: info.weak,
        })
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = hash;
        Err(
            "password hashes are checked by the haptic host; test them with `haptic test` fixtures"
                .to_owned(),
        )
    }
}

/// Users HAProxy will match (`(user, hash)`), and the others with why
/// (`(user, reason)`, never the hash).
pub type Users = (Vec<(String, String)>, Vec<(String, String)>);

/// The users of htpasswd text (`user:hash` lines) that HAProxy will match,
/// each hash checked with [`check_password_hash`]; the others come back
/// as `(user, why)` (never the hash), for a warning. A line whose user
/// name holds anything but `[A-Za-z0-9._@-]` cannot be a `userlist` word
/// and is left out as well.
pub fn htpasswd_users(text: &str) -> Users {
    users_of(text.lines().filter_map(|line| line.trim().split_once(':')))
}

/// [`htpasswd_users`] for pairs (`auth-map` Secrets: a key per user).
pub fn users_of<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Users {
    let mut usable = Vec::new();
    let mut refused = Vec::new();
    for (user, hash) in pairs {
        let user = user.trim();
        let hash = hash.trim();
        let safe_user = !user.is_empty()
            && user
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'));
        if !safe_user {
            refused.push((
                user.escape_debug().to_string(),
                "the user name may hold only letters, digits and . _ @ -".to_owned(),
            ));
            continue;
        }
        match check_password_hash(hash) {
            Ok(_) => usable.push((user.to_owned(), hash.to_owned())),
            Err(why) => refused.push((user.to_owned(), why)),
        }
    }
    (usable, refused)
}
