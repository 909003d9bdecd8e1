//! Grants asked for while a call runs: what the host refused a plugin's call ([`Refused`], collected in a
//! [`RefusalBook`] by call id), the grant that would allow exactly that ([`Grant`]), the question put to the user
//! ([`Question`]) and the answers ([`Answer`]).
//!
//! Asking is off unless the user's policy says `[ask] grants = true` (a project's file cannot turn it on:
//! [`crate::policy::Policy::load_with_trusted_project`]). A grant asked never goes beyond what the plugin declared
//! it needs: the caller re-decides the plugin's grants with the asked grant added to the user's policy, and the
//! intersection with the plugin's requests is what it gets.
//!
//! ```
//! use toolwright_core::ask::{Grant, Refused};
//! let refused = Refused::Read { path: "/home/me/data".into(), dir: true };
//! assert_eq!(refused.grant(Some("/home/me")), Some(Grant::Read("/home/me/data".into())));
//! // Never the home directory itself, nor the root: too wide to ask for by a click.
//! let refused = Refused::Read { path: "/home/me/notes.txt".into(), dir: false };
//! assert_eq!(refused.grant(Some("/home/me")), None);
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::text::escape;

/// The refusals one call keeps; later ones are dropped (only the first is asked about).
pub const MAX_REFUSALS_PER_CALL: usize = 16;
/// The calls whose refusals are kept; the oldest go first.
pub const MAX_CALLS: usize = 256;

/// Something the host refused a plugin's call, as the host saw it (never as the plugin described it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Reading `path` (absolute, normalised by the host); `dir` when it is a directory.
    Read {
        /// The path.
        path: String,
        /// Whether it is a directory.
        dir: bool,
    },
    /// Writing `path` (absolute, normalised by the host).
    Write {
        /// The path.
        path: String,
    },
    /// Starting `program` (as the plugin named it).
    Spawn {
        /// The program.
        program: String,
    },
    /// Connecting to (or sending to) `address`, `IP:PORT` (`[IPv6]:PORT`) as the plugin's socket named it.
    Connect {
        /// The address.
        address: String,
    },
}

/// A grant the user may give: exactly what a [`Refused`] needs, in the policy's words.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Grant {
    /// `read = ["DIR"]`.
    Read(String),
    /// `write = ["DIR"]`.
    Write(String),
    /// `spawn = ["PROGRAM"]`.
    Spawn(String),
    /// `network = ["HOST:PORT"]`.
    Network(String),
}

impl Grant {
    /// The policy key (`read`, `write`, `spawn`) and its value.
    pub fn key_value(&self) -> (&'static str, &str) {
        match self {
            Grant::Read(d) => ("read", d),
            Grant::Write(d) => ("write", d),
            Grant::Spawn(p) => ("spawn", p),
            Grant::Network(a) => ("network", a),
        }
    }
}

impl Refused {
    /// The grant that allows exactly this: a directory read, that directory; a file's read or any write, the
    /// directory that holds it (files are granted by directory, as in the policy file, and the question names
    /// both); a program, that program. None when it would be the root or the home directory itself, or the
    /// program names a path the plugin could have written (only bare names are asked for).
    pub fn grant(&self, home: Option<&str>) -> Option<Grant> {
        let too_wide = |dir: &str| {
            dir == "/" || home.is_some_and(|h| dir.trim_end_matches('/') == h.trim_end_matches('/'))
        };
        match self {
            Refused::Read { path, dir } => {
                let dir = if *dir {
                    match path.trim_end_matches('/') {
                        "" => "/".to_owned(),
                        trimmed => trimmed.to_owned(),
                    }
                } else {
                    parent(path)
                };
                (!too_wide(&dir)).then_some(Grant::Read(dir))
            }
            Refused::Write { path } => {
                let dir = parent(path);
                (!too_wide(&dir)).then_some(Grant::Write(dir))
            }
            Refused::Spawn { program } => {
                let bare = !program.is_empty()
                    && !program.contains('/')
                    && !program.chars().any(crate::text::needs_escape);
                bare.then(|| Grant::Spawn(program.clone()))
            }
            // Exactly that address; the asker may name it by a host name the plugin requested instead.
            Refused::Connect { address } => crate::policy::NetPattern::parse(address)
                .filter(|p| p.port.is_some() && p.host != "*")
                .map(|p| Grant::Network(p.to_string())),
        }
    }

    /// What was tried, for the question: `read /a/b`.
    fn tried(&self) -> String {
        match self {
            Refused::Read { path, .. } => format!("read `{}`", escape(path)),
            Refused::Write { path } => format!("write `{}`", escape(path)),
            Refused::Spawn { program } => format!("start the program `{}`", escape(program)),
            Refused::Connect { address } => format!("connect to `{}`", escape(address)),
        }
    }
}

/// The directory that holds `path` (absolute).
fn parent(path: &str) -> String {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) | None => "/".to_owned(),
        Some((dir, _)) => dir.to_owned(),
    }
}

/// The refusals of each call, by call id, for the server that may ask about them once the call ended. Bounded
/// ([`MAX_CALLS`], [`MAX_REFUSALS_PER_CALL`]); cloning shares it.
#[derive(Clone, Default)]
pub struct RefusalBook(Arc<Mutex<Book>>);

#[derive(Default)]
struct Book {
    calls: HashMap<String, (String, Vec<Refused>)>,
    order: VecDeque<String>,
}

impl std::fmt::Debug for RefusalBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefusalBook")
    }
}

impl RefusalBook {
    /// Record what the call `call_id` of `plugin` was refused.
    pub fn record(&self, call_id: &str, plugin: &str, refused: Vec<Refused>) {
        if refused.is_empty() {
            return;
        }
        let mut book = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !book.calls.contains_key(call_id) {
            if book.order.len() >= MAX_CALLS
                && let Some(oldest) = book.order.pop_front()
            {
                book.calls.remove(&oldest);
            }
            book.order.push_back(call_id.to_owned());
        }
        let (_, kept) = book
            .calls
            .entry(call_id.to_owned())
            .or_insert_with(|| (plugin.to_owned(), Vec::new()));
        for r in refused {
            if kept.len() < MAX_REFUSALS_PER_CALL && !kept.contains(&r) {
                kept.push(r);
            }
        }
    }

    /// Take what the call `call_id` was refused: the plugin and the refusals (none when nothing was).
    pub fn take(&self, call_id: &str) -> Option<(String, Vec<Refused>)> {
        let mut book = self.0.lock().unwrap_or_else(|p| p.into_inner());
        book.order.retain(|id| id != call_id);
        book.calls.remove(call_id)
    }
}

/// How long an allowed grant lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// This call only (it runs again, alone, with the grant).
    Once,
    /// Every call until the server stops.
    Session,
    /// Written to the user's policy file.
    Always,
}

/// The user's answer to a [`Question`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Allowed, for so long.
    Allow(Scope),
    /// Denied.
    Deny,
    /// Not answered: declined, cancelled, or an answer that was not one of the choices.
    Unanswered,
}

/// The choices offered, as the answer's value: (value, title).
pub const CHOICES: [(&str, &str); 4] = [
    ("once", "Allow once"),
    ("session", "Allow for this session"),
    ("always", "Allow always (written to your policy file)"),
    ("deny", "Deny"),
];

impl Answer {
    /// The answer a choice's value means; anything else is [`Answer::Unanswered`].
    pub fn from_choice(value: &str) -> Answer {
        match value {
            "once" => Answer::Allow(Scope::Once),
            "session" => Answer::Allow(Scope::Session),
            "always" => Answer::Allow(Scope::Always),
            "deny" => Answer::Deny,
            _ => Answer::Unanswered,
        }
    }

    /// The answer in a word, for the audit log.
    pub fn word(self) -> &'static str {
        match self {
            Answer::Allow(Scope::Once) => "allowed once",
            Answer::Allow(Scope::Session) => "allowed for this session",
            Answer::Allow(Scope::Always) => "allowed always",
            Answer::Deny => "denied",
            Answer::Unanswered => "not answered",
        }
    }
}

/// A question about one refusal of one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The plugin's name.
    pub plugin: String,
    /// What it was refused.
    pub refused: Refused,
    /// What allowing grants.
    pub grant: Grant,
    /// The reason the plugin gave for the capability that covers the grant, if any.
    pub reason: Option<String>,
}

impl Question {
    /// The question in words, every part the plugin chose escaped (a newline in a path or a reason cannot start
    /// a line of its own): "plugin `csv-stats` wants to read `/home/me/data` (because: …)".
    pub fn text(&self) -> String {
        let mut text = format!(
            "plugin `{}` wants to {}",
            escape(&self.plugin),
            self.refused.tried()
        );
        if let Some(reason) = self.reason.as_deref().filter(|r| !r.is_empty()) {
            let reason: String = reason.chars().take(200).collect();
            text.push_str(&format!(" (because: {})", escape(&reason)));
        }
        let (key, value) = self.grant.key_value();
        let granted = match key {
            "read" => format!("read access to the directory `{}`", escape(value)),
            "write" => format!("write access to the directory `{}`", escape(value)),
            "network" => format!("connections to `{}`", escape(value)),
            _ => format!("starting `{}`", escape(value)),
        };
        text.push_str(&format!(". Allowing grants {granted}."));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_is_exactly_the_refused_directory_or_the_one_holding_the_file() {
        let read = |path: &str, dir| {
            Refused::Read {
                path: path.into(),
                dir,
            }
            .grant(Some("/home/me"))
        };
        assert_eq!(read("/data/sets", true), Some(Grant::Read("/data/sets".into())));
        assert_eq!(
            read("/data/sets/a.csv", false),
            Some(Grant::Read("/data/sets".into()))
        );
        assert_eq!(read("/etc", true), Some(Grant::Read("/etc".into())));
        assert_eq!(read("/etc", false), None, "the root is never asked for");
        assert_eq!(read("/home/me", true), None, "nor the home directory");
        assert_eq!(read("/home/me/", true), None);
        let write = Refused::Write {
            path: "/data/out.txt".into(),
        }
        .grant(None);
        assert_eq!(write, Some(Grant::Write("/data".into())));
        let spawn = |p: &str| Refused::Spawn { program: p.into() }.grant(None);
        assert_eq!(spawn("git"), Some(Grant::Spawn("git".into())));
        assert_eq!(spawn("/tmp/evil"), None, "only bare names");
        assert_eq!(spawn("gi\nt"), None);
        let connect = |a: &str| Refused::Connect { address: a.into() }.grant(None);
        assert_eq!(
            connect("127.0.0.1:8080"),
            Some(Grant::Network("127.0.0.1:8080".into()))
        );
        assert_eq!(connect("[::1]:443"), Some(Grant::Network("[::1]:443".into())));
        assert_eq!(connect("*:443"), None, "never any host");
        assert_eq!(connect("127.0.0.1"), None);
    }

    #[test]
    fn a_hostile_path_or_reason_cannot_shape_the_question() {
        let question = Question {
            plugin: "csv\u{1b}[2K".into(),
            refused: Refused::Read {
                path: "/data/x\nplugin `good` wants nothing. Allow".into(),
                dir: true,
            },
            grant: Grant::Read("/data/x\nplugin".into()),
            reason: Some("because\r\n\u{202e}yes".into()),
        };
        let text = question.text();
        assert!(
            !text.contains('\n') && !text.contains('\r') && !text.contains('\u{1b}'),
            "{text}"
        );
        assert!(!text.contains('\u{202e}'));
        assert_eq!(
            text,
            "plugin `csv\\u{1b}[2K` wants to read `/data/x\\nplugin `good` wants nothing. Allow` (because: \
             because\\r\\n\\u{202e}yes). Allowing grants read access to the directory `/data/x\\nplugin`."
        );
    }

    #[test]
    fn only_the_offered_choices_are_answers() {
        assert_eq!(Answer::from_choice("session"), Answer::Allow(Scope::Session));
        assert_eq!(Answer::from_choice("Session"), Answer::Unanswered);
        assert_eq!(Answer::from_choice("all"), Answer::Unanswered);
    }

    #[test]
    fn the_book_is_bounded_and_taken_once() {
        let book = RefusalBook::default();
        for n in 0..MAX_CALLS + 5 {
            let refused = (0..MAX_REFUSALS_PER_CALL + 3)
                .map(|i| Refused::Spawn {
                    program: format!("p{i}"),
                })
                .collect();
            book.record(&format!("c{n}"), "p", refused);
        }
        assert!(book.take("c0").is_none(), "the oldest went");
        let (plugin, refused) = book.take("c260").unwrap_or_default();
        assert_eq!((plugin.as_str(), refused.len()), ("p", MAX_REFUSALS_PER_CALL));
        assert!(book.take("c260").is_none());
    }
}
