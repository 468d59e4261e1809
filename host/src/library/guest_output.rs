//! A library's stdout and stderr, forwarded line by line to `tracing` and
//! tagged with the library's name, so `println!` in a library is debuggable.
//!
//! Writes never fail: a guest's `println!` panics when stdout errors, and a
//! chatty library must not crash over logging. Instead the stream is bounded:
//! a line is cut at [`MAX_LINE`] bytes and each call may print at most
//! [`BUDGET_PER_CALL`] bytes; the rest is counted and reported once.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Longest line forwarded as one log event.
const MAX_LINE: usize = 4096;
/// Bytes one call may print before the rest is dropped.
const BUDGET_PER_CALL: usize = 64 << 10;

/// One of a library instance's output streams. Clones share the buffer.
#[derive(Clone)]
pub(super) struct GuestOutput {
    inner: Arc<Mutex<LineBuffer>>,
}

struct LineBuffer {
    library: Arc<str>,
    stream: &'static str,
    partial: Vec<u8>,
    budget: usize,
    dropped: usize,
}

impl GuestOutput {
    pub(super) fn new(library: Arc<str>, stream: &'static str) -> Self {
        Self {
            inner: Arc::new(Mutex::new(LineBuffer {
                library,
                stream,
                partial: Vec::new(),
                budget: BUDGET_PER_CALL,
                dropped: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LineBuffer> {
        // A panic while holding the lock can only come from `tracing`; the
        // buffer itself is always consistent.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self, bytes: &[u8]) {
        self.lock().write(bytes);
    }

    /// Emits a pending partial line and reports dropped output; called after
    /// every call into the library.
    pub(super) fn end_call(&self) {
        let mut buffer = self.lock();
        buffer.emit_partial();
        if buffer.dropped > 0 {
            tracing::warn!(
                library = %buffer.library,
                stream = buffer.stream,
                "library printed more than {BUDGET_PER_CALL} bytes in one call; dropped {} bytes",
                buffer.dropped
            );
        }
        buffer.dropped = 0;
        buffer.budget = BUDGET_PER_CALL;
    }
}

impl LineBuffer {
    fn write(&mut self, mut bytes: &[u8]) {
        let allowed = bytes.len().min(self.budget);
        self.dropped += bytes.len() - allowed;
        self.budget -= allowed;
        bytes = &bytes[..allowed];
        while !bytes.is_empty() {
            match bytes.iter().position(|b| *b == b'\n') {
                Some(end) => {
                    self.append(&bytes[..end]);
                    self.emit_partial();
                    bytes = &bytes[end + 1..];
                }
                None => {
                    self.append(bytes);
                    bytes = &[];
                }
            }
        }
    }

    fn append(&mut self, mut bytes: &[u8]) {
        while self.partial.len() + bytes.len() > MAX_LINE {
            let room = MAX_LINE - self.partial.len();
            self.partial.extend_from_slice(&bytes[..room]);
            self.emit_partial();
            bytes = &bytes[room..];
        }
        self.partial.extend_from_slice(bytes);
    }

    fn emit_partial(&mut self) {
        if self.partial.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&self.partial);
        let line = line.trim_end_matches('\r');
        tracing::info!(library = %self.library, stream = self.stream, "{line}");
        self.partial.clear();
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        GuestOutput::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(MAX_LINE)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        GuestOutput::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer() -> LineBuffer {
        LineBuffer {
            library: "test".into(),
            stream: "stdout",
            partial: Vec::new(),
            budget: BUDGET_PER_CALL,
            dropped: 0,
        }
    }

    #[test]
    fn partial_lines_wait_for_their_newline() {
        let mut buffer = buffer();
        buffer.write(b"hello ");
        assert_eq!(buffer.partial, b"hello ");
        buffer.write(b"world\nnext");
        assert_eq!(buffer.partial, b"next");
    }

    #[test]
    fn long_lines_are_cut_and_output_is_bounded() {
        let mut buffer = buffer();
        buffer.write(&vec![b'x'; MAX_LINE + 10]);
        assert_eq!(buffer.partial.len(), 10);
        buffer.write(&vec![b'y'; BUDGET_PER_CALL]);
        assert_eq!(buffer.budget, 0);
        assert_eq!(buffer.dropped, MAX_LINE + 10);
    }
}
