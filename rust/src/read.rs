//! A log file in blocks of whole lines: plain or gzip (members one after another, NUL
//! padding after the last), with the limits of `specscope/logs/limits.py`. A line longer
//! than the line limit comes as a bare `\n` and is noted by where that `\n` is in the
//! output and how long it was; no more than the limit of a line is ever held. A gzip stream
//! that inflates past what it is allowed is an error before the block that crosses it.
//! A gzip stream's content is hashed (SHA-256) as it is inflated, so that what identifies
//! it (`Source.content_sha256`) needs no second inflate.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

use flate2::bufread::GzDecoder;
use memchr::{memchr, memchr_iter, memrchr};
use sha2::{Digest, Sha256};

const CHUNK: usize = 1 << 20;

#[derive(Debug)]
pub enum ReadError {
    Bomb(u64),          // inflated bytes when refused
    Unreadable(String), // not gzip, or gzip with no content
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

enum Input {
    Plain(File),
    Gzip {
        decoder: Option<Box<GzDecoder<BufReader<File>>>>,
        produced: u64,
        allowed: u64,
    },
    Done,
}

/// Cuts lines over the limit out of a stream (see the module's comment).
#[derive(Debug, Default)]
pub struct LineCap {
    pub limit: usize,
    line_start: Option<usize>, // where the current line starts in `out`; None: dropping
    held: usize,               // its length so far
    pub written: u64,          // bytes put out before `out`
    pub long: Vec<(u64, u64)>,
}

impl LineCap {
    pub fn new(limit: usize) -> Self {
        LineCap {
            limit,
            line_start: Some(0),
            ..LineCap::default()
        }
    }

    /// Append `chunk` to `out`, lines over the limit emptied.
    pub fn push(&mut self, out: &mut Vec<u8>, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            match memchr(b'\n', chunk) {
                Some(i) => {
                    let total = self.held + i;
                    match self.line_start {
                        Some(_) if total <= self.limit => out.extend_from_slice(&chunk[..=i]),
                        start => {
                            if let Some(s) = start {
                                out.truncate(s);
                            }
                            self.long
                                .push((self.written + out.len() as u64, total as u64));
                            out.push(b'\n');
                        }
                    }
                    self.held = 0;
                    self.line_start = Some(out.len());
                    chunk = &chunk[i + 1..];
                }
                None => {
                    self.held += chunk.len();
                    match self.line_start {
                        Some(s) if self.held > self.limit => {
                            out.truncate(s);
                            self.line_start = None;
                        }
                        Some(_) => out.extend_from_slice(chunk),
                        None => {}
                    }
                    return;
                }
            }
        }
    }

    /// The end of the stream: a last line over the limit is noted (nothing is put out).
    pub fn finish(&mut self, out: &[u8]) {
        if self.line_start.is_none() {
            self.long
                .push((self.written + out.len() as u64, self.held as u64));
        }
        self.held = 0;
        self.line_start = Some(out.len());
    }

    /// `n` bytes of `out` went out: offsets move on.
    pub fn shift(&mut self, n: usize) {
        self.written += n as u64;
        if let Some(s) = self.line_start.as_mut() {
            *s -= n;
        }
    }
}

pub struct BlockReader {
    input: Input,
    block_bytes: usize,
    block_lines: usize, // a block of blank lines would cost Python 8 bytes a line
    pending_lines: usize,
    pending: Vec<u8>,
    cap: LineCap,
    chunk: Vec<u8>,
    pub long: Vec<(u64, u64)>,
    pub notes: Vec<String>,
    hasher: Option<Sha256>, // a gzip stream's content, as inflated (before the line cap)
    content: Option<([u8; 32], u64)>,
}

impl BlockReader {
    pub fn open(
        path: &str,
        block_bytes: usize,
        block_lines: usize,
        line_limit: usize,
        gzip_allowed: u64,
    ) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let mut magic = [0u8; 2];
        let n = read_full(&mut file, &mut magic)?;
        let file = File::open(path)?;
        let gzip = n == 2 && magic == [0x1f, 0x8b];
        let input = if gzip {
            Input::Gzip {
                decoder: Some(Box::new(GzDecoder::new(BufReader::with_capacity(
                    CHUNK, file,
                )))),
                produced: 0,
                allowed: gzip_allowed,
            }
        } else {
            Input::Plain(file)
        };
        Ok(BlockReader {
            input,
            block_bytes: block_bytes.max(1),
            block_lines: block_lines.max(1),
            pending_lines: 0,
            pending: Vec::with_capacity(block_bytes + CHUNK),
            cap: LineCap::new(line_limit),
            // Blocks of about `block_bytes`, not of a chunk, when they are smaller.
            chunk: vec![0; CHUNK.min(block_bytes.max(1))],
            long: Vec::new(),
            notes: Vec::new(),
            hasher: gzip.then(Sha256::new),
            content: None,
        })
    }

    /// A gzip stream's content once it is all read: its SHA-256 and size, as
    /// `Source.identify` gives them (`None` for a plain file, or before the end).
    pub fn content_digest(&self) -> Option<([u8; 32], u64)> {
        self.content
    }

    /// The next block (whole lines, but for the last), `None` at the end.
    pub fn next_block(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        loop {
            let cut = if self.pending_lines > self.block_lines {
                memchr_iter(b'\n', &self.pending).nth(self.block_lines - 1)
            } else if self.pending.len() >= self.block_bytes {
                memrchr(b'\n', &self.pending)
            } else {
                None
            };
            if let Some(i) = cut {
                let rest = self.pending.split_off(i + 1);
                let block = std::mem::replace(&mut self.pending, rest);
                self.pending_lines = memchr_iter(b'\n', &self.pending).count();
                self.cap.shift(block.len());
                self.long.append(&mut self.cap.long);
                return Ok(Some(block));
            }
            let before = self.pending.len();
            let n = self.fill()?;
            // The cap may have taken back the start of a line too long (it held no \n).
            let from = before.min(self.pending.len());
            self.pending_lines += memchr_iter(b'\n', &self.pending[from..]).count();
            if n == 0 {
                self.cap.finish(&self.pending);
                self.long.append(&mut self.cap.long);
                if self.pending.is_empty() {
                    return Ok(None);
                }
                let block = std::mem::take(&mut self.pending);
                self.cap.shift(block.len());
                return Ok(Some(block));
            }
        }
    }

    /// Read one chunk through the line cap; 0 at the end.
    fn fill(&mut self) -> Result<usize, ReadError> {
        let n = match &mut self.input {
            Input::Done => 0,
            Input::Plain(f) => read_some(f, &mut self.chunk)?,
            Input::Gzip {
                decoder,
                produced,
                allowed,
            } => {
                let n = inflate(decoder, &mut self.chunk, *produced, &mut self.notes)?;
                *produced += n as u64;
                if *produced > *allowed {
                    return Err(ReadError::Bomb(*produced));
                }
                n
            }
        };
        if let Some(h) = self.hasher.as_mut() {
            h.update(&self.chunk[..n]);
        }
        if n == 0 {
            if let (Some(h), Input::Gzip { produced, .. }) = (self.hasher.take(), &self.input) {
                self.content = Some((h.finalize().into(), *produced));
            }
            self.input = Input::Done;
        }
        self.cap.push(&mut self.pending, &self.chunk[..n]);
        Ok(n)
    }
}

fn read_some(f: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match f.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

fn read_full(f: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = read_some(f, &mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

/// Inflate into `buf`, member after member, as `Source._chunks` does: NULs (or nothing)
/// after a member end the stream; a stream cut off or damaged after some output is a note.
fn inflate(
    decoder: &mut Option<Box<GzDecoder<BufReader<File>>>>,
    buf: &mut [u8],
    produced: u64,
    notes: &mut Vec<String>,
) -> Result<usize, ReadError> {
    loop {
        let Some(d) = decoder.as_mut() else {
            return Ok(0);
        };
        match d.read(buf) {
            Ok(0) => {
                // The member ended: another may follow, or padding.
                let Some(old) = decoder.take() else {
                    return Ok(0);
                };
                let mut raw = old.into_inner();
                let rest = raw.fill_buf()?;
                if rest.is_empty() {
                    return Ok(0);
                }
                if rest.iter().all(|&b| b == 0) {
                    let mut tail = Vec::new();
                    raw.read_to_end(&mut tail)?;
                    if tail.iter().all(|&b| b == 0) {
                        return Ok(0);
                    }
                    notes.push(format!(
                        "the gzip stream is corrupt after {produced} bytes (data after the end of the stream): what came before was read"
                    ));
                    return Ok(0);
                }
                *decoder = Some(Box::new(GzDecoder::new(raw)));
            }
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                *decoder = None;
                if produced == 0 {
                    return Err(ReadError::Unreadable(
                        if e.kind() == io::ErrorKind::UnexpectedEof {
                            "a gzip stream with no content".to_string()
                        } else {
                            format!("not a readable gzip stream ({e})")
                        },
                    ));
                }
                notes.push(if e.kind() == io::ErrorKind::UnexpectedEof {
                    "the gzip stream is cut off: what came before was read".to_string()
                } else {
                    format!("the gzip stream is corrupt after {produced} bytes ({e}): what came before was read")
                });
                return Ok(0);
            }
        }
    }
}
