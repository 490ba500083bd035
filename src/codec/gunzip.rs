//! gzip bodies read from the upstream (r8s's own lists and watches ask for
//! gzip, as client-go does): inflated as their frames arrive, every member
//! of the stream in turn (kube-apiserver 1.37 writes a streaming list as one
//! gzip stream sync-flushed at every flush; a proxy may well send several
//! members), each member's CRC-32 and length checked.

use std::io::Write;

use flate2::write::MultiGzDecoder;

/// Plain bytes one compressed frame may inflate to before the body is
/// refused: no list page or watch event r8s reads comes near it, and a
/// broken or hostile stream cannot make it allocate without bound.
pub const MAX_INFLATE_PER_FRAME: usize = 1 << 30;

/// Why a gzip body cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GunzipError {
    /// Not gzip, or damaged (a bad header, deflate data or trailer).
    #[error("the upstream's gzip body is corrupt: {0}")]
    Corrupt(std::io::Error),
    /// The body ended inside a member, or its last trailer does not match
    /// what it held.
    #[error(
        "the upstream's gzip body ended inside a gzip member or its trailer does not match: {0}"
    )]
    Unfinished(std::io::Error),
    /// One frame inflated past [`MAX_INFLATE_PER_FRAME`].
    #[error("the upstream's gzip body inflates past {MAX_INFLATE_PER_FRAME} bytes in one frame")]
    TooLarge,
}

/// The error [`Sink`] gives past its bound.
#[derive(Debug, thiserror::Error)]
#[error("inflates past the bound")]
struct PastBound;

/// Where inflated bytes go: the caller's buffer, bounded per frame.
struct Sink {
    out: Vec<u8>,
    room: usize,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.room {
            return Err(std::io::Error::other(PastBound));
        }
        self.room -= buf.len();
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A gzip body being read, frame by frame.
pub struct Gunzip {
    z: MultiGzDecoder<Sink>,
    /// Whether any compressed byte was taken (an empty body is no member).
    inside: bool,
    /// Plain bytes one frame may inflate to.
    limit: usize,
}

impl Default for Gunzip {
    fn default() -> Self {
        Self::new()
    }
}

impl Gunzip {
    /// A decoder for one body.
    pub fn new() -> Self {
        Self::with_limit(MAX_INFLATE_PER_FRAME)
    }

    /// A decoder whose frames may inflate to at most `limit` bytes each.
    pub fn with_limit(limit: usize) -> Self {
        Gunzip {
            limit,
            z: MultiGzDecoder::new(Sink {
                out: Vec::new(),
                room: 0,
            }),
            inside: false,
        }
    }

    /// Inflates `frame` and appends every plain byte it completes to `out`
    /// (a sync-flushed event is all there once its frame is in).
    pub fn push(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), GunzipError> {
        if frame.is_empty() {
            return Ok(());
        }
        {
            let sink = self.z.get_mut();
            sink.out = std::mem::take(out);
            sink.room = self.limit;
        }
        let res = self.z.write_all(frame).and_then(|()| self.z.flush());
        *out = std::mem::take(&mut self.z.get_mut().out);
        self.inside = true;
        res.map_err(|e| {
            if e.get_ref().is_some_and(|inner| inner.is::<PastBound>()) {
                GunzipError::TooLarge
            } else {
                GunzipError::Corrupt(e)
            }
        })
    }

    /// Checks that the body ended at the end of a member (its trailer read
    /// and checked), not inside one.
    pub fn finish(&mut self) -> Result<(), GunzipError> {
        if !self.inside {
            return Ok(());
        }
        let sink = self.z.get_mut();
        sink.room = self.limit;
        sink.out = Vec::new();
        self.inside = false;
        self.z.try_finish().map_err(GunzipError::Unfinished)
    }
}

/// Whether a response's body is gzip (`Content-Encoding: gzip`).
pub fn is_gzip(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(plain: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(plain).unwrap();
        e.finish().unwrap()
    }

    /// Feeds `body` in frames of `step` bytes; the plain bytes, or the error.
    fn read(body: &[u8], step: usize) -> Result<Vec<u8>, GunzipError> {
        let mut g = Gunzip::new();
        let mut out = Vec::new();
        for frame in body.chunks(step) {
            g.push(frame, &mut out)?;
        }
        g.finish()?;
        Ok(out)
    }

    #[test]
    fn should_read_every_member_of_a_stream_in_any_framing() {
        let lines: Vec<Vec<u8>> = (0..50)
            .map(|i| {
                format!("{{\"type\":\"ADDED\",\"n\":{i}}}\n")
                    .repeat(i % 7 + 1)
                    .into_bytes()
            })
            .collect();
        let body: Vec<u8> = lines.iter().flat_map(|l| member(l)).collect();
        let plain: Vec<u8> = lines.concat();
        for step in [1, 7, 64, 4096, body.len()] {
            assert_eq!(read(&body, step).unwrap(), plain, "frames of {step}");
        }
    }

    #[test]
    fn should_give_each_sync_flushed_event_once_its_frame_is_in() {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut g = Gunzip::new();
        let mut out = Vec::new();
        for i in 0..20 {
            let line = format!("event {i}\n");
            z.write_all(line.as_bytes()).unwrap();
            z.flush().unwrap();
            let frame = std::mem::take(z.get_mut());
            g.push(&frame, &mut out).unwrap();
            assert!(out.ends_with(line.as_bytes()), "event {i} not whole yet");
        }
    }

    #[test]
    fn should_refuse_a_corrupt_or_truncated_body() {
        let body = member(&b"a watch event\n".repeat(100));
        let mut bad = body.clone();
        let n = bad.len();
        bad[n - 6] ^= 0xff; // the CRC-32
        assert!(matches!(read(&bad, 16), Err(GunzipError::Unfinished(_))));
        // A damaged member followed by another is caught where it ends.
        let two: Vec<u8> = [bad.clone(), body.clone()].concat();
        assert!(matches!(read(&two, 16), Err(GunzipError::Corrupt(_))));
        assert!(matches!(
            read(&body[..n - 3], 16),
            Err(GunzipError::Unfinished(_))
        ));
        assert!(matches!(
            read(&body[..5], 16),
            Err(GunzipError::Unfinished(_))
        ));
        assert!(matches!(
            read(b"{\"kind\":\"PodList\"}", 16),
            Err(GunzipError::Corrupt(_))
        ));
        assert_eq!(read(b"", 16).unwrap(), b"");
    }

    #[test]
    fn should_refuse_a_frame_that_inflates_past_its_bound() {
        let bomb = member(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 16 * 1024, "{}", bomb.len());
        let mut g = Gunzip::with_limit(64 * 1024);
        let mut out = Vec::new();
        assert!(matches!(
            g.push(&bomb, &mut out),
            Err(GunzipError::TooLarge)
        ));
        assert!(out.len() <= 64 * 1024);
    }
}
