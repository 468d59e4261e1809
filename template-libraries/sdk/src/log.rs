//! Logging through the host, and a panic hook that reports where a library
//! panicked before the instance traps.

/// Log levels of the host's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Writes a line to the host's log, tagged with the library's name. Outside
/// WebAssembly (native tests) it goes to stderr.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::wit::haptic::template::types::LogLevel;
        let level = match level {
            Level::Trace => LogLevel::Trace,
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        crate::wit::haptic::template::host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{level:?}] {message}");
}

/// Logs at debug level.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs at info level.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs at warn level.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// A guest panics with `panic = "abort"`: the host sees only an
/// `unreachable` trap. Sending the message first lets the host report
/// "panicked at src/lib.rs:118:5: ...".
pub(crate) fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload_as_str()
            .unwrap_or("(non-string panic payload)");
        let text = match info.location() {
            Some(at) => format!(
                "panicked at {}:{}:{}: {message}",
                at.file(),
                at.line(),
                at.column()
            ),
            None => format!("panicked: {message}"),
        };
        log(Level::Error, &text);
    }));
}
