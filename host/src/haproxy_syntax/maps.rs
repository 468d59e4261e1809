//! Which map files HAProxy 2.6 loads whatever their entries say, and which
//! entries it would refuse: so a change of map entries alone (an Ingress
//! host or path) can skip `haproxy -c` of the whole configuration without a
//! file HAProxy refuses ever reaching a reload.
//!
//! A map file is read by its converters, `map_<match>_<output>` (`map` is
//! `map_str`). Measured with Debian's HAProxy 2.6.12 (`haproxy -c`), and
//! pinned by this module's tests against the real binary:
//! - string matches (`str`, `beg`, `end`, `sub`, `dom`, `dir`) take any key,
//!   of any length or bytes, and a line with a key alone;
//! - `ip` keys must be an address or a network, `int` and `len` keys an
//!   integer; `reg` and `regm` keys are regexes PCRE2 must compile, which
//!   the host does not judge: such a map is always validated;
//! - `_int` values must be integers, `_ip` values addresses; `_str` values
//!   (the default) anything; a key without a value loads for `_str` and
//!   `_int`, not `_ip`.

use std::net::IpAddr;

/// What a map's entries must be, from the converter that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapReader {
    key: KeyRule,
    value: ValueRule,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyRule {
    /// Any text (the string matches).
    Any,
    Address,
    Integer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueRule {
    Any,
    Integer,
    Address,
}

/// Why an entry would not load, or why the host cannot tell.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapEntryError {
    #[error("line {line}: the key is not an IP address or network")]
    KeyNotAddress { line: usize },
    #[error("line {line}: the key is not an integer")]
    KeyNotInteger { line: usize },
    #[error("line {line}: the value is not an integer")]
    ValueNotInteger { line: usize },
    #[error("line {line}: the value is not an IP address")]
    ValueNotAddress { line: usize },
}

impl MapReader {
    /// The rules of converter `name` (`map_beg`, `map_str_int`, ...); `None`
    /// for one the host does not judge (regex matches, an unknown name).
    pub fn of_converter(name: &str) -> Option<Self> {
        let rest = name.strip_prefix("map")?;
        let mut parts = rest.strip_prefix('_').unwrap_or(rest).split('_');
        let matching = parts.next().filter(|m| !m.is_empty()).unwrap_or("str");
        let output = parts.next().unwrap_or("str");
        if parts.next().is_some() {
            return None;
        }
        let key = match matching {
            "str" | "beg" | "end" | "sub" | "dom" | "dir" => KeyRule::Any,
            "ip" => KeyRule::Address,
            "int" | "len" => KeyRule::Integer,
            _ => return None,
        };
        let value = match output {
            "str" => ValueRule::Any,
            "int" => ValueRule::Integer,
            "ip" => ValueRule::Address,
            _ => return None,
        };
        Some(Self { key, value })
    }

    /// Checks every entry of `content` the way HAProxy parses the file:
    /// comment and blank lines skipped, the key up to the first blank, the
    /// value after it.
    pub fn check(&self, content: &str) -> Result<(), MapEntryError> {
        for (index, line) in content.lines().enumerate() {
            let line_number = index + 1;
            let line = line.trim_matches([' ', '\t', '\r']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line
                .split_once([' ', '\t'])
                .map_or((line, ""), |(key, value)| {
                    (key, value.trim_matches([' ', '\t']))
                });
            match self.key {
                KeyRule::Any => {}
                KeyRule::Address if !is_network(key) => {
                    return Err(MapEntryError::KeyNotAddress { line: line_number });
                }
                KeyRule::Integer if key.parse::<i64>().is_err() => {
                    return Err(MapEntryError::KeyNotInteger { line: line_number });
                }
                _ => {}
            }
            match self.value {
                ValueRule::Any => {}
                // A key alone loads for an integer output (measured), not
                // for an address.
                ValueRule::Integer if value.is_empty() => {}
                ValueRule::Integer if value.parse::<i64>().is_err() => {
                    return Err(MapEntryError::ValueNotInteger { line: line_number });
                }
                ValueRule::Address if value.parse::<IpAddr>().is_err() => {
                    return Err(MapEntryError::ValueNotAddress { line: line_number });
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// `10.0.0.1`, `10.0.0.0/8`, `2001:db8::/32`: the forms the host accepts
/// (HAProxy takes more, such as dotted netmasks; those are validated).
fn is_network(key: &str) -> bool {
    let (address, bits) = key
        .split_once('/')
        .map_or((key, None), |(a, b)| (a, Some(b)));
    let Ok(address) = address.parse::<IpAddr>() else {
        return false;
    };
    let most = if address.is_ipv4() { 32 } else { 128 };
    bits.is_none_or(|bits| bits.parse::<u8>().is_ok_and(|bits| bits <= most))
}

#[cfg(test)]
mod tests;
