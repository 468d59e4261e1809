//! The original request, as an SPOE message's arguments carry it
//! (docs/spoa.md: `profile`, `method`, `tls`, `host`, `pathq`, `src`,
//! `headers`, and `body` in a mirror message).

use std::net::IpAddr;

use spop::TypedData;
use spop::frame::Message;
use thiserror::Error;

/// The request HAProxy is processing, as far as a sub-request needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginalRequest {
    /// The profile the route asked for (`ingress-nginx.shop.web`).
    pub profile: String,
    pub method: String,
    /// The client reached HAProxy over TLS (`ssl_fc`).
    pub tls: bool,
    /// The Host header (or HTTP/2 `:authority`), empty when absent.
    pub host: String,
    /// Path and query as HAProxy normalized them (`pathq`).
    pub path_and_query: String,
    /// The client's address (`src`), when HAProxy knows it.
    pub client: Option<IpAddr>,
    /// Every request header in order, names lower-cased by HAProxy.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The whole body, when the message carries one (a mirror of a route
    /// that copies bodies; HAProxy sends it only when it holds all of it).
    pub body: Option<bytes::Bytes>,
}

/// A message HAProxy sent does not carry what docs/spoa.md says it does: the
/// configuration that sent it does not match this agent.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("argument `{0}` is missing or not of the documented type (docs/spoa.md)")]
    Argument(&'static str),
    #[error("argument `headers` is not HAProxy's `req.hdrs_bin` encoding")]
    Headers,
}

impl OriginalRequest {
    pub fn from_message(message: &Message) -> Result<Self, RequestError> {
        let text = |name: &'static str| match message.get(name) {
            Some(TypedData::String(value)) => Ok(value.clone()),
            Some(TypedData::Binary(value)) => Ok(String::from_utf8_lossy(value).into_owned()),
            // HAProxy sends a fetch that found nothing as NULL.
            Some(TypedData::Null) | None => Err(RequestError::Argument(name)),
            Some(_) => Err(RequestError::Argument(name)),
        };
        let optional_text = |name: &'static str| text(name).unwrap_or_default();
        let tls = matches!(message.get("tls"), Some(TypedData::Bool(true)));
        let client = match message.get("src") {
            Some(TypedData::IPv4(ip)) => Some(IpAddr::V4(*ip)),
            Some(TypedData::IPv6(ip)) => Some(IpAddr::V6(*ip)),
            _ => None,
        };
        let headers = match message.get("headers") {
            Some(TypedData::Binary(bytes)) => decode_headers(bytes)?,
            Some(TypedData::Null) | None => Vec::new(),
            Some(_) => return Err(RequestError::Headers),
        };
        let body = match message.get("body") {
            Some(TypedData::Binary(bytes)) => Some(bytes::Bytes::copy_from_slice(bytes)),
            Some(TypedData::String(text)) => Some(bytes::Bytes::copy_from_slice(text.as_bytes())),
            _ => None,
        };
        Ok(Self {
            profile: text("profile")?,
            method: text("method")?,
            tls,
            host: optional_text("host"),
            path_and_query: text("pathq")?,
            client,
            headers,
            body,
        })
    }

    /// `http` or `https`, as nginx's `$scheme`.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// The first header named `name` (case-insensitive), as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| String::from_utf8_lossy(value).into_owned())
    }

    /// The value of cookie `name` in the Cookie headers.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .flat_map(|(_, value)| {
                String::from_utf8_lossy(value)
                    .split(';')
                    .map(|pair| pair.trim().to_owned())
                    .collect::<Vec<_>>()
            })
            .find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key.trim() == name).then(|| value.trim().to_owned())
            })
    }

    /// The value of query argument `name`, as sent (not decoded), as nginx's
    /// `$arg_<name>`.
    pub fn argument(&self, name: &str) -> Option<String> {
        let (_, query) = self.path_and_query.split_once('?')?;
        query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key == name).then(|| value.to_owned())
        })
    }
}

/// The nginx variables a profile's text may use, as ingress-nginx
/// annotations write them (`https://$host/oauth2/start?rd=$escaped_request_uri`).
/// Libraries refuse any other `$name`, so an unknown one never reaches here;
/// if one does, it stays as written.
pub const VARIABLES: &[&str] = &[
    "$escaped_request_uri",
    "$pass_access_scheme",
    "$request_method",
    "$remote_addr",
    "$request_uri",
    "$http_host",
    "$scheme",
    "$host",
    "$uri",
    "$args",
];

impl OriginalRequest {
    /// `template` with every variable of [`VARIABLES`], `$http_<name>`,
    /// `$cookie_<name>` and `$arg_<name>` replaced by this request's value
    /// (empty when absent), as nginx would.
    pub fn expand(&self, template: &str) -> String {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            let name_len = rest[1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(rest.len(), |end| end + 1);
            let name = &rest[..name_len];
            match self.variable(name) {
                Some(value) => out.push_str(&value),
                None => out.push_str(name),
            }
            rest = &rest[name_len..];
        }
        out.push_str(rest);
        out
    }

    fn variable(&self, name: &str) -> Option<String> {
        let path = self
            .path_and_query
            .split_once('?')
            .map_or(self.path_and_query.as_str(), |(path, _)| path);
        Some(match name {
            "$host" | "$http_host" => self.host.clone(),
            "$scheme" | "$pass_access_scheme" => self.scheme().to_owned(),
            "$request_uri" => self.path_and_query.clone(),
            "$escaped_request_uri" => escape_component(&self.path_and_query),
            "$request_method" => self.method.clone(),
            "$remote_addr" => self.client.map(|ip| ip.to_string()).unwrap_or_default(),
            "$uri" => path.to_owned(),
            "$args" => self
                .path_and_query
                .split_once('?')
                .map(|(_, query)| query.to_owned())
                .unwrap_or_default(),
            _ => {
                if let Some(header) = name.strip_prefix("$http_") {
                    self.header(&header.replace('_', "-")).unwrap_or_default()
                } else if let Some(cookie) = name.strip_prefix("$cookie_") {
                    self.cookie(cookie).unwrap_or_default()
                } else if let Some(argument) = name.strip_prefix("$arg_") {
                    self.argument(argument).unwrap_or_default()
                } else {
                    return None;
                }
            }
        })
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, as
/// nginx's `$escaped_request_uri` (ingress-nginx's `rd` parameter).
pub fn escape_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3 / 2);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Decodes `req.hdrs_bin`: for each header its name and value, each as a
/// varint length and the bytes, ended by two empty strings.
pub fn decode_headers(mut input: &[u8]) -> Result<Vec<(String, Vec<u8>)>, RequestError> {
    let mut headers = Vec::new();
    let field = |input: &mut &[u8]| -> Result<Vec<u8>, RequestError> {
        let (rest, length) = spop::decode_varint(input).map_err(|_| RequestError::Headers)?;
        let length = usize::try_from(length).map_err(|_| RequestError::Headers)?;
        if rest.len() < length {
            return Err(RequestError::Headers);
        }
        let (value, rest) = rest.split_at(length);
        *input = rest;
        Ok(value.to_vec())
    };
    while !input.is_empty() {
        let name = field(&mut input)?;
        let value = field(&mut input)?;
        if name.is_empty() {
            break;
        }
        headers.push((String::from_utf8_lossy(&name).into_owned(), value));
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(headers: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in headers.iter().chain(&[("", "")]) {
            for part in [name, value] {
                spop::encode_varint_into(part.len() as u64, &mut out);
                out.extend_from_slice(part.as_bytes());
            }
        }
        out
    }

    #[test]
    fn headers_decode_in_order_and_truncation_is_an_error() {
        let long = "x".repeat(300);
        let bytes = encode(&[
            ("host", "a.test"),
            ("cookie", "a=1; b=2"),
            ("x-long", &long),
        ]);
        let headers = decode_headers(&bytes).expect("decodes");
        assert_eq!(headers.len(), 3);
        assert_eq!(headers[2].1.len(), 300);
        assert_eq!(
            decode_headers(&bytes[..bytes.len() - 310]),
            Err(RequestError::Headers)
        );
    }

    #[test]
    fn cookies_and_arguments_are_found_by_name() {
        let request = OriginalRequest {
            profile: "p".into(),
            method: "GET".into(),
            tls: false,
            host: "a.test".into(),
            path_and_query: "/x?rd=%2Fy&b".into(),
            client: None,
            headers: vec![("cookie".into(), b"a=1; _oauth2_proxy=abc".to_vec())],
            body: None,
        };
        assert_eq!(request.cookie("_oauth2_proxy").as_deref(), Some("abc"));
        assert_eq!(request.cookie("missing"), None);
        assert_eq!(request.argument("rd").as_deref(), Some("%2Fy"));
        assert_eq!(request.argument("b").as_deref(), Some(""));
        assert_eq!(
            request.expand("https://$host/start?rd=$escaped_request_uri&c=$cookie_a$nope"),
            "https://a.test/start?rd=%2Fx%3Frd%3D%252Fy%26b&c=1$nope"
        );
        assert_eq!(
            request.expand("$scheme://$http_host$uri"),
            "http://a.test/x"
        );
    }
}
