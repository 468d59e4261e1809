//! Annotation values parsed into typed values before anything reaches the
//! configuration. Each parser returns the reason a value is refused, which
//! becomes an `AnnotationInvalid` finding naming the Ingress and the
//! annotation; a refused value never becomes a config line.
//!
//! What comes out is safe to write: hosts, paths and URLs hold no
//! whitespace, quotes or control characters, and text that HAProxy reads
//! as a log-format string has its `%` doubled ([`log_format_literal`]).

use std::fmt;
use std::net::IpAddr;

/// Why an annotation's value is refused: the reason the migration report
/// gives (`AnnotationInvalid`). A type of its own, not any `String`, so a
/// refusal is never mistaken for a value and `?` carries it from one parser
/// through the ones built on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(String);

impl Invalid {
    /// The reason, as the report shows it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The reason, for the report's [`Status`](crate::report::Status).
    pub fn into_reason(self) -> String {
        self.0
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

impl From<String> for Invalid {
    fn from(reason: String) -> Self {
        Self(reason)
    }
}

impl From<&str> for Invalid {
    fn from(reason: &str) -> Self {
        Self(reason.to_owned())
    }
}

/// An [`Invalid`] with a formatted reason (`format!`'s arguments).
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::parse::Invalid::from(format!($($arg)*))
    };
}

/// `"true"` / `"false"` (ingress-nginx also takes Go's other spellings).
pub fn boolean(value: &str) -> Result<bool, Invalid> {
    match value.trim() {
        "true" | "True" | "TRUE" | "1" | "t" | "T" => Ok(true),
        "false" | "False" | "FALSE" | "0" | "f" | "F" => Ok(false),
        other => Err(invalid!("{other:?} is not \"true\" or \"false\"")),
    }
}

/// A whole number within `range`.
pub fn number(value: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, Invalid> {
    let n: u64 = value
        .trim()
        .parse()
        .map_err(|_| invalid!("{value:?} is not a whole number"))?;
    if !range.contains(&n) {
        return Err(invalid!(
            "{n} is outside {}..={}",
            range.start(),
            range.end()
        ));
    }
    Ok(n)
}

/// A timeout in seconds, as ingress-nginx writes them (`"60"`, also
/// `"60s"`), between 1 s and a day.
pub fn seconds(value: &str) -> Result<u64, Invalid> {
    let text = value.trim();
    let digits = text.strip_suffix('s').unwrap_or(text);
    number(digits, 1..=86_400)
        .map_err(|why| invalid!("{why} (a timeout in seconds, e.g. \"60\", from 1 to 86400)"))
}

/// An nginx size (`"8m"`, `"512k"`, `"1g"`, `"1024"` bytes) in bytes; `0`
/// means no limit, given back as `None`.
pub fn size(value: &str) -> Result<Option<u64>, Invalid> {
    let text = value.trim();
    let (digits, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], Some(c.to_ascii_lowercase())),
        _ => (text, None),
    };
    let factor: u64 = match unit {
        None => 1,
        Some('k') => 1 << 10,
        Some('m') => 1 << 20,
        Some('g') => 1 << 30,
        Some(other) => return Err(invalid!("{value:?}: unit {other:?} is not k, m or g")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| invalid!("{value:?} is not a size such as \"8m\", \"512k\" or \"1024\""))?;
    let bytes = n
        .checked_mul(factor)
        .ok_or_else(|| invalid!("{value:?} is too large"))?;
    Ok((bytes != 0).then_some(bytes))
}

/// A comma-separated list of addresses or CIDR blocks, normalized
/// (`10.0.0.0/8`, `192.168.1.1`, `2001:db8::/32`); at least one.
pub fn cidrs(value: &str) -> Result<Vec<String>, Invalid> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (address, prefix) = match item.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (item, None),
        };
        let ip: IpAddr = address
            .parse()
            .map_err(|_| invalid!("{item:?} is not an IP address or CIDR block"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        match prefix {
            None => out.push(ip.to_string()),
            Some(p) => {
                let bits: u8 =
                    p.parse().ok().filter(|b| *b <= max).ok_or_else(|| {
                        invalid!("{item:?}: prefix length {p:?} is not 0..={max}")
                    })?;
                out.push(format!("{ip}/{bits}"));
            }
        }
    }
    if out.is_empty() {
        return Err(Invalid::from("no address or CIDR block"));
    }
    Ok(out)
}

/// A DNS host name (`www.example.com`, lowercased); `*.` may start it when
/// `wildcard`.
pub fn host(value: &str, wildcard: bool) -> Result<String, Invalid> {
    let text = value.trim().to_ascii_lowercase();
    let labels = match text.strip_prefix("*.") {
        Some(rest) if wildcard => rest,
        _ => text.as_str(),
    };
    let good_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if text.len() > 253 || !labels.split('.').all(good_label) {
        return Err(invalid!("{value:?} is not a DNS host name"));
    }
    Ok(text)
}

/// A comma-separated list of host names (`server-alias`).
pub fn hosts(value: &str) -> Result<Vec<String>, Invalid> {
    let list: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|h| host(h, true))
        .collect::<Result<_, _>>()?;
    if list.is_empty() {
        return Err(Invalid::from("no host name"));
    }
    Ok(list)
}

/// Printable ASCII without spaces or quotes: what a URL, path or header
/// value may hold here.
fn plain(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'))
}

/// An absolute `http://` or `https://` URL (redirect targets).
pub fn url(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| invalid!("{text:?} is not an http:// or https:// URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() || !plain(text) {
        return Err(invalid!(
            "{text:?} is not a URL haptic can write (no spaces, quotes or backslashes)"
        ));
    }
    Ok(text.to_owned())
}

/// A path starting with `/` (app-root, x-forwarded-prefix).
pub fn path(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    if !text.starts_with('/') || !plain(text) {
        return Err(invalid!(
            "{text:?} is not a path starting with / (no spaces, quotes or backslashes)"
        ));
    }
    Ok(text.to_owned())
}

/// A redirect status: 300 to 308 except 305 and 306.
pub fn redirect_code(value: &str) -> Result<u16, Invalid> {
    let code = number(value, 300..=308)?;
    if code == 305 || code == 306 {
        return Err(invalid!("{code} is not a redirect HAProxy sends"));
    }
    Ok(code as u16)
}

/// Text HAProxy reads as a log-format string (redirect locations, header
/// values, replacement paths), made literal: `%` doubled.
pub fn log_format_literal(text: &str) -> String {
    text.replace('%', "%%")
}

/// A cookie name (RFC 6265 token).
pub fn cookie_name(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    // RFC 6265's token, without `#` (a comment outside quotes in
    // haproxy.cfg: the injection fuzz found `a#b` cutting a cookie line)
    // and quotes.
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!$&*+-.^_|~".contains(&b);
    if text.is_empty() || !text.bytes().all(token) {
        return Err(invalid!("{text:?} is not a cookie name"));
    }
    Ok(text.to_owned())
}

/// An HTTP header name (RFC 7230 token), lowercased.
pub fn header_name(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    // Without `#`: a comment outside quotes in haproxy.cfg.
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!$&*+-.^_|~".contains(&b);
    if text.is_empty() || !text.bytes().all(token) {
        return Err(invalid!("{text:?} is not a header name"));
    }
    Ok(text.to_ascii_lowercase())
}

/// One word of printable ASCII without quotes or backslashes.
pub fn plain_word(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\' | b'{' | b'}'))
    {
        return Err(invalid!(
            "{text:?} is not a single word without quotes, braces or backslashes"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size("8m"), Ok(Some(8 << 20)));
        assert_eq!(size("512K"), Ok(Some(512 << 10)));
        assert_eq!(size("1024"), Ok(Some(1024)));
        assert_eq!(size("0"), Ok(None));
        assert!(size("8x").is_err());
        assert!(size("m").is_err());
        assert!(size("99999999999999g").is_err());
    }

    #[test]
    fn cidr_lists() {
        assert_eq!(
            cidrs("10.0.0.0/8, 192.168.1.1,2001:db8::/32"),
            Ok(vec![
                "10.0.0.0/8".into(),
                "192.168.1.1".into(),
                "2001:db8::/32".into()
            ])
        );
        assert!(cidrs("10.0.0.0/33").is_err());
        assert!(cidrs("10.0.0.0/8 }").is_err());
        assert!(cidrs("").is_err());
    }

    #[test]
    fn timeouts_and_codes() {
        assert_eq!(seconds("60"), Ok(60));
        assert_eq!(seconds("5s"), Ok(5));
        assert!(seconds("0").is_err());
        assert!(seconds("1m").is_err());
        assert_eq!(redirect_code("308"), Ok(308));
        assert!(redirect_code("200").is_err());
        assert!(redirect_code("305").is_err());
    }

    #[test]
    fn urls_hosts_paths() {
        assert!(url("https://example.com/x?y=1").is_ok());
        assert!(url("https://example.com/a b").is_err());
        assert!(url("ftp://example.com").is_err());
        assert!(url("https://").is_err());
        assert!(url("https://e.com/'x").is_err());
        assert_eq!(host("WWW.Example.com", false), Ok("www.example.com".into()));
        assert!(host("*.example.com", false).is_err());
        assert!(host("*.example.com", true).is_ok());
        assert!(host("a..b", true).is_err());
        assert!(path("/app").is_ok());
        assert!(path("app").is_err());
        assert_eq!(log_format_literal("/a%20b"), "/a%%20b");
        assert!(cookie_name("route").is_ok());
        assert!(cookie_name("a b").is_err());
        assert!(cookie_name("a;b").is_err());
        assert!(
            cookie_name("a#b").is_err(),
            "# starts a comment in haproxy.cfg"
        );
    }
}
