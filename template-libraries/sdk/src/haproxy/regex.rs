//! Regexes as PCRE2 reads them. HAProxy compiles `-m reg`, `map_reg`,
//! `regsub` and `replace-path` patterns with PCRE2, in non-UTF mode; a
//! pattern PCRE2 refuses makes `haproxy -c` refuse the whole render. Users
//! write for nginx (PCRE) or for the Gateway API (RE2-like), so a pattern
//! is taken only when Rust's `regex-syntax` parses it (the common ground)
//! and it uses none of the forms that parser accepts and PCRE2 refuses or
//! reads otherwise, each measured with `haproxy -c` on 2.6.12:
//!
//! | form | PCRE2 2.6.12 |
//! | --- | --- |
//! | `\u0041`, `\U00000041` | refused |
//! | `(?u)`, `(?i-u)` | refused (no `u` flag) |
//! | `\x{100}` (above 0xff) | refused in non-UTF mode; `\x{41}`, `\xff` pass |
//! | `\p{Letter}`, `\p{Lowercase_Letter}` | refused (long category names); `\p{L}`, `\p{Greek}`, `\p{Alphabetic}` pass |
//! | `a{70000}`, `a{2,70000}` | refused (counts above 65,535) |
//! | `(?R)` | recursion in PCRE2, CRLF mode in Rust: refused here |
//! | `\b{start}`, `\<`, `[a&&b]`, `[a[bc]]` | accepted by PCRE2 with another meaning: refused here |

use regex_syntax::ast::{
    self, AssertionKind, Ast, ClassSetBinaryOp, ClassSetItem, ClassUnicodeKind, Flag,
    FlagsItemKind, HexLiteralKind, LiteralKind, RepetitionRange,
};

use super::{TextError, TextResult};

/// The largest repetition count PCRE2 compiles.
const MAX_REPEAT: u32 = 65_535;

/// General category long names: `regex-syntax` takes them, PCRE2 only
/// the one- and two-letter forms (`\p{L}`, `\p{Lu}`).
const LONG_CATEGORY_NAMES: &[&str] = &[
    "letter",
    "casedletter",
    "lowercaseletter",
    "uppercaseletter",
    "titlecaseletter",
    "modifierletter",
    "otherletter",
    "mark",
    "combiningmark",
    "spacingmark",
    "enclosingmark",
    "nonspacingmark",
    "number",
    "decimalnumber",
    "digit",
    "letternumber",
    "othernumber",
    "punctuation",
    "punct",
    "connectorpunctuation",
    "dashpunctuation",
    "openpunctuation",
    "closepunctuation",
    "initialpunctuation",
    "finalpunctuation",
    "otherpunctuation",
    "symbol",
    "mathsymbol",
    "currencysymbol",
    "modifiersymbol",
    "othersymbol",
    "separator",
    "spaceseparator",
    "lineseparator",
    "paragraphseparator",
    "other",
    "control",
    "cntrl",
    "format",
    "surrogate",
    "privateuse",
    "unassigned",
];

/// `pattern` when PCRE2 compiles it with the meaning Rust's parser gives
/// it; the error names the first construct it does not. Control
/// characters are refused (no HAProxy line carries them); the context's
/// writer ([`super::argument`], [`super::map_key`]) handles the rest.
pub fn check_regex(pattern: &str) -> TextResult<&str> {
    if pattern.chars().any(char::is_control) {
        return Err(TextError::Control);
    }
    if pattern.len() > super::MAX_REGEX_BYTES {
        return Err(TextError::TooLong {
            len: pattern.len(),
            max: super::MAX_REGEX_BYTES,
            what: "a regular expression (PCRE2 refuses larger compiled patterns)",
        });
    }
    let parsed = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| TextError::RegexSyntax(e.kind().to_string()))?;
    ast::visit(&parsed, Pcre2)?;
    // The translation catches what the AST does not (invalid ranges such as
    // `[\d-z]`, which PCRE2 refuses too).
    regex_syntax::Parser::new()
        .parse(pattern)
        .map_err(|e| TextError::RegexSyntax(last_line(&e.to_string())))?;
    Ok(pattern)
}

/// `text` matched literally by PCRE2: every ASCII character but a letter,
/// a digit or `/` escaped (PCRE2 reads an escaped non-alphanumeric
/// character as itself; an escaped letter may be a class such as `\d`;
/// `/` means nothing in a PCRE2 pattern and is left readable in paths).
pub fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() && c != '/' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// regex-syntax draws the pattern over several lines; the last says what
/// is wrong.
fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| l.starts_with("error:"))
        .unwrap_or(text)
        .trim_start_matches("error: ")
        .to_owned()
}

struct Pcre2;

fn refuse(what: impl Into<String>) -> Result<(), TextError> {
    Err(TextError::RegexPcre2(what.into()))
}

fn check_property(name: &str) -> Result<(), TextError> {
    let folded: String = name
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if LONG_CATEGORY_NAMES.contains(&folded.as_str()) {
        return refuse(format!(
            "the long category name \\p{{{name}}} (write the short one, such as \\p{{L}})"
        ));
    }
    Ok(())
}

impl ast::Visitor for Pcre2 {
    type Output = ();
    type Err = TextError;

    fn finish(self) -> Result<(), TextError> {
        Ok(())
    }

    fn visit_pre(&mut self, ast: &Ast) -> Result<(), TextError> {
        match ast {
            Ast::Flags(set) => check_flags(&set.flags),
            Ast::Group(group) => group.flags().map_or(Ok(()), check_flags),
            Ast::Literal(literal) => check_literal(literal),
            Ast::ClassUnicode(class) => check_unicode_class(&class.kind),
            Ast::Repetition(rep) => match rep.op.kind {
                ast::RepetitionKind::Range(
                    RepetitionRange::Exactly(n)
                    | RepetitionRange::AtLeast(n)
                    | RepetitionRange::Bounded(_, n),
                ) if n > MAX_REPEAT => refuse(format!("a repetition count above {MAX_REPEAT}")),
                _ => Ok(()),
            },
            Ast::Assertion(assertion) => match assertion.kind {
                AssertionKind::WordBoundaryStart
                | AssertionKind::WordBoundaryEnd
                | AssertionKind::WordBoundaryStartAngle
                | AssertionKind::WordBoundaryEndAngle
                | AssertionKind::WordBoundaryStartHalf
                | AssertionKind::WordBoundaryEndHalf => {
                    refuse("a word-boundary form (\\b{...}, \\<, \\>) PCRE2 reads otherwise")
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn visit_class_set_item_pre(&mut self, item: &ClassSetItem) -> Result<(), TextError> {
        match item {
            ClassSetItem::Bracketed(_) => {
                refuse("a class nested in a class ([a[bc]]), which PCRE2 reads otherwise")
            }
            ClassSetItem::Literal(literal) => check_literal(literal),
            ClassSetItem::Range(range) => {
                check_literal(&range.start)?;
                check_literal(&range.end)
            }
            ClassSetItem::Unicode(class) => check_unicode_class(&class.kind),
            _ => Ok(()),
        }
    }

    fn visit_class_set_binary_op_pre(&mut self, _op: &ClassSetBinaryOp) -> Result<(), TextError> {
        refuse("a class operation (&&, --, ~~), which PCRE2 reads as literal characters")
    }
}

fn check_flags(flags: &ast::Flags) -> Result<(), TextError> {
    for item in &flags.items {
        match item.kind {
            FlagsItemKind::Flag(Flag::Unicode) => return refuse("the flag u"),
            FlagsItemKind::Flag(Flag::CRLF) => return refuse("the flag R (recursion in PCRE2)"),
            _ => {}
        }
    }
    Ok(())
}

fn check_literal(literal: &ast::Literal) -> Result<(), TextError> {
    match &literal.kind {
        LiteralKind::HexFixed(HexLiteralKind::UnicodeShort)
        | LiteralKind::HexBrace(HexLiteralKind::UnicodeShort) => refuse("\\u escapes"),
        LiteralKind::HexFixed(HexLiteralKind::UnicodeLong)
        | LiteralKind::HexBrace(HexLiteralKind::UnicodeLong) => refuse("\\U escapes"),
        LiteralKind::HexBrace(HexLiteralKind::X) if u32::from(literal.c) > 0xff => {
            refuse("\\x{...} above \\x{ff} (HAProxy's PCRE2 matches bytes)")
        }
        _ => Ok(()),
    }
}

fn check_unicode_class(kind: &ClassUnicodeKind) -> Result<(), TextError> {
    match kind {
        ClassUnicodeKind::OneLetter(_) => Ok(()),
        ClassUnicodeKind::Named(name) => check_property(name),
        ClassUnicodeKind::NamedValue { value, .. } => check_property(value),
    }
}
