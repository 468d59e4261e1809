//! `echo-server`: the test bed's stand-in application (image `haptic.test/echo`).
//!
//! Listens on `$HAPTIC_TESTBED_POD_IP` (the pod's own address; `0.0.0.0` when
//! run by hand) on every `--port` given, else on every port in
//! `$HAPTIC_TESTBED_CONTAINER_PORTS` (the container's `containerPort`s), else 8080.
//!
//! - `GET /healthz`: `200 ok`, or `503 shutting down` once SIGTERM arrived, so a
//!   readiness probe takes the pod out of rotation while it drains.
//! - anything else: `200` with `X-Pod-Name: $HOSTNAME` and a body of
//!   `pod=<name>`, `method=`, `path=` and one `header.<name>=<value>` line per
//!   request header, so a client sees which pod answered and what reached it.
//!   `?sleep_ms=N` holds the response N ms (an in-flight request for tests).
//!
//! On SIGTERM (or SIGINT) it keeps serving for `--shutdown-delay` seconds
//! (`$SHUTDOWN_DELAY_SECONDS`, default 0), then stops accepting, finishes
//! in-flight requests and exits 0.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

struct Options {
    addrs: Vec<SocketAddr>,
    shutdown_delay: Duration,
    name: String,
}

fn options() -> anyhow::Result<Options> {
    let ip: IpAddr = match std::env::var("HAPTIC_TESTBED_POD_IP") {
        Ok(v) if !v.is_empty() => v
            .parse()
            .with_context(|| format!("HAPTIC_TESTBED_POD_IP={v:?} is not an IP address"))?,
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    let mut ports = Vec::new();
    let mut delay = std::env::var("SHUTDOWN_DELAY_SECONDS").unwrap_or_default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .with_context(|| format!("{flag} needs a value (see the module docs)"))
        };
        match arg.as_str() {
            "--port" => ports.push(value("--port")?),
            "--shutdown-delay" => delay = value("--shutdown-delay")?,
            other => bail!("unknown argument {other:?}; use --port N and --shutdown-delay SECONDS"),
        }
    }
    if ports.is_empty() {
        let from_env = std::env::var("HAPTIC_TESTBED_CONTAINER_PORTS").unwrap_or_default();
        ports = from_env
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
    }
    if ports.is_empty() {
        ports.push("8080".into());
    }
    let addrs = ports
        .iter()
        .map(|p| {
            p.parse::<u16>()
                .map(|port| SocketAddr::new(ip, port))
                .with_context(|| format!("port {p:?} is not a number from 1 to 65535"))
        })
        .collect::<anyhow::Result<_>>()?;
    let shutdown_delay = if delay.is_empty() {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(
            delay
                .parse::<f64>()
                .with_context(|| format!("shutdown delay {delay:?} is not a number of seconds"))?,
        )
    };
    let name = std::env::var("HOSTNAME").unwrap_or_else(|_| "echo-server".into());
    Ok(Options {
        addrs,
        shutdown_delay,
        name,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let opts = options()?;
    let draining = Arc::new(AtomicBool::new(false));
    let name: Arc<str> = opts.name.into();
    let mut listeners = Vec::new();
    for addr in &opts.addrs {
        let l = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        eprintln!("echo-server {name}: listening on {addr}");
        listeners.push(l);
    }
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let graceful = Arc::new(GracefulShutdown::new());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut accept_tasks = Vec::new();
    for listener in listeners {
        let (draining, name, graceful) = (draining.clone(), name.clone(), graceful.clone());
        let mut stop = stop_rx.clone();
        accept_tasks.push(tokio::spawn(async move {
            loop {
                let (stream, _) = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok(conn) => conn,
                        Err(e) => { eprintln!("echo-server: accept: {e}"); continue; }
                    },
                    _ = stop.changed() => return,
                };
                let (draining, name) = (draining.clone(), name.clone());
                let service = service_fn(move |req| answer(req, draining.clone(), name.clone()));
                let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watcher().watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        eprintln!("echo-server: connection: {e}");
                    }
                });
            }
        }));
    }
    tokio::select! {
        _ = term.recv() => eprintln!("echo-server {name}: SIGTERM"),
        _ = int.recv() => eprintln!("echo-server {name}: SIGINT"),
    }
    draining.store(true, Ordering::SeqCst);
    tokio::time::sleep(opts.shutdown_delay).await;
    let _ = stop_tx.send(true);
    for t in accept_tasks {
        let _ = t.await;
    }
    // Accept tasks are done, so this is the last handle.
    if let Ok(graceful) = Arc::try_unwrap(graceful) {
        graceful.shutdown().await;
    }
    eprintln!("echo-server {name}: in-flight requests done, exiting");
    Ok(())
}

async fn answer(
    req: Request<Incoming>,
    draining: Arc<AtomicBool>,
    name: Arc<str>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: String| {
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(&name) {
            resp.headers_mut().insert("x-pod-name", v);
        }
        Ok(resp)
    };
    if req.uri().path() == "/healthz" {
        return if draining.load(Ordering::SeqCst) {
            reply(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n".into())
        } else {
            reply(StatusCode::OK, "ok\n".into())
        };
    }
    let sleep_ms = req
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("sleep_ms="))
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = sleep_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let mut body = format!("pod={name}\nmethod={}\npath={}\n", req.method(), req.uri());
    for (k, v) in req.headers() {
        body.push_str(&format!(
            "header.{k}={}\n",
            String::from_utf8_lossy(v.as_bytes())
        ));
    }
    reply(StatusCode::OK, body)
}
