//! How HAProxy 2.6 reads haproxy.cfg, as far as the host must know it to
//! judge a library's output: the words of a line (quoting, escapes,
//! environment variables, comments) and the keywords that open a section.
//! One table for the output checks (`library::checks`), the directive
//! policy (`policy`) and the injection tests, so they cannot disagree.

pub mod maps;
pub mod words;

/// Where a line is, as HAProxy sees it: the section keyword that opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Before any section.
    None,
    Global,
    /// `defaults`, `frontend`, `listen`, `backend`.
    Proxy,
    HttpErrors,
    Ring,
    Program,
    /// Any other section (userlist, peers, resolvers, cache, ...).
    Other,
}

/// The keywords that open a section. HAProxy recognises them at any
/// indentation, so a line whose first word is one of them starts a new
/// section. `crt-store` and `traces` open sections only in later HAProxy
/// versions; they are listed so a library's output stays safe there too.
const SECTION_KEYWORDS: &[(&str, Section)] = &[
    ("global", Section::Global),
    ("defaults", Section::Proxy),
    ("frontend", Section::Proxy),
    ("listen", Section::Proxy),
    ("backend", Section::Proxy),
    ("http-errors", Section::HttpErrors),
    ("ring", Section::Ring),
    ("program", Section::Program),
    ("userlist", Section::Other),
    ("peers", Section::Other),
    ("mailers", Section::Other),
    ("resolvers", Section::Other),
    ("cache", Section::Other),
    ("log-forward", Section::Other),
    ("fcgi-app", Section::Other),
    ("namespace_list", Section::Other),
    ("crt-store", Section::Other),
    ("traces", Section::Other),
];

/// The section `keyword` opens, if it is a section keyword.
pub fn section_of(keyword: &str) -> Option<Section> {
    section_keyword(keyword).map(|(_, section)| section)
}

/// The table's own spelling of `word` with its section, if `word` opens one.
pub fn section_keyword(word: &str) -> Option<(&'static str, Section)> {
    SECTION_KEYWORDS
        .iter()
        .find(|(keyword, _)| *keyword == word)
        .copied()
}
