//! Whether a cache answers reads and watches, and if not why: one value per
//! store, moved only by its writer ([`crate::cache::store::Writer`]), read
//! by every request.
//!
//! ```text
//!   Syncing ──first list, or a snapshot's watch answered──▶ Ready
//!   Syncing ──cache.serve_stale and a snapshot restored───▶ Ready
//!   Ready / Syncing ──objects over the byte budget────────▶ OverBudget
//!   OverBudget ──a relist that fits───────────────────────▶ Ready
//!   any ──resource versions that are not integers─────────▶ Uncacheable (for good)
//!   any ──the resource is no longer served upstream───────▶ Removed (for good)
//! ```

/// Whether a cache answers reads and watches, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Not listed yet: requests pass through.
    Syncing,
    /// Serving its current version.
    Ready,
    /// Evicted for its byte budget: requests pass through until a relist fits.
    OverBudget,
    /// Its resource versions are not integers: requests pass through for good.
    Uncacheable,
    /// Its resource is no longer served upstream (a CRD deleted, a version
    /// no longer served): its objects are dropped, its watches ended, and
    /// its requests pass through (to the upstream's 404).
    Removed,
}

impl Serving {
    /// After a change is applied: a syncing store serves from now on if
    /// the change makes it `ready` (a list, an event after one), not if it
    /// is a snapshot waiting for its watch to be answered.
    pub(super) fn applied(self, ready: bool) -> Serving {
        match self {
            Serving::Syncing if ready => Serving::Ready,
            s => s,
        }
    }

    /// The upstream answered the watch resumed from a restored state.
    pub(super) fn resumed(self) -> Serving {
        self.applied(true)
    }

    /// A relist fits the budget again: an evicted cache serves again.
    pub(super) fn refitted(self) -> Serving {
        match self {
            Serving::OverBudget => Serving::Ready,
            s => s,
        }
    }

    /// Whether the cache has settled: serving, or passing through for good reason.
    pub fn settled(self) -> bool {
        self != Serving::Syncing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_serve_only_from_the_transitions_drawn() {
        assert_eq!(Serving::Syncing.applied(false), Serving::Syncing);
        assert_eq!(Serving::Syncing.applied(true), Serving::Ready);
        assert_eq!(Serving::OverBudget.applied(true), Serving::OverBudget);
        assert_eq!(Serving::Uncacheable.resumed(), Serving::Uncacheable);
        assert_eq!(Serving::OverBudget.refitted(), Serving::Ready);
        assert_eq!(Serving::Syncing.refitted(), Serving::Syncing);
        assert!(!Serving::Syncing.settled() && Serving::OverBudget.settled());
    }
}
