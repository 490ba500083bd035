//! The compressed runs of list items that gzip lists splice
//! ([`super::gzip`]), kept on the item each starts at, so a run lives as
//! long as that object does; and what names an item's bytes.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use super::crc::PieceCrc;

use crate::sync::MutexExt;

/// Items per run, on average: one key in this many starts a run.
pub const RUN_MEAN: u64 = 8;

/// Which of an item's forms a run holds: the object or its metadata only,
/// with or without `metadata.managedFields`, as a list's item or as a
/// streaming list's initial ADDED event.
pub type Form = usize;
/// [`Form`] of a list of the objects themselves.
pub const OBJECT: Form = 0;
/// [`Form`] of a `PartialObjectMetadataList`.
pub const METADATA: Form = 1;
/// [`OBJECT`] without managedFields (`drop=metadata.managedFields`).
pub const OBJECT_DROPPED: Form = 2;
/// [`METADATA`] without managedFields.
pub const METADATA_DROPPED: Form = 3;
/// A streaming list's initial ADDED events of form `list_form` (one of the four above).
pub const fn watch(list_form: Form) -> Form {
    4 + list_form
}
/// How many forms there are.
const FORMS: usize = 8;

/// A run per form, made on first use (most objects never need one).
type Slots = [Mutex<Option<Arc<Run>>>; FORMS];

static SERIALS: AtomicU64 = AtomicU64::new(1);
static RUN_BYTES: AtomicUsize = AtomicUsize::new(0);

/// What a list item carries for gzip: a serial that names its bytes (never
/// reused, so a run can tell the items it was made of from their
/// successors), whether a run starts at it, and the runs that do.
pub struct Memo {
    serial: u64,
    run_start: bool,
    runs: OnceLock<Box<Slots>>,
}

impl Memo {
    /// The memo of a new object with storage key `key`.
    pub fn new(key: &str) -> Memo {
        Memo {
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
            run_start: starts_run(key),
            runs: OnceLock::new(),
        }
    }

    /// The serial naming this object's bytes.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// Whether a run starts at this object.
    pub fn run_start(&self) -> bool {
        self.run_start
    }

    /// The run of `form` starting here, if one was compressed.
    pub fn run(&self, form: Form) -> Option<Arc<Run>> {
        self.runs.get()?[form].locked().clone()
    }

    /// Keeps `run` as the run of `form` starting here.
    pub fn keep(&self, form: Form, run: Arc<Run>) {
        let slots = self.runs.get_or_init(Box::default);
        *slots[form].locked() = Some(run);
    }
}

impl fmt::Debug for Memo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memo")
            .field("serial", &self.serial)
            .field("run_start", &self.run_start)
            .finish_non_exhaustive()
    }
}

/// Whether a run starts at the object with key `key` (FNV-1a, mixed).
fn starts_run(key: &str) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h.is_multiple_of(RUN_MEAN)
}

/// A run of items, deflated: spliced where its items follow its dictionary's.
pub struct Run {
    deflate: Bytes,
    crc: PieceCrc,
    /// The serials of its items, and their plain bytes.
    items: Box<[u64]>,
    lens: Box<[u32]>,
    /// The serials of the items before it whose bytes it was compressed after.
    dict: Box<[u64]>,
}

impl Run {
    /// A run: its deflate bytes and their plain bytes' CRC, the serials and
    /// sizes of its items, and the serials of the items it was compressed
    /// after.
    pub fn new(
        deflate: Bytes,
        crc: PieceCrc,
        items: Box<[u64]>,
        lens: Box<[u32]>,
        dict: Box<[u64]>,
    ) -> Run {
        RUN_BYTES.fetch_add(deflate.len(), Ordering::Relaxed);
        Run {
            deflate,
            crc,
            items,
            lens,
            dict,
        }
    }

    /// The deflate bytes, ending with a sync flush.
    pub fn deflate(&self) -> &[u8] {
        &self.deflate
    }

    /// The CRC-32 of its plain bytes.
    pub fn crc(&self) -> &PieceCrc {
        &self.crc
    }

    /// The serials of its items.
    pub fn items(&self) -> &[u64] {
        &self.items
    }

    /// The plain bytes of each item (separator included).
    pub fn lens(&self) -> &[u32] {
        &self.lens
    }

    /// The serials of the items before it, whose bytes are its dictionary.
    pub fn dict(&self) -> &[u64] {
        &self.dict
    }
}

/// Bytes of every run held (all caches).
pub fn held_bytes() -> usize {
    RUN_BYTES.load(Ordering::Relaxed)
}

impl Drop for Run {
    fn drop(&mut self) {
        RUN_BYTES.fetch_sub(self.deflate.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_cut_runs_where_the_keys_say() {
        let starts = (0..80_000)
            .filter(|i| starts_run(&format!("ns-{}/pod-{i}", i % 10)))
            .count();
        let mean = 80_000.0 / starts as f64;
        assert!((7.0..9.0).contains(&mean), "{mean} items per run");
    }
}
