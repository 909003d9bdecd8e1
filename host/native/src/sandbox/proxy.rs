//! Hosts by name, not by port: the proxy a sandboxed command reaches the network through.
//!
//! A sandboxed command has a network namespace of its own, whose only interface is its loopback. Before it
//! runs, the child makes a listening socket on that loopback ([`PORT`]) and hands it to the host over a socket
//! pair (`process.rs`); the host serves it from its own namespace, so a connection made inside the sandbox
//! reaches this proxy, and only this proxy. It speaks HTTP: `CONNECT host:port` (HTTPS and any TCP a client
//! tunnels) and requests in absolute form (`GET http://host/…`). Each target is checked against the grant
//! ([`Hosts`]: deny wins, a name is compared as written, an address also after the name is resolved), recorded
//! for the audit log (the call's [`CallSink`]), and refused with a `403` that says which grant would allow it.
//! The command finds it through `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` (and their lower-case forms).
//!
//! A granted name reaches what it resolves to, but never this machine (a loopback or unspecified address) nor a
//! link-local one (a cloud's metadata service) unless it says so (`localhost`, or the address itself): whoever
//! owns a name chooses its answer, and a name that rebinds to 127.0.0.1 would reach the user's own services
//! through a grant of `crates.io:443`. That refusal is not asked about (granting the name would not change it).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use toolwright_core::policy::NetPattern;
use toolwright_core::tool::CallSink;

/// The proxy's port on the sandbox's loopback (nothing else listens there before the command runs).
pub const PORT: u16 = 3128;

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;

/// At most this many connections of one sandboxed process are served at once (each holds a thread or two).
const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send its request head, and a connection to a host may take to open.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The hosts a sandboxed command may reach through the proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    /// `HOST:PORT` patterns it may reach (`*` for any host or any port).
    pub allow: Vec<NetPattern>,
    /// Patterns it may never reach, whatever name it uses: they win.
    pub deny: Vec<NetPattern>,
}

impl Hosts {
    /// Whether `host` (a name as the client wrote it, or an address) on `port` is granted, before resolving.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let matches = |p: &NetPattern| (p.host == "*" || p.host == host) && p.port.is_none_or(|q| q == port);
        !self.deny.iter().any(matches) && self.allow.iter().any(matches)
    }

    /// Whether a resolved `address` is denied (a denied address is refused under any name).
    fn denies(&self, address: &SocketAddr) -> bool {
        let ip = address.ip().to_string();
        self.deny
            .iter()
            .any(|p| p.host == ip && p.port.is_none_or(|q| q == address.port()))
    }

    /// The patterns, for a sentence.
    pub fn describe(&self) -> String {
        if self.allow.is_empty() {
            return "no host".into();
        }
        self.allow
            .iter()
            .map(|p| match p.port {
                Some(port) => format!("{}:{port}", p.host),
                None => format!("{}:*", p.host),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The proxy of one sandboxed process: serves until dropped.
pub(crate) struct Proxy {
    listener: Arc<TcpListener>,
    refused: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Serve `listener` (made inside the sandbox's namespace) for `hosts`, recording into `sink`.
    pub(crate) fn serve(listener: TcpListener, hosts: Hosts, sink: CallSink) -> Proxy {
        let listener = Arc::new(listener);
        let refused: Arc<Mutex<Vec<String>>> = Arc::default();
        let (accepting, hosts, noted) = (listener.clone(), Arc::new(hosts), refused.clone());
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let _ = thread::Builder::new()
            .name("toolwright-proxy".into())
            .spawn(move || {
                for stream in accepting.incoming() {
                    let Ok(mut stream) = stream else {
                        // Shut down (the process ended), or out of descriptors: stop either way.
                        break;
                    };
                    if open.fetch_add(1, std::sync::atomic::Ordering::AcqRel) >= MAX_CONNECTIONS {
                        open.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                        let _ = respond(
                            &mut stream,
                            "503 Service Unavailable",
                            "Toolwright's sandbox proxy: too many connections at once (64)\n",
                        );
                        continue;
                    }
                    let (hosts, sink, noted, open) =
                        (hosts.clone(), sink.clone(), noted.clone(), open.clone());
                    let _ = thread::Builder::new()
                        .name("toolwright-proxy-conn".into())
                        .spawn(move || {
                            if let Some(target) = handle(stream, &hosts, &sink) {
                                let mut noted =
                                    noted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                                if !noted.contains(&target) && noted.len() < 16 {
                                    noted.push(target);
                                }
                            }
                            open.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                        });
                }
            });
        Proxy { listener, refused }
    }

    /// The targets refused so far (`host:port`), each once.
    pub(crate) fn refused(&self) -> Arc<Mutex<Vec<String>>> {
        self.refused.clone()
    }
}

impl Drop for Proxy {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // Wakes the accepting thread (its `accept` fails), which then drops the listener.
        // SAFETY: shutdown of a descriptor the listener owns and keeps open.
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
}

/// What the client asked for.
struct Request {
    /// `host:port` as written.
    target: String,
    host: String,
    port: u16,
    /// For a request in absolute form: the head to send on, in origin form; none for `CONNECT`.
    forward: Option<Vec<u8>>,
}

/// Serve one connection; the target when it was refused.
fn handle(client: TcpStream, hosts: &Hosts, sink: &CallSink) -> Option<String> {
    serve(client, hosts, sink, |host, port| {
        (host, port).to_socket_addrs().map(Iterator::collect)
    })
}

/// [`handle`] with names resolved by `resolve`.
fn serve(
    mut client: TcpStream,
    hosts: &Hosts,
    sink: &CallSink,
    resolve: impl Fn(&str, u16) -> io::Result<Vec<SocketAddr>>,
) -> Option<String> {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let read = read_head(&mut client)
        .map_err(|e| e.to_string())
        .and_then(|(head, rest)| Ok((parse(&head)?, rest)));
    let (request, rest) = match read {
        Ok(read) => read,
        Err(e) => {
            let _ = respond(
                &mut client,
                "400 Bad Request",
                &format!("Toolwright's sandbox proxy: {e}\n"),
            );
            return None;
        }
    };
    let refuse = |client: &mut TcpStream| {
        sink.connected_to(&request.target, false);
        let _ = respond(
            client,
            "403 Forbidden",
            &format!(
                "Toolwright's sandbox: {target} is not granted (granted: {granted}). `network = [\"{target}\"]` in \
                 toolwright.toml would allow it (the [builtins] section for the built-ins' commands, the plugin's \
                 own section for a plugin's programs).\n",
                target = request.target,
                granted = hosts.describe()
            ),
        );
        Some(request.target.clone())
    };
    if !hosts.allows(&request.host, request.port) {
        return refuse(&mut client);
    }
    let addresses: Vec<SocketAddr> = match resolve(&request.host, request.port) {
        Ok(found) => found,
        Err(e) => {
            let _ = respond(
                &mut client,
                "502 Bad Gateway",
                &format!(
                    "Toolwright's sandbox proxy: cannot resolve {}: {e}\n",
                    request.host
                ),
            );
            return None;
        }
    };
    if addresses.iter().any(|a| hosts.denies(a)) {
        return refuse(&mut client);
    }
    if let Some(local) = addresses.iter().find(|a| disguised_local(&request.host, a)) {
        sink.connected_to(&request.target, false);
        let _ = respond(
            &mut client,
            "403 Forbidden",
            &format!(
                "Toolwright's sandbox: {} resolves to {}, an address of this machine or a link-local one, which a \
                 name never reaches through the proxy (a grant of `{}` would reach it by its address).\n",
                request.target,
                local.ip(),
                NetPattern {
                    host: local.ip().to_string(),
                    port: Some(request.port),
                }
            ),
        );
        return None;
    }
    let Some(mut upstream) = addresses
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok())
    else {
        let _ = respond(
            &mut client,
            "502 Bad Gateway",
            &format!(
                "Toolwright's sandbox proxy: cannot connect to {}\n",
                request.target
            ),
        );
        return None;
    };
    sink.connected_to(&request.target, true);
    let _ = client.set_read_timeout(None);
    let sent = match &request.forward {
        None => client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
        Some(head) => upstream.write_all(head),
    };
    if sent.is_err() || upstream.write_all(&rest).is_err() {
        return None;
    }
    relay(client, upstream);
    None
}

/// Whether `host` (as the client wrote it) is a name that does not say it is local, resolved to `address` on this
/// machine or a link-local one ([`toolwright_core::policy::is_local_address`]).
fn disguised_local(host: &str, address: &SocketAddr) -> bool {
    !toolwright_core::policy::names_this_machine(host)
        && toolwright_core::policy::is_local_address(address.ip())
}

/// Read up to the end of the request head: (the head, what came after it).
fn read_head(client: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((buffer, rest));
        }
        if buffer.len() > MAX_HEAD {
            return Err(io::Error::other("the request head is longer than 16 KiB"));
        }
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::other(
                "the connection closed before the request head ended",
            ));
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// The request of `head`.
fn parse(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_owned())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut words = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (words.next(), words.next(), words.next()) else {
        return Err(format!("not an HTTP request: {first:?}"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target, None)?;
        return Ok(Request {
            target: target.to_owned(),
            host,
            port,
            forward: None,
        });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(format!(
            "{target:?}: only CONNECT and http:// requests in absolute form go through this proxy"
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let (host, port) = split_authority(authority, Some(80))?;
    let mut forward = format!("{method} {path} {version}\r\n").into_bytes();
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default();
        if name.eq_ignore_ascii_case("proxy-connection") || name.eq_ignore_ascii_case("proxy-authorization") {
            continue;
        }
        forward.extend_from_slice(line.as_bytes());
        forward.extend_from_slice(b"\r\n");
    }
    forward.extend_from_slice(b"\r\n");
    Ok(Request {
        target: format!("{host}:{port}"),
        host,
        port,
        forward: Some(forward),
    })
}

/// `host:port` (or `[v6]:port`), with `default` for a missing port.
fn split_authority(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let bad = || format!("{authority:?} is not HOST:PORT");
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| bad())?,
        None => default.ok_or_else(bad)?,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

/// A response with a text body, closing the connection.
fn respond(client: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: \
         close\r\n\r\n{body}",
        body.len()
    )
}

/// Copy both ways until each side has closed.
fn relay(client: TcpStream, upstream: TcpStream) {
    let (Ok(client_in), Ok(upstream_in)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let back = thread::Builder::new()
        .name("toolwright-proxy-relay".into())
        .spawn(move || pipe(upstream_in, client_in));
    pipe(client, upstream);
    if let Ok(back) = back {
        let _ = back.join();
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(allow: &[&str], deny: &[&str]) -> Hosts {
        let parse = |l: &[&str]| l.iter().map(|p| NetPattern::parse(p).unwrap()).collect();
        Hosts {
            allow: parse(allow),
            deny: parse(deny),
        }
    }

    #[test]
    fn hosts_are_matched_by_name_and_port_and_deny_wins() {
        let h = hosts(&["registry.npmjs.org:443", "127.0.0.1:*"], &["127.0.0.1:22"]);
        assert!(h.allows("registry.npmjs.org", 443));
        assert!(h.allows("Registry.NPMJS.org", 443));
        assert!(!h.allows("registry.npmjs.org", 80));
        assert!(!h.allows("evil.example", 443));
        assert!(h.allows("127.0.0.1", 8080));
        assert!(!h.allows("127.0.0.1", 22));
        assert!(h.denies(&"127.0.0.1:22".parse().unwrap()));
    }

    #[test]
    fn a_granted_name_never_reaches_this_machine_unless_it_says_so() {
        let address = |a: &str| a.parse::<SocketAddr>().unwrap();
        for (host, at) in [
            ("rebind.example", "127.0.0.1:80"),
            ("rebind.example", "127.0.1.1:80"),
            ("rebind.example", "0.0.0.0:80"),
            ("rebind.example", "[::1]:80"),
            ("rebind.example", "[::ffff:127.0.0.1]:80"),
            ("metadata.example", "169.254.169.254:80"),
            ("v6.example", "[fe80::1]:80"),
        ] {
            assert!(disguised_local(host, &address(at)), "{host} → {at}");
        }
        for (host, at) in [
            ("localhost", "127.0.0.1:80"),
            ("LocalHost.", "127.0.0.1:80"),
            ("db.localhost", "127.0.0.1:80"),
            ("127.0.0.1", "127.0.0.1:80"),
            ("[::1]", "[::1]:80"),
            ("169.254.169.254", "169.254.169.254:80"),
            ("git.corp.example", "10.1.2.3:443"),
            ("crates.io", "151.101.0.1:443"),
        ] {
            assert!(!disguised_local(host, &address(at)), "{host} → {at}");
        }
    }

    #[test]
    fn a_name_resolving_to_this_machine_is_refused_and_not_asked_about() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        write!(
            client,
            "CONNECT rebind.example:{port} HTTP/1.1\r\nHost: rebind.example\r\n\r\n"
        )
        .unwrap();
        let granted = hosts(&["rebind.example:*"], &[]);
        let resolved = move |_: &str, port: u16| Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))]);
        let refused = serve(server, &granted, &CallSink::discard(), resolved);
        assert_eq!(
            refused, None,
            "granting the name would not change it: nothing to ask"
        );
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
        assert!(
            answer.contains(&format!(
                "rebind.example:{port} resolves to 127.0.0.1, an address of this machine or a link-local one, which \
                 a name never reaches through the proxy (a grant of `127.0.0.1:{port}` would reach it by its address)."
            )),
            "{answer}"
        );
    }

    #[test]
    fn requests_are_read_in_both_forms() {
        let r = parse(b"CONNECT crates.io:443 HTTP/1.1\r\nHost: crates.io:443\r\n\r\n").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.forward.is_none()),
            ("crates.io", 443, true)
        );
        let r = parse(b"GET http://example.org/a?b HTTP/1.1\r\nHost: example.org\r\nProxy-Connection: keep-alive\r\n\r\n")
            .unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.target.as_str()),
            ("example.org", 80, "example.org:80")
        );
        assert_eq!(
            String::from_utf8(r.forward.unwrap()).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: example.org\r\n\r\n"
        );
        let r = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("::1", 8443));
        assert!(parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"CONNECT nohost HTTP/1.1\r\n\r\n").is_err());
    }
}
