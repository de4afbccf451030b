//! A JSON value scanner over a buffered stream: it finds where one value ends (strings,
//! escapes and nesting tracked byte by byte, a whole buffer at a time) and hands its bytes
//! over, or skips it without keeping it. The trace reader uses it to cut `traceEvents` into
//! single events, each then parsed from a slice (serde_json is several times faster on a
//! slice than on a byte stream), so memory holds one event, never the document.

use std::io::{BufRead, ErrorKind};

/// Why scanning stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScanError {
    /// The input ended inside a value (at this byte offset).
    Eof(u64),
    /// The stream itself failed (a corrupt or truncated gzip member).
    Io(u64, String),
    /// Something that is not JSON here (offset, what was found, what was expected).
    Unexpected(u64, String),
    /// One value larger than the limit (offset where it began).
    TooLarge(u64, u64),
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            ScanError::Eof(at) => write!(f, "the file ends early, at byte {at} (truncated?)"),
            ScanError::Io(at, e) => write!(f, "reading failed at byte {at}: {e} (a truncated or corrupt file?)"),
            ScanError::Unexpected(at, what) => write!(f, "not valid JSON at byte {at}: {what}"),
            ScanError::TooLarge(at, limit) => {
                write!(
                    f,
                    "the value at byte {at} is larger than {}: refused",
                    crate::model::size::show(*limit)
                )
            }
        }
    }
}

pub(crate) struct Scanner<R> {
    input: R,
    /// Bytes consumed so far.
    pub(crate) offset: u64,
}

/// Where a value's scan stands between buffers.
#[derive(Default)]
struct Depth {
    nesting: u64,
    in_string: bool,
    escaped: bool,
    started: bool,
    scalar: bool,
}

impl<R: BufRead> Scanner<R> {
    pub(crate) fn new(input: R) -> Self {
        Scanner { input, offset: 0 }
    }

    fn buffer(&mut self) -> Result<&[u8], ScanError> {
        loop {
            match self.input.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(ScanError::Io(self.offset, e.to_string())),
            }
        }
        // Filled above: this returns what is buffered without reading again.
        self.input
            .fill_buf()
            .map_err(|e| ScanError::Io(self.offset, e.to_string()))
    }

    fn consume(&mut self, n: usize) {
        self.input.consume(n);
        self.offset += n as u64;
    }

    /// The next byte that is not whitespace, not consumed; `None` at the end.
    pub(crate) fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            let buf = self.buffer()?;
            if buf.is_empty() {
                return Ok(None);
            }
            match buf.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => {
                    let b = buf[i];
                    self.consume(i);
                    return Ok(Some(b));
                }
                None => {
                    let n = buf.len();
                    self.consume(n);
                }
            }
        }
    }

    /// Consume `want` (after whitespace), or say what stands there instead.
    pub(crate) fn eat(&mut self, want: u8, what: &str) -> Result<(), ScanError> {
        match self.peek()? {
            Some(b) if b == want => {
                self.consume(1);
                Ok(())
            }
            Some(b) => Err(ScanError::Unexpected(
                self.offset,
                format!("{:?} where {what} belongs", b as char),
            )),
            None => Err(ScanError::Eof(self.offset)),
        }
    }

    /// Consume one of `options` and say which.
    pub(crate) fn one_of(&mut self, options: &[u8], what: &str) -> Result<u8, ScanError> {
        match self.peek()? {
            Some(b) if options.contains(&b) => {
                self.consume(1);
                Ok(b)
            }
            Some(b) => Err(ScanError::Unexpected(
                self.offset,
                format!("{:?} where {what} belongs", b as char),
            )),
            None => Err(ScanError::Eof(self.offset)),
        }
    }

    /// One whole JSON value (after whitespace): its bytes appended to `out` when given (at most
    /// `limit` of them), else skipped. Its validity is the parser's to judge; this finds its end.
    pub(crate) fn value(&mut self, mut out: Option<&mut Vec<u8>>, limit: u64) -> Result<(), ScanError> {
        match self.peek()? {
            None => return Err(ScanError::Eof(self.offset)),
            Some(b @ (b'}' | b']' | b',' | b':')) => {
                return Err(ScanError::Unexpected(
                    self.offset,
                    format!("{:?} where a value belongs", b as char),
                ))
            }
            Some(_) => {}
        }
        let start = self.offset;
        let mut d = Depth::default();
        loop {
            let buf = self.buffer()?;
            if buf.is_empty() {
                // A number or literal may end the input; anything else is cut short.
                return if d.scalar && d.nesting == 0 {
                    Ok(())
                } else {
                    Err(ScanError::Eof(self.offset))
                };
            }
            let (used, done) = step(&mut d, buf);
            if let Some(out) = out.as_deref_mut() {
                if (out.len() + used) as u64 > limit {
                    return Err(ScanError::TooLarge(start, limit));
                }
                out.extend_from_slice(&buf[..used]);
            }
            self.consume(used);
            if done {
                return Ok(());
            }
        }
    }
}

/// Scan `buf` from where `d` stands: how many bytes belong to the value, and whether it ended.
fn step(d: &mut Depth, buf: &[u8]) -> (usize, bool) {
    for (i, &b) in buf.iter().enumerate() {
        if d.in_string {
            if d.escaped {
                d.escaped = false;
            } else if b == b'\\' {
                d.escaped = true;
            } else if b == b'"' {
                d.in_string = false;
                if d.nesting == 0 {
                    return (i + 1, true);
                }
            }
            continue;
        }
        if !d.started {
            d.started = true;
            match b {
                b'{' | b'[' => d.nesting = 1,
                b'"' => d.in_string = true,
                _ => d.scalar = true,
            }
            continue;
        }
        if d.scalar {
            if matches!(b, b',' | b']' | b'}') || b.is_ascii_whitespace() {
                return (i, true);
            }
            continue;
        }
        match b {
            b'"' => d.in_string = true,
            b'{' | b'[' => d.nesting += 1,
            b'}' | b']' => {
                d.nesting -= 1;
                if d.nesting == 0 {
                    return (i + 1, true);
                }
            }
            _ => {}
        }
    }
    (buf.len(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str, chunk: usize) -> Vec<String> {
        let r = std::io::BufReader::with_capacity(chunk, text.as_bytes());
        let mut s = Scanner::new(r);
        let mut out = Vec::new();
        s.eat(b'[', "an array").unwrap();
        loop {
            let mut v = Vec::new();
            s.value(Some(&mut v), 1 << 20).unwrap();
            out.push(String::from_utf8(v).unwrap());
            if s.one_of(b",]", "a comma").unwrap() == b']' {
                return out;
            }
        }
    }

    #[test]
    fn values_end_where_json_says_whatever_the_buffer_size() {
        let text = r#"[ {"a":"}\"]{","b":[1,{"c":2}]} , "x\\" , 12.5e3,true,[[]] ]"#;
        for chunk in [1, 2, 3, 7, 64] {
            assert_eq!(
                values(text, chunk),
                [r#"{"a":"}\"]{","b":[1,{"c":2}]}"#, r#""x\\""#, "12.5e3", "true", "[[]]"],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn cut_and_oversized_values_are_named() {
        let mut s = Scanner::new(std::io::BufReader::new(&b"{\"a\": [1, 2"[..]));
        assert_eq!(s.value(None, 10), Err(ScanError::Eof(11)));
        let mut s = Scanner::new(std::io::BufReader::new(&b"  {\"a\": 12345678901}"[..]));
        let mut v = Vec::new();
        assert_eq!(s.value(Some(&mut v), 8), Err(ScanError::TooLarge(2, 8)));
    }
}
