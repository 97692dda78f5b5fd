//! A raw RESP2 connection: every byte the server sends is parsed here, so an
//! extra or a missing reply is seen, not papered over by a client library.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Frame>>),
}

impl Frame {
    pub fn is_null(&self) -> bool {
        matches!(self, Frame::Bulk(None) | Frame::Array(None))
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Frame::Error(e) => Some(e),
            _ => None,
        }
    }

    pub fn text(&self) -> Option<String> {
        match self {
            Frame::Simple(s) => Some(s.clone()),
            Frame::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// Encodes one command as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Parses one frame from the front of `buf`: the frame and the bytes it used, or
/// `Ok(None)` if more bytes are needed.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &buf[1..end];
    let text = || String::from_utf8_lossy(line).into_owned();
    let number = || -> Result<i64, String> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad number line {:?}", text()))
    };
    let after = end + 2;
    match buf.first() {
        Some(b'+') => Ok(Some((Frame::Simple(text()), after))),
        Some(b'-') => Ok(Some((Frame::Error(text()), after))),
        Some(b':') => Ok(Some((Frame::Int(number()?), after))),
        Some(b'$') => {
            let n = number()?;
            if n < 0 {
                return Ok(Some((Frame::Bulk(None), after)));
            }
            let n = n as usize;
            if buf.len() < after + n + 2 {
                return Ok(None);
            }
            if &buf[after + n..after + n + 2] != b"\r\n" {
                return Err("bulk string not followed by CRLF".into());
            }
            Ok(Some((
                Frame::Bulk(Some(buf[after..after + n].to_vec())),
                after + n + 2,
            )))
        }
        // RESP3 (after `HELLO 3`), shown in RESP2's shapes: null as a null bulk, a
        // boolean as 1/0, a double or big number as a simple string, a verbatim string as
        // a bulk, a set or push as an array, a map as an array of its keys and values.
        Some(b'_') => Ok(Some((Frame::Bulk(None), after))),
        Some(b'#') => Ok(Some((Frame::Int((line == b"t") as i64), after))),
        Some(b',') | Some(b'(') => Ok(Some((Frame::Simple(text()), after))),
        Some(b'!') | Some(b'=') => {
            let mut as_bulk = buf.to_vec();
            as_bulk[0] = b'$';
            let parsed = parse(&as_bulk)?;
            Ok(parsed.map(|(frame, used)| match frame {
                Frame::Bulk(b) if buf[0] == b'!' => (
                    Frame::Error(String::from_utf8_lossy(&b.unwrap_or_default()).into_owned()),
                    used,
                ),
                other => (other, used),
            }))
        }
        Some(b'*') | Some(b'~') | Some(b'>') | Some(b'%') => {
            let n = number()?;
            if n < 0 {
                return Ok(Some((Frame::Array(None), after)));
            }
            let n = if buf[0] == b'%' { n * 2 } else { n };
            let mut used = after;
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                match parse(&buf[used..])? {
                    Some((item, len)) => {
                        items.push(item);
                        used += len;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Frame::Array(Some(items)), used)))
        }
        other => Err(format!("unexpected first byte {other:?}")),
    }
}

static MARKERS: AtomicU64 = AtomicU64::new(1);

/// The zero of the times in timelines and reports.
static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// Owned arguments as the slices `Conn::call` takes.
pub fn refs(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

/// `at` as seconds since the run began, for reports.
pub fn since_epoch(at: Instant) -> String {
    format!("{:.3}s", at.saturating_duration_since(*EPOCH).as_secs_f64())
}

/// Every command and reply of the connections that write to it, in the order they happened:
/// (when, `CLIENT ID`, port, what). Read back whole for a finding's history.
pub type Journal = std::sync::Arc<std::sync::Mutex<Vec<(Instant, i64, u16, String)>>>;

pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The last commands sent, for the report of a reply out of step.
    recent: std::collections::VecDeque<String>,
    /// While `Some`, each command sent and reply read, with its time since `EPOCH`.
    timeline: Option<Vec<String>>,
    /// While `Some`, each command sent and reply read goes there too, with the connection.
    journal: Option<Journal>,
    /// `CLIENT ID` of this connection.
    pub id: i64,
    /// The server's port.
    pub port: u16,
}

/// What went wrong on a connection.
#[derive(Debug)]
pub enum ConnError {
    /// Closed, reset or refused: a fault may explain it.
    Io(io::Error),
    /// No reply within the read timeout while the connection stayed open.
    NoReply,
    /// Bytes that are not RESP, or a reply where none was due.
    Protocol(String),
    /// The server is no longer the primary, or is loading: connect again.
    Moved,
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Io(e) => write!(f, "connection lost: {e}"),
            ConnError::NoReply => write!(f, "no reply within the read timeout"),
            ConnError::Protocol(e) => write!(f, "protocol: {e}"),
            ConnError::Moved => write!(f, "not the primary (READONLY or LOADING)"),
        }
    }
}

impl Conn {
    pub fn connect(port: u16, read_timeout: Duration) -> Result<Conn, ConnError> {
        let stream = TcpStream::connect(("127.0.0.1", port)).map_err(ConnError::Io)?;
        stream.set_nodelay(true).map_err(ConnError::Io)?;
        stream
            .set_read_timeout(Some(read_timeout))
            .map_err(ConnError::Io)?;
        let mut conn = Conn {
            stream,
            buf: Vec::new(),
            recent: std::collections::VecDeque::new(),
            timeline: None,
            journal: None,
            id: 0,
            port,
        };
        match conn.call(&[b"CLIENT", b"ID"])? {
            Frame::Int(id) => conn.id = id,
            other => return Err(ConnError::Protocol(format!("CLIENT ID replied {other:?}"))),
        }
        Ok(conn)
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        let _ = self.stream.set_read_timeout(Some(timeout));
    }

    pub fn send(&mut self, args: &[&[u8]]) -> Result<(), ConnError> {
        let shown: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if self.recent.len() == 6 {
            self.recent.pop_front();
        }
        let shown = shown.join(" ");
        self.note(|| format!("-> {shown}"));
        self.recent.push_back(shown);
        self.stream.write_all(&encode(args)).map_err(ConnError::Io)
    }

    /// Sends already encoded commands in one write.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        self.note(|| {
            format!(
                "-> packet {}",
                String::from_utf8_lossy(bytes).replace("\r\n", " ")
            )
        });
        self.stream.write_all(bytes).map_err(ConnError::Io)
    }

    pub fn read(&mut self) -> Result<Frame, ConnError> {
        loop {
            match parse(&self.buf).map_err(ConnError::Protocol)? {
                Some((frame, used)) => {
                    self.buf.drain(..used);
                    self.note(|| format!("<- {frame:?}"));
                    return Ok(frame);
                }
                None => {
                    let mut chunk = [0u8; 16384];
                    match self.stream.read(&mut chunk) {
                        Ok(0) => {
                            return Err(ConnError::Io(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "closed by the server",
                            )))
                        }
                        Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                            ) =>
                        {
                            return Err(ConnError::NoReply)
                        }
                        Err(e) => return Err(ConnError::Io(e)),
                    }
                }
            }
        }
    }

    /// Starts keeping a timeline of this connection's commands and replies.
    pub fn start_timeline(&mut self) {
        self.timeline = Some(Vec::new());
    }

    /// The timeline kept since `start_timeline`, which stops.
    pub fn take_timeline(&mut self) -> Vec<String> {
        self.timeline.take().unwrap_or_default()
    }

    /// Writes every later command and reply of this connection to `journal` too.
    pub fn set_journal(&mut self, journal: &Journal) {
        self.journal = Some(journal.clone());
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.timeline.is_none() && self.journal.is_none() {
            return;
        }
        let (at, what) = (Instant::now(), what());
        if let Some(journal) = &self.journal {
            journal
                .lock()
                .unwrap()
                .push((at, self.id, self.port, what.clone()));
        }
        if let Some(timeline) = &mut self.timeline {
            timeline.push(format!("{} {what}", since_epoch(at)));
        }
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Result<Frame, ConnError> {
        self.send(args)?;
        self.read()
    }

    /// Exactly one reply per command so far: the next reply is the one to an `ECHO`
    /// of a fresh marker, and no byte is left over.
    pub fn check_in_step(&mut self) -> Result<(), ConnError> {
        let marker = format!("marker-{}", MARKERS.fetch_add(1, Ordering::Relaxed));
        let got = self.call(&[b"ECHO", marker.as_bytes()])?;
        if got.text().as_deref() != Some(marker.as_str()) || !self.buf.is_empty() {
            return Err(ConnError::Protocol(format!(
                "replies out of step: ECHO {marker} answered {got:?}, {} bytes left over; \
                 sent last: {:?}",
                self.buf.len(),
                self.recent
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame in `all`, which holds whole frames only.
    fn parse_all(all: &[u8]) -> Vec<Frame> {
        let mut at = 0;
        let mut frames = Vec::new();
        while let Some((f, used)) = parse(&all[at..]).unwrap() {
            frames.push(f);
            at += used;
        }
        assert_eq!(at, all.len());
        frames
    }

    #[test]
    fn frames_parse_whole_or_not_at_all() {
        let all = b"+OK\r\n-ERR x\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:1\r\n$0\r\n\r\n";
        let frames = parse_all(all);
        assert_eq!(frames[0], Frame::Simple("OK".into()));
        assert_eq!(frames[1], Frame::Error("ERR x".into()));
        assert_eq!(frames[2], Frame::Int(42));
        assert_eq!(frames[3], Frame::Bulk(Some(b"abc".to_vec())));
        assert!(frames[4].is_null());
        assert_eq!(
            frames[5],
            Frame::Array(Some(vec![Frame::Int(1), Frame::Bulk(Some(Vec::new()))]))
        );
        for cut in 1..all.len() {
            // A cut never yields a wrong frame: only fewer frames.
            let mut at = 0;
            while let Some((_, used)) = parse(&all[at..cut]).unwrap() {
                at += used;
            }
            assert!(at <= cut);
        }
        assert!(parse(b"?x\r\n").is_err());
    }

    #[test]
    fn resp3_frames_read_in_resp2_shapes() {
        let all =
            b"_\r\n#t\r\n,1.5\r\n=7\r\ntxt:abc\r\n%1\r\n+k\r\n:2\r\n~1\r\n:3\r\n!3\r\nERR\r\n";
        let frames = parse_all(all);
        assert!(frames[0].is_null());
        assert_eq!(frames[1], Frame::Int(1));
        assert_eq!(frames[2], Frame::Simple("1.5".into()));
        assert_eq!(frames[3], Frame::Bulk(Some(b"txt:abc".to_vec())));
        assert_eq!(
            frames[4],
            Frame::Array(Some(vec![Frame::Simple("k".into()), Frame::Int(2)]))
        );
        assert_eq!(frames[5], Frame::Array(Some(vec![Frame::Int(3)])));
        assert_eq!(frames[6], Frame::Error("ERR".into()));
    }

    #[test]
    fn commands_encode_binary_safe() {
        assert_eq!(
            encode(&[b"GET", b"a\r\nb"]),
            b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n"
        );
    }
}
