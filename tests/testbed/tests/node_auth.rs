//! External authentication as ingress-nginx does it
//! (`nginx.ingress.kubernetes.io/auth-url`, `auth-signin`,
//! `auth-response-headers`), end to end on the real node: haptic installed
//! by the chart with the `ingress-nginx` library on
//! (`controller.templateLibraries.ingressNginx.enabled=true`), a real
//! oauth2-proxy v7.15.6 in front of a real OIDC provider
//! (`tests/testbed/oauth2/cmd/mock-oidc`, which approves every authorize
//! request at once as one user: no login page), and the bed's echo server
//! as the protected app. Its answer is `pod=<name>`, `method=`, `path=`
//! and one `header.<lower-case name>=<value>` line per request header it
//! received, with an `X-Pod-Name` header: what reached the app, and that
//! the app (not HAProxy) answered.
//!
//! What runs, in namespace `auth`, with Ingresses of class `nginx` (the
//! library's default `classNames`) for host `app.auth.test`:
//!
//! - `mock-oidc` (Deployment + Service, port 9000), its issuer
//!   `http://<the Service's ClusterIP>:9000/oidc`: the bed has no cluster
//!   DNS (its kubelet hands pods the host's resolv.conf), and one issuer
//!   URL must serve both the browser (authorize) and oauth2-proxy
//!   (discovery, token, jwks): the test process on the host reaches a
//!   ClusterIP through kube-proxy, and so do pods (through the host's NAT
//!   and the bridge's netfilter hook, checked before the bed starts).
//! - `oauth2-proxy` (Deployment + Service, port 4180): provider oidc,
//!   `--upstream=static://202 --reverse-proxy --set-xauthrequest
//!   --skip-provider-button --cookie-secure=false --email-domain=*`,
//!   `--redirect-url=http://app.auth.test/oauth2/callback`.
//! - `web`, the echo server ([`create_web_app`]).
//! - Ingress `oauth2`: `/oauth2` (Prefix) to oauth2-proxy, no auth.
//! - Ingress `web`: `/` to the app with `auth-url:
//!   http://<oauth2-proxy's ClusterIP>:4180/oauth2/auth` (a ClusterIP,
//!   not `oauth2-proxy.auth.svc.cluster.local`: the SPOA in the HAProxy
//!   pod resolves names with the pod's resolver, which knows no cluster
//!   names on the bed), `auth-signin:
//!   http://$host/oauth2/start?rd=$escaped_request_uri`,
//!   `auth-response-headers: X-Auth-Request-User,X-Auth-Request-Email`.
//!
//! A browser-like client (a cookie jar, no redirect followed, every hop
//! asserted and printed) sends everything for `app.auth.test` to a HAProxy
//! pod's own address with that Host, and the authorize request straight to
//! mock-oidc's ClusterIP, as a browser would:
//!
//! 1. `GET /`, no cookie: 302 to `http://app.auth.test/oauth2/start?rd=%2F`
//!    from HAProxy (oauth2-proxy's 401, turned into auth-signin's redirect).
//! 2. `GET /oauth2/start?rd=%2F`: oauth2-proxy's 302 to the provider's
//!    authorize endpoint, with its CSRF cookie.
//! 3. `GET <issuer>/authorize?...`: mock-oidc's 302 to the callback.
//! 4. `GET /oauth2/callback?code=..&state=..`: 302 to `/`, cookie
//!    `_oauth2_proxy` set.
//! 5. `GET /` with the cookie, at every HAProxy pod: 200 from the app,
//!    which saw `X-Auth-Request-User: alice-0001` (the provider's `sub`)
//!    and `X-Auth-Request-Email: alice@auth.test`.
//! 6. A forged `X-Auth-Request-User`/`-Email` without the cookie: 302, the
//!    app never asked; with the cookie: 200, and the app saw only the
//!    provider's user (auth-response-headers replace a client's own, as
//!    nginx's `proxy_set_header` does).
//! 7. `GET /oauth2/sign_out`: 302, `_oauth2_proxy` cleared; then `GET /`
//!    with the emptied jar: 302 to sign in again.
//!
//! What it proves: the library turns the three annotations into HAProxy
//! configuration and the agent's SPOA asks the real oauth2-proxy for every
//! request, over the pod network, with the browser's cookie; 401 becomes
//! the sign-in redirect with the escaped original URI; 2xx lets the request
//! through carrying the named response headers and nothing a client forged.
//!
//! Broken on purpose, it fails: drop the `auth-url` annotation (in
//! [`protected_ingress`]) and step 1 gets the app's 200, not the 302; drop
//! `auth-response-headers` and step 5 finds no `x-auth-request-user` line;
//! give `auth-url` a port nothing listens on and the routing wait times out,
//! `/` answered with the fail-closed error (ingress-nginx's 500), neither
//! the sign-in redirect nor the app.
//!
//! Needs root, `make testbed-binaries testbed-node-setup testbed-images
//! oauth2-images image` (IMAGE_PROFILE=dev is enough) and helm; `make
//! e2e-oauth2` builds them and runs it. Not part of `make test`.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use haptic_testbed::app::{WebApp, create_web_app};
use haptic_testbed::cluster::{create, init_tracing, namespace, wait_for};
use haptic_testbed::http::{self, Response};
use haptic_testbed::node::{MOCK_OIDC_IMAGE, NodeBed, OAUTH2_PROXY_IMAGE, container_log};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

/// The chart's release namespace.
const NAMESPACE: &str = "haptic";
/// The scenario's own objects.
const APPS: &str = "auth";
/// The protected app's host.
const HOST: &str = "app.auth.test";
/// Served by the ingress-nginx library (its default `classNames`), not by
/// the `ingress` library's `haptic` class, which ignores nginx annotations.
const CLASS: &str = "nginx";
const HAPROXY: &str = "app.kubernetes.io/component=haproxy";
const WAIT: Duration = Duration::from_secs(180);
const HOP: Duration = Duration::from_secs(15);

const MOCK_OIDC_PORT: u16 = 9000;
const OAUTH2_PROXY_PORT: u16 = 4180;
const CLIENT_ID: &str = "haptic-test";
const CLIENT_SECRET: &str = "haptic-test-secret";
/// 32 bytes: an AES-256 key for oauth2-proxy's cookie.
const COOKIE_SECRET: &str = "haptic-testbed-cookie-secret-32b";
/// The one user mock-oidc logs everyone in as.
const SUBJECT: &str = "alice-0001";
const EMAIL: &str = "alice@auth.test";
const USERNAME: &str = "alice";
/// oauth2-proxy's session cookie.
const SESSION_COOKIE: &str = "_oauth2_proxy";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haptic's image and oauth2-proxy's; run make e2e-oauth2"]
async fn e2e_auth_url_sends_a_browser_through_oauth2_proxy_and_passes_the_user_to_the_app()
-> anyhow::Result<()> {
    init_tracing();
    ensure!(
        NodeBed::has_haptic_image(),
        "haptic's image is not built: run `make image` (IMAGE_PROFILE=dev is enough)"
    );
    ensure!(
        NodeBed::has_oauth2_images(),
        "oauth2-proxy's and mock-oidc's images are not built: run `make oauth2-images`"
    );
    check_bridge_netfilter()?;
    let bed = NodeBed::start().await?;
    eprintln!("real node up in {:?}", bed.startup_time());
    let client = bed.client();
    let began = Instant::now();
    haptic_testbed::helm::install(
        bed.control_plane().kubeconfig_path(),
        NAMESPACE,
        &["controller.templateLibraries.ingressNginx.enabled=true"],
    )
    .await?;
    eprintln!(
        "chart installed with the ingress-nginx library in {:?}",
        began.elapsed()
    );

    let deployed = deploy(&client).await?;
    let outcome = browse(&client, &deployed).await;
    if let Err(error) = &outcome {
        eprintln!("FAILED: {error:#}");
        print_logs(&client).await;
    }
    outcome?;

    let left = bed.stop_and_find_leftovers().await;
    ensure!(
        left.is_empty(),
        "the stopped node left on the host: {left:#?}"
    );
    Ok(())
}

/// What the client needs of the deployed objects.
struct Deployed {
    /// mock-oidc's issuer, `http://<ClusterIP>:9000/oidc`.
    issuer: String,
}

/// Creates the provider, oauth2-proxy, the app and both Ingresses, and
/// waits until each Deployment is available.
async fn deploy(client: &kube::Client) -> anyhow::Result<Deployed> {
    namespace(client, APPS).await?;
    // The Services first: their ClusterIPs go into mock-oidc's issuer and
    // the auth-url annotation.
    let mock_ip = create_service(client, "mock-oidc", MOCK_OIDC_PORT).await?;
    let proxy_ip = create_service(client, "oauth2-proxy", OAUTH2_PROXY_PORT).await?;
    let issuer = format!("http://{mock_ip}:{MOCK_OIDC_PORT}/oidc");
    let auth_url = format!("http://{proxy_ip}:{OAUTH2_PROXY_PORT}/oauth2/auth");
    eprintln!("mock-oidc issuer {issuer}; auth-url {auth_url}");

    create::<Deployment>(
        client,
        APPS,
        deployment(
            "mock-oidc",
            MOCK_OIDC_IMAGE,
            MOCK_OIDC_PORT,
            &[
                &format!("--listen=0.0.0.0:{MOCK_OIDC_PORT}"),
                &format!("--issuer-url={issuer}"),
                &format!("--client-id={CLIENT_ID}"),
                &format!("--client-secret={CLIENT_SECRET}"),
                &format!("--subject={SUBJECT}"),
                &format!("--email={EMAIL}"),
                &format!("--preferred-username={USERNAME}"),
            ],
            "/oidc/.well-known/openid-configuration",
        ),
    )
    .await?;
    create::<Deployment>(
        client,
        APPS,
        deployment(
            "oauth2-proxy",
            OAUTH2_PROXY_IMAGE,
            OAUTH2_PROXY_PORT,
            &[
                "--provider=oidc",
                &format!("--oidc-issuer-url={issuer}"),
                &format!("--client-id={CLIENT_ID}"),
                &format!("--client-secret={CLIENT_SECRET}"),
                "--code-challenge-method=S256",
                &format!("--cookie-secret={COOKIE_SECRET}"),
                "--cookie-secure=false",
                "--email-domain=*",
                "--upstream=static://202",
                &format!("--http-address=0.0.0.0:{OAUTH2_PROXY_PORT}"),
                &format!("--redirect-url=http://{HOST}/oauth2/callback"),
                "--reverse-proxy",
                "--set-xauthrequest",
                "--skip-provider-button",
            ],
            "/ping",
        ),
    )
    .await?;
    create_web_app(
        client,
        APPS,
        WebApp {
            replicas: 1,
            gated: false,
        },
    )
    .await?;
    create::<Ingress>(
        client,
        APPS,
        json!({
            "metadata": {"name": "oauth2"},
            "spec": {
                "ingressClassName": CLASS,
                "rules": [{"host": HOST, "http": {"paths": [{
                    "path": "/oauth2", "pathType": "Prefix",
                    "backend": {"service": {"name": "oauth2-proxy", "port": {"name": "http"}}}
                }]}}]
            }
        }),
    )
    .await?;
    create::<Ingress>(client, APPS, protected_ingress(&auth_url)).await?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), APPS);
    for name in ["mock-oidc", "oauth2-proxy", "web"] {
        wait_for(
            &format!("Deployment {APPS}/{name} available"),
            WAIT,
            || async {
                let d = deployments.get(name).await.map_err(|e| e.to_string())?;
                let ready = d.status.as_ref().and_then(|s| s.ready_replicas);
                match ready {
                    Some(n) if n >= 1 => Ok(()),
                    _ => Err(format!("{:?}", d.status)),
                }
            },
        )
        .await?;
    }
    Ok(Deployed { issuer })
}

/// Ingress `web`: `/` of [`HOST`] to the echo app, behind oauth2-proxy.
fn protected_ingress(auth_url: &str) -> serde_json::Value {
    json!({
        "metadata": {
            "name": "web",
            "annotations": {
                "nginx.ingress.kubernetes.io/auth-url": auth_url,
                "nginx.ingress.kubernetes.io/auth-signin": "http://$host/oauth2/start?rd=$escaped_request_uri",
                "nginx.ingress.kubernetes.io/auth-response-headers": "X-Auth-Request-User,X-Auth-Request-Email",
            }
        },
        "spec": {
            "ingressClassName": CLASS,
            "rules": [{"host": HOST, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"name": "http"}}}
            }]}}]
        }
    })
}

/// Service `name` (port `port`, named `http`) over pods `app=<name>`; its ClusterIP.
async fn create_service(client: &kube::Client, name: &str, port: u16) -> anyhow::Result<IpAddr> {
    let service = create::<Service>(
        client,
        APPS,
        json!({
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": port, "targetPort": port}]}
        }),
    )
    .await?;
    service
        .spec
        .and_then(|s| s.cluster_ip)
        .with_context(|| format!("Service {APPS}/{name} got no ClusterIP"))?
        .parse()
        .with_context(|| format!("Service {APPS}/{name}'s ClusterIP"))
}

/// A one-replica Deployment of `image` with `args`, ready when `ready_path`
/// answers on `port`.
fn deployment(
    name: &str,
    image: &str,
    port: u16,
    args: &[&str],
    ready_path: &str,
) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{
                        "name": name, "image": image, "args": args,
                        "ports": [{"containerPort": port, "name": "http"}],
                        "readinessProbe": {"httpGet": {"path": ready_path, "port": port}, "periodSeconds": 1},
                        "securityContext": {
                            "runAsNonRoot": true, "readOnlyRootFilesystem": true,
                            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                },
            },
        }
    })
}

/// The browser's walk through sign-in, the protected app and sign-out.
async fn browse(client: &kube::Client, deployed: &Deployed) -> anyhow::Result<()> {
    wait_routed(client).await?;
    let proxies = haproxy_pod_addresses(client).await?;
    let proxy = proxies[0];
    let signin = format!("http://{HOST}/oauth2/start?rd=%2F");
    let mut browser = Browser::default();

    // 1. Not signed in: HAProxy sends the browser to auth-signin.
    let r = browser.get("1. GET /", proxy, HOST, "/", &[]).await?;
    ensure!(
        r.status == 302 && r.header("location") == Some(signin.as_str()),
        "GET / without a session: wanted 302 to {signin}, got {} (Location {:?}, X-Pod-Name {:?}; \
         200 from the app means auth-url was not honoured):\n{}",
        r.status,
        r.header("location"),
        r.header("x-pod-name"),
        r.body
    );
    ensure!(
        r.header("x-pod-name").is_none(),
        "the app answered the unauthenticated request: {r:?}"
    );

    // 2. oauth2-proxy's sign-in start: to the provider, with a CSRF cookie.
    let (host, path) = split_url(&signin)?;
    let r = browser
        .get("2. GET /oauth2/start", proxy, &host, &path, &[])
        .await?;
    let authorize = location(&r, "/oauth2/start")?;
    ensure!(
        r.status == 302 && authorize.starts_with(&format!("{}/authorize?", deployed.issuer)),
        "GET /oauth2/start: wanted 302 to {}/authorize?..., got {r:?}",
        deployed.issuer
    );

    // 3. The provider approves at once and sends the browser back.
    let (provider_host, path) = split_url(&authorize)?;
    let provider: SocketAddr = provider_host
        .parse()
        .with_context(|| format!("the issuer's host {provider_host}"))?;
    let r = Browser::default()
        .get(
            "3. GET <issuer>/authorize",
            provider,
            &provider_host,
            &path,
            &[],
        )
        .await?;
    let callback = location(&r, "authorize")?;
    ensure!(
        r.status == 302
            && callback.starts_with(&format!("http://{HOST}/oauth2/callback?"))
            && callback.contains("code="),
        "GET <issuer>/authorize: wanted 302 to http://{HOST}/oauth2/callback?code=..., got {r:?}"
    );

    // 4. The callback, through HAProxy again: the session cookie.
    let (host, path) = split_url(&callback)?;
    let r = browser
        .get("4. GET /oauth2/callback", proxy, &host, &path, &[])
        .await?;
    ensure!(
        r.status == 302 && r.header("location") == Some("/"),
        "GET /oauth2/callback: wanted 302 to / (the rd), got {r:?}"
    );
    ensure!(
        browser.has(SESSION_COOKIE),
        "the callback set no {SESSION_COOKIE} cookie: {:?}",
        r.headers
    );

    // 5. Signed in: the app answers, told who the user is, at every HAProxy pod.
    for (n, address) in proxies.iter().enumerate() {
        let r = browser
            .get(
                &format!("5. GET / signed in (HAProxy pod {n})"),
                *address,
                HOST,
                "/",
                &[],
            )
            .await?;
        expect_user(&r, "GET / with the session")?;
    }

    // 6. Forged identity headers: no session, no entry; with one, replaced.
    let forged = [
        ("X-Auth-Request-User".to_owned(), "mallory".to_owned()),
        (
            "X-Auth-Request-Email".to_owned(),
            "mallory@evil.test".to_owned(),
        ),
    ];
    let r = Browser::default()
        .get("6. GET / forged, no session", proxy, HOST, "/", &forged)
        .await?;
    ensure!(
        r.status == 302
            && r.header("location") == Some(signin.as_str())
            && r.header("x-pod-name").is_none(),
        "a forged X-Auth-Request-User without a session reached past the auth: {r:?}"
    );
    let r = browser
        .get("6. GET / forged, signed in", proxy, HOST, "/", &forged)
        .await?;
    expect_user(&r, "GET / with the session and forged headers")?;

    // 7. Sign out: the session cookie goes, and with it the access.
    let r = browser
        .get(
            "7. GET /oauth2/sign_out",
            proxy,
            HOST,
            "/oauth2/sign_out",
            &[],
        )
        .await?;
    ensure!(
        r.status == 302,
        "GET /oauth2/sign_out: wanted 302, got {r:?}"
    );
    ensure!(
        !browser.has(SESSION_COOKIE),
        "sign-out left {SESSION_COOKIE} in the jar: {:?}",
        r.headers
    );
    let r = browser
        .get("7. GET / signed out", proxy, HOST, "/", &[])
        .await?;
    ensure!(
        r.status == 302
            && r.header("location") == Some(signin.as_str())
            && r.header("x-pod-name").is_none(),
        "GET / after sign-out: wanted 302 to {signin}, got {r:?}"
    );
    eprintln!("external auth through oauth2-proxy: every hop as ingress-nginx does it");
    Ok(())
}

/// The app's 200 with the provider's user in the identity headers it saw,
/// each exactly once, and nothing a client forged.
fn expect_user(r: &Response, what: &str) -> anyhow::Result<()> {
    ensure!(
        r.status == 200
            && r.header("x-pod-name")
                .is_some_and(|p| p.starts_with("web-")),
        "{what}: wanted 200 from the app, got {r:?}"
    );
    let seen = |name: &str| -> Vec<&str> {
        r.body
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("header.{name}=")))
            .collect()
    };
    ensure!(
        seen("x-auth-request-user") == [SUBJECT] && seen("x-auth-request-email") == [EMAIL],
        "{what}: the app saw X-Auth-Request-User {:?} and X-Auth-Request-Email {:?}, wanted \
         [{SUBJECT:?}] and [{EMAIL:?}]:\n{}",
        seen("x-auth-request-user"),
        seen("x-auth-request-email"),
        r.body
    );
    ensure!(
        !r.body.contains("mallory"),
        "{what}: a forged header reached the app:\n{}",
        r.body
    );
    Ok(())
}

/// A browser's cookie jar for one site: name -> value, no redirect followed.
#[derive(Default)]
struct Browser {
    jar: BTreeMap<String, String>,
}

impl Browser {
    /// GETs `path` from `address` with Host `host`, the jar's cookies and
    /// `extra` headers; takes the answer's cookies into the jar and prints
    /// the hop.
    async fn get(
        &mut self,
        label: &str,
        address: SocketAddr,
        host: &str,
        path: &str,
        extra: &[(String, String)],
    ) -> anyhow::Result<Response> {
        let mut headers = extra.to_vec();
        if !self.jar.is_empty() {
            let cookies: Vec<String> = self.jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
            headers.push(("Cookie".to_owned(), cookies.join("; ")));
        }
        let r = http::get(address, Some(host), path, &headers, HOP)
            .await
            .with_context(|| format!("{label}: GET http://{host}{path} via {address}"))?;
        let mut set = Vec::new();
        for (name, value) in &r.headers {
            if name != "set-cookie" {
                continue;
            }
            let mut parts = value.split(';').map(str::trim);
            let Some((cookie, cookie_value)) = parts.next().and_then(|p| p.split_once('=')) else {
                continue;
            };
            let expired = cookie_value.is_empty()
                || parts.any(|a| {
                    a.split_once('=').is_some_and(|(k, v)| {
                        k.eq_ignore_ascii_case("max-age") && v.parse::<i64>().is_ok_and(|s| s <= 0)
                    })
                });
            if expired {
                self.jar.remove(cookie);
                set.push(format!("{cookie} cleared"));
            } else {
                self.jar.insert(cookie.to_owned(), cookie_value.to_owned());
                set.push(format!("{cookie} ({} bytes)", cookie_value.len()));
            }
        }
        let shown = |s: &str| {
            if s.len() > 120 {
                format!("{}...", s.chars().take(120).collect::<String>())
            } else {
                s.to_owned()
            }
        };
        eprintln!(
            "{label}: GET http://{host}{} via {address} (cookies: {:?}{}) -> {}{}{}{}",
            shown(path),
            self.jar.keys().collect::<Vec<_>>(),
            if extra.is_empty() {
                ""
            } else {
                ", forged headers"
            },
            r.status,
            r.header("location")
                .map(|l| format!(", Location {}", shown(l)))
                .unwrap_or_default(),
            if set.is_empty() {
                String::new()
            } else {
                format!(", Set-Cookie {}", set.join(", "))
            },
            r.header("x-pod-name")
                .map(|p| format!(", answered by {p}"))
                .unwrap_or_default(),
        );
        Ok(r)
    }

    fn has(&self, cookie: &str) -> bool {
        self.jar.contains_key(cookie)
    }
}

/// The Location of a redirect.
fn location(r: &Response, what: &str) -> anyhow::Result<String> {
    r.header("location")
        .map(str::to_owned)
        .with_context(|| format!("{what}: no Location in {r:?}"))
}

/// `http://host[:port]/path?query` -> (host[:port], /path?query).
fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url} is not an http:// URL"))?;
    Ok(match rest.find('/') {
        Some(i) => (rest[..i].to_owned(), rest[i..].to_owned()),
        None => (rest.to_owned(), "/".to_owned()),
    })
}

/// Pods reach a ClusterIP whose endpoint is another pod on the same bridge
/// only when bridged replies pass the host's conntrack (to be translated
/// back): `br_netfilter` with `net.bridge.bridge-nf-call-iptables=1`. Here
/// both oauth2-proxy (to mock-oidc) and the SPOA (to oauth2-proxy) do.
fn check_bridge_netfilter() -> anyhow::Result<()> {
    let path = "/proc/sys/net/bridge/bridge-nf-call-iptables";
    match std::fs::read_to_string(path) {
        Ok(v) if v.trim() == "1" => Ok(()),
        seen => bail!(
            "{path} is {seen:?}: pods could not reach each other through a ClusterIP; \
             run `modprobe br_netfilter && sysctl net.bridge.bridge-nf-call-iptables=1`"
        ),
    }
}

/// Each running HAProxy pod's HTTP address: its pod IP and the `http` port
/// of its `haproxy` container.
async fn haproxy_pod_addresses(client: &kube::Client) -> anyhow::Result<Vec<SocketAddr>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut addresses = Vec::new();
    for pod in pods.list(&ListParams::default().labels(HAPROXY)).await? {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()) else {
            continue;
        };
        let port = pod
            .spec
            .iter()
            .flat_map(|spec| &spec.containers)
            .filter(|container| container.name == "haproxy")
            .flat_map(|container| container.ports.iter().flatten())
            .find(|port| port.name.as_deref() == Some("http"))
            .map(|port| port.container_port)
            .context("the haproxy container has no port named http")?;
        let port = u16::try_from(port).context("the http port")?;
        addresses.push(SocketAddr::new(ip.parse().context("the pod IP")?, port));
    }
    addresses.sort();
    ensure!(
        !addresses.is_empty(),
        "no running HAProxy pod with an address"
    );
    Ok(addresses)
}

/// Waits until every HAProxy pod routes both Ingresses: `/oauth2/auth`
/// without a cookie gets oauth2-proxy's own 401, and `/` gets an answer
/// that is the auth's (302) or the app's (200, which the first hop then
/// fails on), not HAProxy's for an unrouted host.
async fn wait_routed(client: &kube::Client) -> anyhow::Result<()> {
    wait_for(
        &format!("{HOST} routed by every HAProxy pod"),
        WAIT,
        || async {
            let addresses = haproxy_pod_addresses(client)
                .await
                .map_err(|e| e.to_string())?;
            for address in addresses {
                let get = |path: &'static str| async move {
                    http::get(address, Some(HOST), path, &[], Duration::from_secs(5))
                        .await
                        .map_err(|e| format!("{address}: {e}"))
                };
                let auth = get("/oauth2/auth").await?;
                if auth.status != 401 {
                    return Err(format!(
                        "{address}: /oauth2/auth {} {}",
                        auth.status,
                        auth.body.trim()
                    ));
                }
                let app = get("/").await?;
                if app.status != 302 && app.status != 200 {
                    return Err(format!("{address}: / {} {}", app.status, app.body.trim()));
                }
            }
            Ok(())
        },
    )
    .await?;
    Ok(())
}

/// On failure: the last lines of oauth2-proxy's, mock-oidc's and every
/// HAProxy pod's containers' logs.
async fn print_logs(client: &kube::Client) {
    for (namespace, selector) in [
        (APPS, "app=oauth2-proxy"),
        (APPS, "app=mock-oidc"),
        (NAMESPACE, HAPROXY),
    ] {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let Ok(list) = pods.list(&ListParams::default().labels(selector)).await else {
            continue;
        };
        for pod in list {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            for container in pod.spec.iter().flat_map(|s| &s.containers) {
                let log = container_log(namespace, &name, &uid, &container.name);
                let lines: Vec<&str> = log.lines().collect();
                let tail = &lines[lines.len().saturating_sub(40)..];
                eprintln!(
                    "--- {namespace}/{name} {} (last {} lines)\n{}",
                    container.name,
                    tail.len(),
                    tail.join("\n")
                );
            }
        }
    }
}
