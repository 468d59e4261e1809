//! One SPOP connection from an HAProxy worker. After the HELLO exchange,
//! each NOTIFY is answered by its own task (the agent announces
//! `pipelining`), so a slow auth service holds only the requests waiting
//! on it; the ACKs go back through one writer in the order they finish. A
//! mirror message is answered at once, its copies sent in the background.

use std::sync::Arc;

use futures::{SinkExt as _, StreamExt as _};
use spop::frame::{FramePayload, FrameType, Message};
use spop::frames::{Ack, AgentDisconnect, AgentHello, FrameCapabilities, HaproxyHello};
use spop::{MAX_FRAME_SIZE_LIMIT, SpopCodec, SpopFrame, StatusCode};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

use super::auth::Verdict;
use super::request::OriginalRequest;
use super::{AUTH_MESSAGE, MIRROR_MESSAGE, MessageLabels, Spoa};

/// ACKs waiting for the writer before answering tasks wait themselves.
const PENDING_ACKS: usize = 256;

/// Serves one connection until HAProxy closes it or says goodbye.
pub async fn serve(spoa: Arc<Spoa>, stream: TcpStream) {
    spoa.metrics.connections.inc();
    let (mut sink, mut frames) = Framed::new(stream, SpopCodec::default()).split();
    let (acks, mut pending) = mpsc::channel::<Box<dyn SpopFrame>>(PENDING_ACKS);
    let writer = tokio::spawn(async move {
        while let Some(frame) = pending.recv().await {
            if let Err(error) = sink.send(frame).await {
                tracing::debug!(%error, "an SPOE connection closed while answering");
                break;
            }
        }
        let _ = sink.close().await;
    });
    while let Some(frame) = frames.next().await {
        let frame = match frame {
            Ok(frame) => frame,
            // HAProxy drops idle connections and ends health checks by
            // closing: an end, not a fault.
            Err(error) => {
                tracing::debug!(%error, "an SPOE connection ended");
                break;
            }
        };
        match frame.frame_type() {
            FrameType::HaproxyHello => {
                let (reply, keep) = hello(frame.payload());
                if acks.send(reply).await.is_err() || !keep {
                    break;
                }
            }
            FrameType::Notify => {
                let FramePayload::ListOfMessages(messages) = frame.payload() else {
                    continue;
                };
                let metadata = frame.metadata();
                let ack = Ack::new(metadata.stream_id, metadata.frame_id);
                let messages = messages.to_vec();
                let (spoa, acks) = (spoa.clone(), acks.clone());
                tokio::spawn(async move {
                    let ack = answer(&spoa, messages, ack).await;
                    let _ = acks.send(Box::new(ack)).await;
                });
            }
            FrameType::HaproxyDisconnect => {
                let _ = acks.send(disconnect(StatusCode::None)).await;
                break;
            }
            other => tracing::debug!(?other, "an SPOE frame the agent does not expect"),
        }
    }
    drop(acks);
    let _ = writer.await;
    spoa.metrics.connections.dec();
}

/// The AGENT-HELLO for HAProxy's HELLO, and whether the connection stays
/// (a health check's does not).
fn hello(payload: FramePayload<'_>) -> (Box<dyn SpopFrame>, bool) {
    let Ok(hello) = HaproxyHello::try_from(payload) else {
        return (disconnect(StatusCode::Invalid), false);
    };
    let Some(version) = hello.negotiate_version() else {
        return (disconnect(StatusCode::BadVersion), false);
    };
    let max_frame_size = match hello.negotiate_max_frame_size(MAX_FRAME_SIZE_LIMIT) {
        Ok(size) => size,
        Err(status) => return (disconnect(status), false),
    };
    let reply = AgentHello {
        version,
        max_frame_size,
        capabilities: vec![FrameCapabilities::Pipelining],
    };
    (Box::new(reply), !hello.healthcheck.unwrap_or(false))
}

fn disconnect(status: StatusCode) -> Box<dyn SpopFrame> {
    Box::new(AgentDisconnect {
        status_code: status.to_u32(),
        message: status.message().to_owned(),
    })
}

/// The ACK for one NOTIFY: each message the agent knows adds its variables.
async fn answer(spoa: &Spoa, messages: Vec<Message>, mut ack: Ack) -> Ack {
    for message in messages {
        let result = match message.name.as_str() {
            AUTH_MESSAGE => {
                let (verdict, result) = authenticate(spoa, &message).await;
                ack = verdict.into_ack(ack);
                result
            }
            MIRROR_MESSAGE => mirror(spoa, &message),
            other => {
                tracing::warn!(message = %other, "an SPOE message the agent does not answer; its variables stay unset");
                continue;
            }
        };
        spoa.metrics
            .messages
            .get_or_create(&MessageLabels {
                message: message.name.clone(),
                result,
            })
            .inc();
    }
    ack
}

/// The verdict on an auth message, and its metric's result.
async fn authenticate(spoa: &Spoa, message: &Message) -> (Verdict, &'static str) {
    let request = match OriginalRequest::from_message(message) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(%error, "an SPOE auth message does not match docs/spoa.md; the request is refused (500)");
            return (Verdict::failed(), "error");
        }
    };
    match spoa.profiles.auth(&request.profile) {
        Some(profile) => {
            let verdict = spoa.auth.check(&profile, &request, &spoa.metrics).await;
            let name = verdict.name();
            (verdict, name)
        }
        None => {
            tracing::warn!(profile = %request.profile, "no such auth profile in the applied bundles; the request is refused (500)");
            (Verdict::failed(), "error")
        }
    }
}

/// Starts the copies a mirror message asks for; its metric's result. The
/// ACK carries nothing either way: mirroring fails open.
fn mirror(spoa: &Spoa, message: &Message) -> &'static str {
    let request = match OriginalRequest::from_message(message) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(%error, "an SPOE mirror message does not match docs/spoa.md; nothing is copied");
            return "error";
        }
    };
    match spoa.profiles.mirror(&request.profile) {
        Some(profile) => {
            spoa.mirror.copy(&profile, &request, &spoa.metrics);
            "copied"
        }
        None => {
            tracing::warn!(profile = %request.profile, "no such mirror profile in the applied bundles; nothing is copied");
            "error"
        }
    }
}
