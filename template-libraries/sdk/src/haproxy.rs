//! The one writer of user-derived text: each context HAProxy reads text in
//! (a configuration word, a log-format argument, a map key or value, a
//! crt-list line, a regex) has one function here that quotes the text or
//! refuses it with a [`TextError`], and the limits HAProxy puts on a line
//! are constants here, not numbers scattered through the libraries.
//!
//! A namespace user writes most of the strings a library turns into
//! configuration (hosts, paths, annotation values). A string HAProxy reads
//! differently than the library meant is not a mere error: an unquoted `#`
//! cuts a line (a redirect whose `if` was cut applies to every request of
//! the frontend), a map line past the read buffer becomes two entries (the
//! tail routes another namespace's host), one word too many makes
//! `haproxy -c` refuse the whole render. Every fact below was measured on
//! HAProxy 2.6.12 (`haproxy -c` and traffic, 2026-12); the tests of this
//! module pin the writers to them.
//!
//! Quoting, as HAProxy 2.6 parses a configuration line:
//! - outside quotes, `#` starts a comment anywhere, a blank ends the word,
//!   `\` escapes the next character;
//! - inside double quotes, `$NAME` and `${NAME}` expand environment
//!   variables and `\` still escapes (`\x41` is `A`);
//! - inside single quotes nothing is interpreted, not even `\`: the only
//!   special character is the closing `'`. So [`argument`] single-quotes,
//!   writing a `'` as `'\''` (close, escaped quote, reopen).

mod regex;

pub use regex::{check_regex, regex_escape};

/// The most words HAProxy 2.6 reads on one configuration line: its
/// `MAX_LINE_ARGS` is 64, one slot of which ends the list, so a 64th word
/// makes `haproxy -c` fail with "too many words" (`acl x src` and 61 CIDRs).
pub const MAX_WORDS_PER_LINE: usize = 63;

/// The longest map file line HAProxy reads whole, newline excluded: map
/// files are read with `fgets` into a buffer of `tune.bufsize` (16,384, the
/// default, which no bundled library changes). A longer line is cut there
/// and its tail read as the next line: a second entry whose key the writer
/// of the long line chose.
pub const MAP_LINE_MAX_BYTES: usize = 16_383;

/// The longest crt-list line, newline excluded ("line too long, limit is
/// 65535 characters" counts the newline).
pub const CRT_LIST_LINE_MAX_BYTES: usize = 65_534;

/// The most words on one crt-list line (certificate, options, SNI filters):
/// a 2,049th fails with "too many args".
pub const CRT_LIST_LINE_MAX_WORDS: usize = 2_048;

/// Configuration lines have no length limit on 2.6 (a 2 MB line parses);
/// the request and response buffers do, so a value written into a header
/// or a redirect beyond this many bytes can never be sent. Writers of such
/// values refuse longer text rather than write a line HAProxy warns about.
pub const MAX_ARGUMENT_BYTES: usize = 8_192;

/// The longest regex source the SDK's regex writer takes. PCRE2 (as
/// HAProxy 2.6.12 links it) refuses a compiled pattern past its 64 KiB
/// link size: an alternation of origins passed at 32,493 bytes and was
/// refused at 40,893 ("regular expression is too large"). Half the first,
/// so patterns that compile larger than their text still fit.
pub const MAX_REGEX_BYTES: usize = 16_384;

/// Why a user's text cannot be written in a context. The message completes
/// a sentence naming the text (`path "/a b" holds whitespace, ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Nothing to write where HAProxy needs a word.
    #[error("is empty")]
    Empty,
    /// A line break, tab, NUL or other control character: a configuration
    /// or map line cannot carry one.
    #[error(
        "holds a control character (a line break, a tab or NUL), which no HAProxy line can carry"
    )]
    Control,
    /// Whitespace, which ends a map key or a crt-list word.
    #[error("holds whitespace, which ends a word there")]
    Whitespace,
    /// A `#`, which starts a comment where it is not quoted.
    #[error("holds `#`, which HAProxy reads as the start of a comment there")]
    Comment,
    /// A character the context gives a meaning (a bracket on a crt-list
    /// line opens its options).
    #[error("holds {0:?}, which HAProxy reads as syntax there")]
    Special(char),
    /// Longer than HAProxy reads in one line or buffer.
    #[error("is {len} bytes long; HAProxy reads at most {max} bytes in {what}")]
    TooLong {
        /// Bytes the text (or its line) would take.
        len: usize,
        /// The limit.
        max: usize,
        /// Where the limit applies (`one map line`).
        what: &'static str,
    },
    /// Not a regular expression at all.
    #[error("is not a regular expression: {0}")]
    RegexSyntax(String),
    /// A regular expression Rust's parser takes but PCRE2 (what HAProxy
    /// compiles regexes with) refuses or reads otherwise.
    #[error("uses {0}, which PCRE2 (HAProxy's regex engine) does not accept")]
    RegexPcre2(String),
}

/// Result of a writer.
pub type TextResult<T> = Result<T, TextError>;

/// `text` as one configuration word that HAProxy reads back exactly: in
/// single quotes (nothing inside is interpreted: no `#` comment, no `$`
/// expansion, no `\` escape). Refuses control characters (a line break
/// would end the line) and text past [`MAX_ARGUMENT_BYTES`].
pub fn argument(text: &str) -> TextResult<String> {
    if text.chars().any(char::is_control) {
        return Err(TextError::Control);
    }
    if text.len() > MAX_ARGUMENT_BYTES {
        return Err(TextError::TooLong {
            len: text.len(),
            max: MAX_ARGUMENT_BYTES,
            what: "a header or redirect",
        });
    }
    Ok(single_quoted(text))
}

/// `text` as literal text in a log-format argument (`http-request
/// redirect location`, `set-header`, `return lf-string`): `%` doubled, so
/// no `%[` sample fetch is evaluated, then quoted as [`argument`].
pub fn log_format(text: &str) -> TextResult<String> {
    argument(&log_format_literal(text))
}

/// `text` with `%` doubled: what a log-format string reads as `text`. For
/// callers that assemble a log-format from literal text and `%[...]`
/// fetches of their own, then quote the whole with [`argument`].
pub fn log_format_literal(text: &str) -> String {
    text.replace('%', "%%")
}

/// The single-quoted form, control characters already excluded.
pub(crate) fn single_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// `key` checked as a map key: not empty, no whitespace (which ends a key),
/// no control character, no `#` (a line starting with it is a comment, and
/// no request path HAProxy sees holds one).
pub fn map_key(key: &str) -> TextResult<&str> {
    if key.is_empty() {
        return Err(TextError::Empty);
    }
    if key.chars().any(char::is_control) {
        return Err(TextError::Control);
    }
    if key.chars().any(char::is_whitespace) {
        return Err(TextError::Whitespace);
    }
    if key.contains('#') {
        return Err(TextError::Comment);
    }
    Ok(key)
}

/// `value` checked as a map value (the rest of the line after the key):
/// anything on one line.
pub fn map_value(value: &str) -> TextResult<&str> {
    if value.chars().any(|c| c == '\n' || c == '\r' || c == '\0') {
        return Err(TextError::Control);
    }
    Ok(value)
}

/// One `key value` map line, newline included, when HAProxy reads it back
/// as exactly this one entry: a checked key and value on a line of at most
/// [`MAP_LINE_MAX_BYTES`].
pub fn map_line(key: &str, value: &str) -> TextResult<String> {
    map_key(key)?;
    map_value(value)?;
    let len = key.len() + 1 + value.len();
    if len > MAP_LINE_MAX_BYTES {
        return Err(TextError::TooLong {
            len,
            max: MAP_LINE_MAX_BYTES,
            what: "one map line",
        });
    }
    Ok(format!("{key} {value}\n"))
}

/// `word` checked as a crt-list word (a certificate path or an SNI filter).
pub fn crt_list_word(word: &str) -> TextResult<&str> {
    map_key(word)?;
    if let Some(c) = word.chars().find(|c| matches!(c, '[' | ']' | '!')) {
        return Err(TextError::Special(c));
    }
    Ok(word)
}

/// The crt-list lines serving `file` (with `options`, the bracketed ssl
/// options, if any) for `filters` (SNI names): as many lines as HAProxy's
/// word and length limits need. HAProxy loads a certificate named on
/// several lines once. Filters that are not crt-list words are left out and
/// returned, for the caller to warn about.
pub fn crt_list_lines<'a>(
    file: &str,
    options: Option<&str>,
    filters: &[&'a str],
) -> TextResult<(Vec<String>, Vec<&'a str>)> {
    crt_list_word(file)?;
    let head = match options {
        Some(options) => {
            if options.chars().any(char::is_control) {
                return Err(TextError::Control);
            }
            if let Some(c) = options.chars().find(|c| matches!(c, '[' | ']')) {
                return Err(TextError::Special(c));
            }
            format!("{file} [{options}]")
        }
        None => file.to_owned(),
    };
    let head_words = head.split_whitespace().count();
    if head_words >= CRT_LIST_LINE_MAX_WORDS || head.len() >= CRT_LIST_LINE_MAX_BYTES {
        return Err(TextError::TooLong {
            len: head.len(),
            max: CRT_LIST_LINE_MAX_BYTES,
            what: "one crt-list line",
        });
    }
    let mut lines = Vec::new();
    let mut refused = Vec::new();
    let mut line = head.clone();
    let mut words = head_words;
    for &filter in filters {
        if crt_list_word(filter).is_err() || head.len() + 1 + filter.len() > CRT_LIST_LINE_MAX_BYTES
        {
            refused.push(filter);
            continue;
        }
        if words + 1 > CRT_LIST_LINE_MAX_WORDS
            || line.len() + 1 + filter.len() > CRT_LIST_LINE_MAX_BYTES
        {
            lines.push(std::mem::replace(&mut line, head.clone()));
            words = head_words;
        }
        line.push(' ');
        line.push_str(filter);
        words += 1;
    }
    // A line without filters would serve the certificate for the names it
    // holds itself: never written.
    if words > head_words {
        lines.push(line);
    }
    Ok((lines, refused))
}

/// Configuration lines `<head> <word>... <tail>`, as many as needed so that
/// none holds more than [`MAX_WORDS_PER_LINE`] words. For directives that
/// HAProxy combines when repeated: several `acl <name> ...` lines of one
/// name are OR-ed, so a long CIDR list stays one ACL. `words` must be
/// single configuration words (checked or quoted by the caller). `None`
/// when `head` and `tail` alone leave no room for a word.
pub fn split_words(head: &str, words: &[String], tail: &str) -> Option<Vec<String>> {
    let fixed = head.split_whitespace().count() + tail.split_whitespace().count();
    let room = MAX_WORDS_PER_LINE.checked_sub(fixed).filter(|r| *r > 0)?;
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(" {tail}")
    };
    Some(
        words
            .chunks(room)
            .map(|chunk| format!("{head} {}{tail}", chunk.join(" ")))
            .collect(),
    )
}

#[cfg(test)]
mod tests;
