//! One configuration line read the way HAProxy 2.6 reads it (`parse_line`
//! in its `src/tools.c`, called by `readcfgfile`), so the policy judges the
//! words HAProxy will act on, not the text a library wrote.
//!
//! What HAProxy does, checked on Debian's 2.6.12 (`tests/policy.rs` keeps
//! checking it): words are separated by unquoted blanks; single quotes keep
//! everything literal; double quotes keep blanks and `#` but expand
//! environment variables (`"$NAME"`, `"${NAME}"`, `"${NAME-default}"`,
//! `"${NAME[*]}"`, which can expand to several words, the directive
//! included); quoted parts concatenate (`lu"a-lo"ad` is `lua-load`); outside
//! single quotes a backslash escapes a blank, `#`, a quote, `\`, and inside
//! double quotes `$`, and `\xHH`, `\t`, `\n`, `\r` are decoded (`lua\x2dload`
//! is `lua-load`); any other backslash stays. An unquoted `#` starts a
//! comment; a carriage return or a NUL ends the line wherever it is.

/// The words of one line and the environment variables it expands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Words {
    /// The words after unquoting and unescaping; a word holding an
    /// environment variable keeps the `$` reference as written.
    pub words: Vec<String>,
    /// For each word, the environment variables it expands (by name).
    pub expands: Vec<Vec<String>>,
}

impl Words {
    /// The word at `index`, or `""`.
    pub fn get(&self, index: usize) -> &str {
        self.words.get(index).map(String::as_str).unwrap_or("")
    }
}

/// Splits `line` (one line of the file, without its `\n`) into words.
pub fn split(line: &str) -> Words {
    let mut words = Words::default();
    let mut current: Option<(Vec<u8>, Vec<String>)> = None;
    let bytes = line.as_bytes();
    let (mut single, mut double) = (false, false);
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte == b'\r' || byte == 0 {
            break;
        }
        if matches!(byte, b' ' | b'\t' | 0x0b | 0x0c) && !single && !double {
            finish(&mut words, current.take());
            at += 1;
            continue;
        }
        if byte == b'#' && !single && !double {
            break;
        }
        let (word, expands) = current.get_or_insert_with(Default::default);
        match byte {
            b'\'' if !double => {
                single = !single;
                at += 1;
            }
            b'"' if !single => {
                double = !double;
                at += 1;
            }
            b'\\' if !single => {
                let (decoded, used) = unescape(&bytes[at..], double);
                word.extend_from_slice(&decoded);
                at += used;
            }
            b'$' if double => {
                let (name, used) = variable(&bytes[at..]);
                word.extend_from_slice(&bytes[at..at + used]);
                if let Some(name) = name {
                    expands.push(name);
                }
                at += used;
            }
            _ => {
                word.push(byte);
                at += 1;
            }
        }
    }
    finish(&mut words, current);
    words
}

fn finish(words: &mut Words, word: Option<(Vec<u8>, Vec<String>)>) {
    if let Some((bytes, expands)) = word {
        // A decoded `\x00` ends the word for HAProxy (a C string).
        let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
        words
            .words
            .push(String::from_utf8_lossy(&bytes[..end]).into_owned());
        words.expands.push(expands);
    }
}

/// A backslash sequence at the start of `rest`: (what it stands for, bytes used).
fn unescape(rest: &[u8], double: bool) -> (Vec<u8>, usize) {
    let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
    match rest.get(1) {
        Some(b' ' | b'\\' | b'#' | b'\'' | b'"') => (vec![rest[1]], 2),
        Some(b'$') if double => (vec![b'$'], 2),
        Some(b't') => (vec![b'\t'], 2),
        Some(b'n') => (vec![b'\n'], 2),
        Some(b'r') => (vec![b'\r'], 2),
        Some(b'x') => match (hex(rest.get(2)), hex(rest.get(3))) {
            // HAProxy refuses an incomplete `\x`; keeping it is harmless.
            (Some(high), Some(low)) => (vec![(high * 16 + low) as u8], 4),
            _ => (vec![b'\\'], 1),
        },
        _ => (vec![b'\\'], 1),
    }
}

/// An environment variable reference at the start of `rest` (which starts
/// with `$`): (its name, when it is one HAProxy expands, bytes used).
/// Pseudo-variables (`${.LINE}`) are HAProxy's own and not reported.
fn variable(rest: &[u8]) -> (Option<String>, usize) {
    let is_name = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    if rest.get(1) == Some(&b'{') {
        let Some(close) = rest.iter().position(|b| *b == b'}') else {
            return (None, 1);
        };
        let inner = &rest[2..close];
        let name: Vec<u8> = inner.iter().copied().take_while(is_name).collect();
        if name.is_empty() {
            return (None, close + 1);
        }
        return (Some(String::from_utf8_lossy(&name).into_owned()), close + 1);
    }
    let length = rest[1..].iter().take_while(|b| is_name(b)).count();
    if length == 0 || rest[1].is_ascii_digit() {
        return (None, 1);
    }
    (
        Some(String::from_utf8_lossy(&rest[1..=length]).into_owned()),
        length + 1,
    )
}
