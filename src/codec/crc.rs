//! gzip's CRC-32 of a stream spliced from pieces compressed once: each
//! piece keeps its CRC and the factor that appends it to any stream
//! (x^(8·len) mod P, computed once), so appending it costs one multiplication
//! in GF(2) per stream (a list, a watcher) instead of the log(len) that
//! zlib's `crc32_combine` spends each time.
//!
//! crc(A‖B) = crc(A)·x^(8·|B|) + crc(B) mod P, the pre- and post-conditioning
//! cancelling out (zlib's `crc32_combine`, in its reflected bit order).

/// The CRC-32 polynomial, reflected.
const POLY: u32 = 0xedb8_8320;

/// `a·b` modulo P (reflected: bit 31 is x^0).
const fn multiply(a: u32, mut b: u32) -> u32 {
    let mut m = 1u32 << 31;
    let mut p = 0;
    if a == 0 {
        return 0;
    }
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
}

/// x^(2^k) modulo P, for k in 0..32 (x^(2^32) = x modulo P, so they repeat
/// with period 32, as zlib's table is used).
const X2N: [u32; 32] = {
    let mut t = [0u32; 32];
    let mut p = 1u32 << 30; // x^1
    let mut k = 0;
    while k < 32 {
        t[k] = p;
        p = multiply(p, p);
        k += 1;
    }
    t
};

/// x^(8·len) modulo P: what a CRC is multiplied by to append `len` bytes.
fn shift_of(len: u64) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let (mut n, mut k) = (len, 3usize);
    while n != 0 {
        if n & 1 != 0 {
            p = multiply(X2N[k & 31], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// A piece's CRC-32 and length, and the factor that appends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PieceCrc {
    crc: u32,
    len: u64,
    shift: u32,
}

impl PieceCrc {
    /// The CRC of `bytes`, ready to be appended to streams.
    pub fn of(bytes: &[u8]) -> Self {
        let mut c = flate2::Crc::new();
        c.update(bytes);
        Self::from_parts(c.sum(), bytes.len() as u64)
    }

    /// A piece of `len` bytes whose CRC is `crc`.
    fn from_parts(crc: u32, len: u64) -> Self {
        PieceCrc {
            crc,
            len,
            shift: shift_of(len),
        }
    }
}

/// The CRC-32 and length of a stream so far: what was appended as pieces
/// (`head`), then bytes hashed as they come (`tail`, folded in before the
/// next piece), so consecutive bytes cost no multiplication at all.
#[derive(Debug, Default)]
pub struct StreamCrc {
    head: u32,
    head_len: u64,
    tail: flate2::Crc,
    tail_len: u64,
}

impl StreamCrc {
    /// The CRC of head and tail together.
    fn folded(&self) -> u32 {
        if self.tail_len == 0 {
            self.head
        } else {
            multiply(shift_of(self.tail_len), self.head) ^ self.tail.sum()
        }
    }

    /// Folds the tail into the head.
    fn fold(&mut self) {
        if self.tail_len > 0 {
            self.head = self.folded();
            self.head_len += self.tail_len;
            self.tail.reset();
            self.tail_len = 0;
        }
    }

    /// Appends a piece whose CRC was computed once.
    pub fn append(&mut self, piece: &PieceCrc) {
        self.fold();
        self.head = multiply(piece.shift, self.head) ^ piece.crc;
        self.head_len += piece.len;
    }

    /// Appends `bytes` (the parts of a stream made for it alone).
    pub fn update(&mut self, bytes: &[u8]) {
        self.tail.update(bytes);
        self.tail_len += bytes.len() as u64;
    }

    /// Appends another stream (what a list made, to the watch it began).
    pub fn extend(&mut self, other: &StreamCrc) {
        let len = other.head_len + other.tail_len;
        self.append(&PieceCrc::from_parts(other.folded(), len));
    }

    /// The CRC-32, for the trailer.
    pub fn sum(&self) -> u32 {
        self.folded()
    }

    /// The length modulo 2^32, for the trailer.
    pub fn amount(&self) -> u32 {
        (self.head_len + self.tail_len) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc_of(b: &[u8]) -> u32 {
        let mut c = flate2::Crc::new();
        c.update(b);
        c.sum()
    }

    #[test]
    fn should_equal_the_crc_of_the_whole_stream() {
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for cuts in [
            vec![0, 1],
            vec![3, 4096, 70_000],
            vec![1, 2, 3, 65_536, 131_071],
        ] {
            let mut s = StreamCrc::default();
            let mut from = 0;
            for (n, &at) in cuts.iter().chain([data.len()].iter()).enumerate() {
                let piece = &data[from..at];
                if n % 3 == 0 {
                    s.append(&PieceCrc::of(piece));
                } else {
                    s.update(piece);
                }
                from = at;
            }
            assert_eq!(s.sum(), crc_of(&data), "cut at {cuts:?}");
            assert_eq!(s.amount(), data.len() as u32);
        }
        let (a, b) = data.split_at(12_345);
        let (mut x, mut y) = (StreamCrc::default(), StreamCrc::default());
        x.update(a);
        y.update(b);
        x.extend(&y);
        assert_eq!(x.sum(), crc_of(&data));
        assert_eq!(StreamCrc::default().sum(), crc_of(b""));
    }
}
