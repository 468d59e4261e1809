//! The echo server (image `haptic.test/echo`) as a process: it answers with
//! its pod name, and on SIGTERM reports unhealthy, keeps serving for its
//! shutdown delay, finishes in-flight requests, then exits 0.
//!
//! Runs on 127.0.0.1 (no EndpointSlice involved, so no pod network needed).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use haptic_testbed::cluster::wait_for;
use haptic_testbed::http;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

async fn get(addr: SocketAddr, path: &str) -> Result<http::Response, String> {
    http::get(addr, None, path, &[], Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn answers_with_its_name_and_drains_in_flight_requests_on_sigterm() -> anyhow::Result<()> {
    let port = haptic_testbed::ports::free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_echo-server"))
        .args(["--port", &port.to_string(), "--shutdown-delay", "1"])
        .env("HAPTIC_TESTBED_POD_IP", "127.0.0.1")
        .env("HOSTNAME", "echo-7f9c-abcde")
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting echo-server")?;
    let pid = Pid::from_raw(child.id().context("pid")? as i32);

    wait_for(
        "/healthz to answer 200",
        Duration::from_secs(10),
        || async {
            let r = get(addr, "/healthz").await?;
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        },
    )
    .await?;
    let r = get(addr, "/some/path").await.map_err(anyhow::Error::msg)?;
    ensure!(r.status == 200, "{r:?}");
    ensure!(r.header("x-pod-name") == Some("echo-7f9c-abcde"), "{r:?}");
    ensure!(
        r.body
            .starts_with("pod=echo-7f9c-abcde\nmethod=GET\npath=/some/path\n"),
        "{}",
        r.body
    );

    let in_flight = tokio::spawn(async move { get(addr, "/slow?sleep_ms=1500").await });
    // The slow request must be accepted before the signal.
    tokio::time::sleep(Duration::from_millis(200)).await;
    kill(pid, Signal::SIGTERM)?;
    wait_for(
        "/healthz to report draining",
        Duration::from_secs(5),
        || async {
            let r = get(addr, "/healthz").await?;
            if r.status == 503 {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        },
    )
    .await?;
    let slow = in_flight.await?.map_err(anyhow::Error::msg)?;
    ensure!(
        slow.status == 200 && slow.body.contains("path=/slow?sleep_ms=1500"),
        "{slow:?}"
    );
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    ensure!(status.success(), "exit status {status}");
    ensure!(get(addr, "/").await.is_err(), "nothing listens after exit");
    Ok(())
}
