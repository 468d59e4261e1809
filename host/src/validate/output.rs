//! HAProxy's diagnostics, parsed. `haproxy -c` prints lines such as
//!
//! ```text
//! [ALERT]    (10721) : config : parsing [haproxy.cfg:3] : unknown keyword 'foo' in 'global' section
//! [WARNING]  (10776) : config : parsing [haproxy.cfg:18] : 'option httplog' not usable with frontend 'g' ...
//! ```
//!
//! and the location is what lets the caller name the library that wrote the
//! offending line.

use std::fmt;

/// How serious HAProxy says a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Alert,
    Warning,
    Notice,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alert => "alert",
            Self::Warning => "warning",
            Self::Notice => "notice",
        }
    }
}

/// One diagnostic from HAProxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub level: Level,
    /// The file HAProxy names (`haproxy.cfg`, as it was run from the
    /// scratch directory), when it names one.
    pub file: Option<String>,
    /// The 1-based line in `file`, when HAProxy names one.
    pub line: Option<usize>,
    /// HAProxy's text without the level and process id, e.g. `parsing
    /// [haproxy.cfg:3] : unknown keyword 'foo' in 'global' section`.
    pub text: String,
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.level.as_str(), self.text)
    }
}

/// Parses HAProxy's output. Continuation lines (indented) join the message
/// before them; the version banner and the closing summary alerts, which
/// say nothing about any line, are dropped when more specific alerts exist.
pub fn parse(output: &str) -> Vec<Message> {
    let mut messages: Vec<Message> = Vec::new();
    for raw in output.lines() {
        if let Some(message) = parse_line(raw) {
            messages.push(message);
        } else if raw.starts_with([' ', '\t'])
            && !raw.trim().is_empty()
            && let Some(last) = messages.last_mut()
        {
            last.text.push('\n');
            last.text.push_str(raw.trim());
        }
    }
    messages.retain(|m| {
        !(m.level == Level::Notice
            && (m.text.starts_with("haproxy version is")
                || m.text.starts_with("path to executable is")))
    });
    let specific_alerts = messages
        .iter()
        .filter(|m| m.level == Level::Alert && !is_summary(&m.text))
        .count();
    if specific_alerts > 0 {
        messages.retain(|m| !(m.level == Level::Alert && is_summary(&m.text)));
    }
    messages
}

fn is_summary(text: &str) -> bool {
    text.starts_with("Error(s) found in configuration file")
        || text.starts_with("Fatal errors found in configuration")
}

fn parse_line(raw: &str) -> Option<Message> {
    let rest = raw.strip_prefix('[')?;
    let (tag, rest) = rest.split_once(']')?;
    let level = match tag.trim() {
        "ALERT" | "EMERG" => Level::Alert,
        "WARNING" => Level::Warning,
        "NOTICE" | "DEBUG" => Level::Notice,
        _ => return None,
    };
    let mut text = rest.trim_start();
    // The process id, then " : ".
    if let Some(after_pid) = text
        .strip_prefix('(')
        .and_then(|t| t.split_once(')'))
        .map(|(_, t)| t)
    {
        text = after_pid.trim_start();
    }
    text = text.strip_prefix(':').unwrap_or(text).trim_start();
    text = text.strip_prefix("config : ").unwrap_or(text);
    let (file, line) = location(text).unzip();
    Some(Message {
        level,
        file,
        line,
        text: text.trim_end().to_owned(),
    })
}

/// The first `[file:line]` in a message.
fn location(text: &str) -> Option<(String, usize)> {
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let close = after.find(']')?;
        if let Some((file, line)) = after[..close].rsplit_once(':')
            && !file.is_empty()
            && let Ok(line) = line.parse()
        {
            return Some((file.to_owned(), line));
        }
        rest = &after[close..];
    }
    None
}
