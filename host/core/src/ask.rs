//! Grants asked for while a call runs: what the host refused a plugin's call, or the programs of a built-in
//! tool ([`Subject`]), ([`Refused`], collected in a [`RefusalBook`] by call id), the grant that would allow exactly
//! that ([`Grant`]), the question put to the user ([`Question`]) and the answers ([`Answer`]).
//!
//! The built-ins are asked about only what their sandbox's proxy refused their programs (a host), for the
//! session or always (`[builtins] network`), never once: their call is not run again, since a command's other
//! effects would happen twice; the model is told the host is allowed and runs the command again if it wants.
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
            // Exactly that address; the asker may name it by a host name the plugin requested instead. A name
            // only in plain ASCII (what a program asks the proxy for is its own choice: a look-alike in another
            // script must not be put to the user as the name it imitates).
            Refused::Connect { address } => crate::policy::NetPattern::parse(address)
                .filter(|p| p.port.is_some() && plain_host(&p.host))
                .map(|p| Grant::Network(p.to_string())),
        }
    }

    /// What was tried, for the question: `read /a/b`.
    fn tried(&self) -> String {
        match self {
            Refused::Read { path, .. } => format!("read `{}`", escape(path)),
            Refused::Write { path } => format!("write `{}`", escape(path)),
            Refused::Spawn { program } => format!("start the program `{}`", escape(program)),
            Refused::Connect { address } => {
                let mut tried = format!("connect to `{}`", escape(address));
                if let Some(place) = crate::policy::NetPattern::parse(address)
                    .or_else(|| crate::policy::NetPattern::parse(&format!("{address}:*")))
                    .and_then(|p| nearby(&p.host))
                {
                    tried.push_str(&format!(" ({place})"));
                }
                tried
            }
        }
    }
}

/// Where `host` is when it is not out on the internet, in words: this machine (a loopback or unspecified address,
/// `localhost`), or the local network (a private or link-local address). A question says so: allowing it lets a
/// command reach services the user may not think of as "a host".
fn nearby(host: &str) -> Option<&'static str> {
    use std::net::IpAddr;
    let host = host.trim_end_matches('.');
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("a service on this machine");
    }
    let ip: IpAddr = host.parse().ok()?;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let here = ip.is_loopback() || ip.is_unspecified();
    let local = crate::policy::is_local_address(ip)
        || match ip {
            // 100.64.0.0/10: carrier-grade NAT, a VPN's (Tailscale's) machines.
            IpAddr::V4(v4) => v4.is_private() || (v4.octets()[0] == 100 && v4.octets()[1] & 0xc0 == 64),
            IpAddr::V6(v6) => v6.is_unique_local(),
        };
    if here {
        Some("a service on this machine")
    } else if local {
        Some("a machine on the local network")
    } else {
        None
    }
}

/// Whether `host` is an IP address as written out in full, or a DNS name of ASCII letters, digits and `-` (a
/// label each) whose last label is not a number: `127.1`, `2130706433` and `0x7f.1` are addresses a resolver
/// takes for 127.0.0.1, and would be put to the user disguised.
fn plain_host(host: &str) -> bool {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let last = host.rsplit('.').next().unwrap_or_default();
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last.get(..2).is_some_and(|p| p.eq_ignore_ascii_case("0x"));
    host.len() <= 253
        && !numeric
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
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
    /// By call id: whose call, none when two subjects recorded under the one id (nothing is asked then).
    calls: HashMap<String, (Option<Subject>, Vec<Refused>)>,
    order: VecDeque<String>,
}

impl std::fmt::Debug for RefusalBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefusalBook")
    }
}

impl RefusalBook {
    /// Record what the call `call_id` of `subject` was refused.
    pub fn record(&self, call_id: &str, subject: Subject, refused: Vec<Refused>) {
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
        let (whose, kept) = book
            .calls
            .entry(call_id.to_owned())
            .or_insert_with(|| (Some(subject.clone()), Vec::new()));
        // Two calls under one id (an id the caller chose, and a nested call's): neither is asked about, so that
        // one's refusal is never put to the user as the other's.
        if whose.as_ref() != Some(&subject) {
            *whose = None;
            kept.clear();
            return;
        }
        for r in refused {
            if kept.len() < MAX_REFUSALS_PER_CALL && !kept.contains(&r) {
                kept.push(r);
            }
        }
    }

    /// Take what the call `call_id` was refused: whose call it was and the refusals (none when nothing was, or
    /// when calls of two subjects were recorded under the id).
    pub fn take(&self, call_id: &str) -> Option<(Subject, Vec<Refused>)> {
        let mut book = self.0.lock().unwrap_or_else(|p| p.into_inner());
        book.order.retain(|id| id != call_id);
        let (whose, refused) = book.calls.remove(call_id)?;
        Some((whose?, refused))
    }
}

/// The built-ins that start programs, and so are asked about the hosts their programs were refused.
pub const SHELLS: [&str; 2] = ["bash", "powershell"];

/// Whose call was refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// The plugin of that name.
    Plugin(String),
    /// The programs of the built-in tools (`bash`'s commands), under the `[builtins]` section.
    Builtins,
}

impl Subject {
    /// The plugin's name; none for the built-ins.
    pub fn plugin(&self) -> Option<&str> {
        match self {
            Subject::Plugin(name) => Some(name),
            Subject::Builtins => None,
        }
    }

    /// Whether `tool` is this subject's own: a tool of the plugin, or a built-in shell (native or wasm:
    /// [`SHELLS`]). Only a call of its own tool is asked about: what a tool it called was refused is that call's
    /// business.
    pub fn owns(&self, tool: &crate::definition::ToolDefinition) -> bool {
        let builtin = tool.source == crate::definition::ToolSource::Builtin;
        match self {
            Subject::Plugin(plugin) => {
                !builtin && tool.origin.as_ref().and_then(|o| o.plugin.as_deref()) == Some(plugin.as_str())
            }
            Subject::Builtins => builtin && SHELLS.contains(&tool.name.as_str()),
        }
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

/// The choices offered about a plugin, as the answer's value: (value, title); about the built-ins all but the
/// first ([`Question::choices`]).
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

/// A question about one refusal of one plugin, or of the built-ins' programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Whose call was refused.
    pub subject: Subject,
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
        let mut text = match &self.subject {
            Subject::Plugin(plugin) => {
                format!("plugin `{}` wants to {}", escape(plugin), self.refused.tried())
            }
            Subject::Builtins => format!(
                "a command of the built-in tools wants to {}",
                self.refused.tried()
            ),
        };
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
        if self.subject == Subject::Builtins {
            text.push_str(&format!(
                ". Allowing lets the built-ins' commands connect to `{}` through the sandbox's proxy (the command is \
                 not run again).",
                escape(value)
            ));
        } else {
            text.push_str(&format!(". Allowing grants {granted}."));
        }
        text
    }

    /// The choices offered: all of [`CHOICES`] about a plugin; about the built-ins, no "once" (their call is not
    /// run again, so a grant for it alone would allow nothing).
    pub fn choices(&self) -> &'static [(&'static str, &'static str)] {
        match self.subject {
            Subject::Plugin(_) => &CHOICES,
            Subject::Builtins => &CHOICES[1..],
        }
    }

    /// The answer a choice's value means, if this question offered it; anything else is [`Answer::Unanswered`].
    pub fn answer(&self, value: &str) -> Answer {
        if self.choices().iter().any(|(offered, _)| *offered == value) {
            Answer::from_choice(value)
        } else {
            Answer::Unanswered
        }
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
        assert_eq!(
            connect("PyPI.org:443"),
            Some(Grant::Network("pypi.org:443".into()))
        );
        // What a program asks a proxy for is its own choice: only plain names are asked about.
        assert_eq!(connect("руру.org:443"), None, "a look-alike in another script");
        assert_eq!(connect("*.example.com:443"), None);
        assert_eq!(connect("a\"b.com:443"), None);
        assert_eq!(connect("a..com:443"), None);
        for disguised in [
            "127.1:80",
            "2130706433:80",
            "0x7f.1:80",
            "0x7f000001:80",
            "10.0.0:80",
        ] {
            assert_eq!(connect(disguised), None, "{disguised}");
        }
        assert_eq!(
            connect("x0.example:80"),
            Some(Grant::Network("x0.example:80".into()))
        );
    }

    #[test]
    fn a_hostile_path_or_reason_cannot_shape_the_question() {
        let question = Question {
            subject: Subject::Plugin("csv\u{1b}[2K".into()),
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
    fn a_question_about_a_nearby_host_says_where_it_is() {
        let tried = |address: &str| {
            Refused::Connect {
                address: address.into(),
            }
            .tried()
        };
        let here = "(a service on this machine)";
        for address in [
            "localhost:8080",
            "127.0.0.1:22",
            "[::1]:5432",
            "0.0.0.0:80",
            "localhost",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(tried(address).ends_with(here), "{address}: {}", tried(address));
        }
        for address in [
            "192.168.1.1:80",
            "10.1.2.3:443",
            "169.254.169.254:80",
            "[fd00::1]:80",
            "100.100.1.2:80",
            "[fe80::1]:80",
        ] {
            assert!(
                tried(address).ends_with("(a machine on the local network)"),
                "{address}"
            );
        }
        assert_eq!(tried("pypi.org:443"), "connect to `pypi.org:443`");
        assert_eq!(tried("1.1.1.1:53"), "connect to `1.1.1.1:53`");
        assert_eq!(
            tried("100.128.0.1:53"),
            "connect to `100.128.0.1:53`",
            "outside 100.64.0.0/10"
        );
    }

    #[test]
    fn only_the_offered_choices_are_answers() {
        assert_eq!(Answer::from_choice("session"), Answer::Allow(Scope::Session));
        assert_eq!(Answer::from_choice("Session"), Answer::Unanswered);
        assert_eq!(Answer::from_choice("all"), Answer::Unanswered);
        let builtins = Question {
            subject: Subject::Builtins,
            refused: Refused::Connect {
                address: "example.com:443".into(),
            },
            grant: Grant::Network("example.com:443".into()),
            reason: None,
        };
        assert_eq!(builtins.answer("once"), Answer::Unanswered, "never offered");
        assert_eq!(builtins.answer("always"), Answer::Allow(Scope::Always));
        assert_eq!(
            builtins.text(),
            "a command of the built-in tools wants to connect to `example.com:443`. Allowing lets the built-ins' \
             commands connect to `example.com:443` through the sandbox's proxy (the command is not run again)."
        );
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
            book.record(&format!("c{n}"), Subject::Plugin("p".into()), refused);
        }
        assert!(book.take("c0").is_none(), "the oldest went");
        let (subject, refused) = book.take("c260").expect("kept");
        assert_eq!(
            (subject.plugin(), refused.len()),
            (Some("p"), MAX_REFUSALS_PER_CALL)
        );
        assert!(book.take("c260").is_none());
        // Two subjects under one id: nothing to ask about, whatever comes after.
        let spawn = || {
            vec![Refused::Spawn {
                program: "git".into(),
            }]
        };
        book.record("shared", Subject::Builtins, spawn());
        book.record("shared", Subject::Plugin("p".into()), spawn());
        book.record("shared", Subject::Builtins, spawn());
        assert!(book.take("shared").is_none());
    }
}
