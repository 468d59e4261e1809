//! The `haptic-auth` message: ask the route's auth service about the
//! request, as ingress-nginx's `auth_request` does, and answer HAProxy with
//! the verdict as variables (docs/spoa.md):
//!
//! - 2xx: `status` 200, each header the profile names as
//!   `hdr_<name, lower-case, - as _>` (absent headers unset, so a client
//!   cannot forge them), the auth service's cookies as `cookie_<n>`;
//! - 401 with a sign-in page: `status` 302 and `location`;
//! - 401 or 403: that status;
//! - anything else, no answer within the profile's timeout, an unknown
//!   profile: `status` 500. Authentication fails closed.
//!
//! A profile with `answers: pass-through` (the Gateway API's `ExternalAuth`)
//! lets only a 200 through and hands any other status to the client as the
//! auth service gave it, with its `Location` (`location`),
//! `WWW-Authenticate` (`www_authenticate`) and cookies; the library's rules
//! answer the statuses HAProxy can (docs/spoa.md).

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode, Uri};
use lru::LruCache;
use spop::VarScope;
use spop::frames::Ack;

use super::outbound::{Outbound, is_hop_by_hop};
use super::profiles::{Answers, AuthProfile};
use super::request::{OriginalRequest, escape_component};
use super::{CacheLabels, SpoaMetrics};

/// Most answers the cache keeps, across every profile.
const CACHE_ENTRIES: usize = 10_000;
/// Most `Set-Cookie` headers passed back to the client.
pub const MAX_COOKIES: usize = 4;
/// What HAProxy is told to do with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// 200 (let it through), 302 (to `location`), 401, 403 or 500; under
    /// `answers: pass-through`, the auth service's status.
    pub status: u16,
    pub location: Option<String>,
    /// The auth service's `WWW-Authenticate`, passed to the client with a
    /// pass-through denial.
    pub www_authenticate: Option<String>,
    /// Header name (as the profile wrote it) and value, for a 200.
    pub headers: Vec<(String, String)>,
    pub cookies: Vec<String>,
}

impl Verdict {
    /// The `result` label values of `haptic_spoa_messages_total`.
    pub const NAMES: &[&str] = &[
        "allowed",
        "redirected",
        "unauthorized",
        "forbidden",
        "denied",
        "failed",
    ];

    /// Refused with 500: the auth service could not decide.
    pub fn failed() -> Self {
        Self::status(500)
    }

    fn status(status: u16) -> Self {
        Self {
            status,
            location: None,
            www_authenticate: None,
            headers: Vec::new(),
            cookies: Vec::new(),
        }
    }

    pub fn name(&self) -> &'static str {
        match self.status {
            200 => "allowed",
            300..=399 => "redirected",
            401 => "unauthorized",
            403 => "forbidden",
            400..=499 => "denied",
            _ => "failed",
        }
    }

    /// The verdict as `set-var` actions (scope `txn`).
    pub fn into_ack(self, ack: Ack) -> Ack {
        let mut ack = ack.set_var(VarScope::Transaction, "status", u32::from(self.status));
        if let Some(location) = self.location {
            ack = ack.set_var(VarScope::Transaction, "location", location);
        }
        if let Some(challenge) = self.www_authenticate {
            ack = ack.set_var(VarScope::Transaction, "www_authenticate", challenge);
        }
        for (name, value) in self.headers {
            ack = ack.set_var(VarScope::Transaction, &header_variable(&name), value);
        }
        for (n, cookie) in self.cookies.into_iter().enumerate() {
            ack = ack.set_var(VarScope::Transaction, &format!("cookie_{n}"), cookie);
        }
        ack
    }
}

/// The variable (without HAProxy's prefix) a copied header comes back in:
/// `X-Auth-Request-User` -> `hdr_x_auth_request_user`. Libraries write the
/// same name (docs/spoa.md).
pub fn header_variable(name: &str) -> String {
    let mut variable = String::from("hdr_");
    variable.extend(name.chars().map(|c| match c.to_ascii_lowercase() {
        c if c.is_ascii_alphanumeric() => c,
        _ => '_',
    }));
    variable
}

/// Sub-requests to auth services through the agent's one client, and the
/// bounded answer cache.
pub struct Authenticator {
    outbound: Outbound,
    cache: Mutex<LruCache<String, (Instant, Verdict)>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").finish_non_exhaustive()
    }
}

impl Authenticator {
    pub fn new(outbound: Outbound) -> Self {
        Self {
            outbound,
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(CACHE_ENTRIES).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    /// The verdict on `request` under `profile`.
    pub async fn check(
        &self,
        profile: &AuthProfile,
        request: &OriginalRequest,
        metrics: &SpoaMetrics,
    ) -> Verdict {
        let cache_key = profile.cache.as_ref().map(|rule| {
            format!(
                "{}\u{0}{}\u{0}{}",
                request.profile,
                profile.url,
                request.expand(&rule.key)
            )
        });
        if let Some(key) = &cache_key {
            let hit = self.cached(key);
            metrics
                .auth_cache
                .get_or_create(&CacheLabels {
                    result: if hit.is_some() { "hit" } else { "miss" },
                })
                .inc();
            if let Some(verdict) = hit {
                return verdict;
            }
        }
        let started = Instant::now();
        let answer = tokio::time::timeout(profile.timeout(), self.ask(profile, request)).await;
        metrics
            .auth_seconds
            .observe(started.elapsed().as_secs_f64());
        let (status, headers) = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                tracing::warn!(profile = %request.profile, %error, "the auth service could not be asked; the request is refused (500)");
                return Verdict::failed();
            }
            Err(_) => {
                tracing::warn!(profile = %request.profile, timeout_ms = profile.timeout_ms, "the auth service did not answer in time; the request is refused (500)");
                return Verdict::failed();
            }
        };
        let verdict = verdict(profile, request, status, &headers);
        if let (Some(key), Some(rule)) = (cache_key, &profile.cache)
            && rule.statuses.contains(&status.as_u16())
        {
            let expires = Instant::now() + Duration::from_secs(rule.seconds);
            self.cache
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .put(key, (expires, verdict.clone()));
        }
        verdict
    }

    fn cached(&self, key: &str) -> Option<Verdict> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        match cache.get(key) {
            Some((expires, verdict)) if *expires > Instant::now() => Some(verdict.clone()),
            Some(_) => {
                cache.pop(key);
                None
            }
            None => None,
        }
    }

    async fn ask(
        &self,
        profile: &AuthProfile,
        request: &OriginalRequest,
    ) -> Result<(StatusCode, hyper::HeaderMap), String> {
        let url: Uri = request
            .expand(&profile.url)
            .parse()
            .map_err(|error| format!("the auth URL is not a URL: {error}"))?;
        self.outbound.check_literal(&url, "an auth service")?;
        let method = request.expand(&profile.method);
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| format!("{method:?} is not an HTTP method"))?;
        let mut sub = Request::builder().method(method).uri(url.clone());
        let sent = |name: &str| {
            profile.client_headers.as_ref().is_none_or(|names| {
                names
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(name))
            })
        };
        for (name, value) in &request.headers {
            if !is_hop_by_hop(name) && sent(name.as_str()) {
                sub = sub.header(name.as_str(), value.as_slice());
            }
        }
        let original_url = format!(
            "{}://{}{}",
            request.scheme(),
            request.host,
            request.path_and_query
        );
        let client = request.client.map(|ip| ip.to_string()).unwrap_or_default();
        let redirect = profile
            .request_redirect
            .as_deref()
            .map_or_else(|| request.path_and_query.clone(), |r| request.expand(r));
        // What ingress-nginx's auth location sets (its `auth_request`
        // sub-request), so auth services written for it work unchanged.
        let mut headers = vec![
            ("X-Original-URL", original_url),
            ("X-Original-Method", request.method.clone()),
            ("X-Sent-From", "haptic".to_owned()),
            ("X-Real-IP", client.clone()),
            ("X-Forwarded-For", client),
            ("X-Forwarded-Host", request.host.clone()),
            ("X-Forwarded-Proto", request.scheme().to_owned()),
            ("X-Auth-Request-Redirect", redirect),
        ];
        match &profile.host {
            Some(host) => headers.push(("Host", request.expand(host))),
            None => {
                if let Some(authority) = url.authority() {
                    headers.push(("Host", authority.to_string()));
                }
            }
        }
        for (name, value) in headers {
            sub = sub.header(name, value);
        }
        for (name, value) in &profile.request_headers {
            sub = sub.header(name.as_str(), request.expand(value));
        }
        if !profile.keep_alive {
            // hyper's pool does not keep a connection the request closes.
            sub = sub.header(hyper::header::CONNECTION, "close");
        }
        let sub = sub
            .body(Full::new(Bytes::new()))
            .map_err(|error| format!("the sub-request cannot be built: {error}"))?;
        let response = self
            .outbound
            .send(sub)
            .await
            .map_err(|error| format!("{url}: {error}"))?;
        let (parts, body) = response.into_parts();
        // Read the (ignored) body so the connection goes back to the pool.
        let _ = body.collect().await;
        Ok((parts.status, parts.headers))
    }
}

/// What the auth service's answer means for the request.
fn verdict(
    profile: &AuthProfile,
    request: &OriginalRequest,
    status: StatusCode,
    headers: &hyper::HeaderMap,
) -> Verdict {
    let cookies = |granted: bool| -> Vec<String> {
        if !(granted || profile.always_set_cookie) {
            return Vec::new();
        }
        headers
            .get_all(hyper::header::SET_COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .take(MAX_COOKIES)
            .map(str::to_owned)
            .collect()
    };
    let granted = match profile.answers {
        Answers::IngressNginx => status.is_success(),
        Answers::PassThrough => status == StatusCode::OK,
    };
    if granted {
        return Verdict {
            headers: profile
                .response_headers
                .iter()
                .filter_map(|name| {
                    let value = headers.get(name.as_str())?.to_str().ok()?;
                    Some((name.clone(), value.to_owned()))
                })
                .collect(),
            cookies: cookies(true),
            ..Verdict::status(200)
        };
    }
    if profile.answers == Answers::PassThrough {
        return Verdict {
            cookies: cookies(false),
            ..passed_through(request, status, headers)
        };
    }
    let mut verdict = match status.as_u16() {
        401 => match &profile.signin {
            Some(signin) => Verdict {
                location: Some(signin_location(profile, request, signin)),
                ..Verdict::status(302)
            },
            None => Verdict::status(401),
        },
        403 => Verdict::status(403),
        other => {
            tracing::warn!(profile = %request.profile, status = other, "the auth service answered neither 2xx, 401 nor 403; the request is refused (500)");
            Verdict::failed()
        }
    };
    verdict.cookies = cookies(false);
    verdict
}

/// A denial handed to the client as the auth service gave it: its status,
/// and its `Location` for a redirect (a redirect without one is 403, there
/// is nowhere to send the client) and `WWW-Authenticate`.
fn passed_through(
    request: &OriginalRequest,
    status: StatusCode,
    headers: &hyper::HeaderMap,
) -> Verdict {
    let header = |name: hyper::header::HeaderName| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let location = header(hyper::header::LOCATION);
    if status.is_redirection() && location.is_none() {
        tracing::warn!(profile = %request.profile, status = status.as_u16(), "the auth service redirected without a Location; the request is refused (403)");
        return Verdict::status(403);
    }
    Verdict {
        location: location.filter(|_| status.is_redirection()),
        www_authenticate: header(hyper::header::WWW_AUTHENTICATE),
        ..Verdict::status(status.as_u16())
    }
}

/// The sign-in URL with the original URL in its redirect parameter, unless
/// the URL already carries that parameter (ingress-nginx's rule).
fn signin_location(profile: &AuthProfile, request: &OriginalRequest, signin: &str) -> String {
    let location = request.expand(signin);
    let param = &profile.signin_redirect_param;
    let has_param = location.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .any(|pair| pair.split('=').next() == Some(param.as_str()))
    });
    if has_param {
        return location;
    }
    let original = format!(
        "{}://{}{}",
        request.scheme(),
        request.host,
        request.path_and_query
    );
    let separator = if location.contains('?') { '&' } else { '?' };
    format!(
        "{location}{separator}{param}={}",
        escape_component(&original)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> AuthProfile {
        serde_json::from_str(r#"{"url": "http://auth.test/check", "responseHeaders": ["X-Auth-Request-User"], "signin": "https://$host/oauth2/start"}"#)
            .expect("profile")
    }

    fn request() -> OriginalRequest {
        OriginalRequest {
            profile: "p".into(),
            method: "GET".into(),
            tls: true,
            host: "app.test".into(),
            path_and_query: "/a?b=c".into(),
            client: None,
            headers: Vec::new(),
            body: None,
        }
    }

    #[test]
    fn a_401_goes_to_sign_in_with_the_original_url() {
        let verdict = verdict(
            &profile(),
            &request(),
            StatusCode::UNAUTHORIZED,
            &hyper::HeaderMap::new(),
        );
        assert_eq!(verdict.status, 302);
        assert_eq!(
            verdict.location.as_deref(),
            Some("https://app.test/oauth2/start?rd=https%3A%2F%2Fapp.test%2Fa%3Fb%3Dc")
        );
        let mut with_rd = profile();
        with_rd.signin = Some("https://$host/start?rd=$escaped_request_uri".into());
        let verdict = verdict_of(&with_rd, StatusCode::UNAUTHORIZED);
        assert_eq!(
            verdict.location.as_deref(),
            Some("https://app.test/start?rd=%2Fa%3Fb%3Dc")
        );
    }

    fn verdict_of(profile: &AuthProfile, status: StatusCode) -> Verdict {
        verdict(profile, &request(), status, &hyper::HeaderMap::new())
    }

    #[test]
    fn a_pass_through_profile_lets_only_200_through_and_hands_on_the_rest() {
        let mut gateway = profile();
        gateway.answers = Answers::PassThrough;
        gateway.signin = None;
        let mut headers = hyper::HeaderMap::new();
        headers.insert("x-auth-request-user", "ada".parse().expect("value"));
        let allowed = verdict(&gateway, &request(), StatusCode::OK, &headers);
        assert_eq!(allowed.status, 200);
        assert_eq!(allowed.headers.len(), 1);
        // 2xx other than 200 is a denial under the Gateway API's rule.
        assert_eq!(verdict_of(&gateway, StatusCode::NO_CONTENT).status, 204);
        let mut challenge = hyper::HeaderMap::new();
        challenge.insert(
            "www-authenticate",
            "Bearer realm=\"x\"".parse().expect("value"),
        );
        challenge.insert("location", "https://login.test/".parse().expect("value"));
        let denied = verdict(&gateway, &request(), StatusCode::UNAUTHORIZED, &challenge);
        assert_eq!((denied.status, denied.location.as_deref()), (401, None));
        assert_eq!(
            denied.www_authenticate.as_deref(),
            Some("Bearer realm=\"x\"")
        );
        let moved = verdict(&gateway, &request(), StatusCode::SEE_OTHER, &challenge);
        assert_eq!(
            (moved.status, moved.location.as_deref()),
            (303, Some("https://login.test/"))
        );
        // Nowhere to send the client: refused.
        assert_eq!(verdict_of(&gateway, StatusCode::FOUND).status, 403);
        assert_eq!(
            verdict_of(&gateway, StatusCode::TOO_MANY_REQUESTS).name(),
            "denied"
        );
    }

    #[test]
    fn statuses_map_as_ingress_nginx_maps_them() {
        let mut headers = hyper::HeaderMap::new();
        headers.insert("x-auth-request-user", "ada".parse().expect("value"));
        headers.insert("set-cookie", "s=1".parse().expect("value"));
        let allowed = verdict(&profile(), &request(), StatusCode::ACCEPTED, &headers);
        assert_eq!(allowed.status, 200);
        assert_eq!(
            allowed.headers,
            vec![("X-Auth-Request-User".to_owned(), "ada".to_owned())]
        );
        assert_eq!(allowed.cookies, vec!["s=1".to_owned()]);
        let mut plain = profile();
        plain.signin = None;
        assert_eq!(verdict_of(&plain, StatusCode::UNAUTHORIZED).status, 401);
        assert_eq!(verdict_of(&plain, StatusCode::FORBIDDEN).status, 403);
        assert_eq!(verdict_of(&plain, StatusCode::BAD_GATEWAY).status, 500);
        assert_eq!(verdict_of(&plain, StatusCode::FOUND).status, 500);
        assert_eq!(
            header_variable("X-Auth-Request-User"),
            "hdr_x_auth_request_user"
        );
    }
}
