//! What the follower believes of a discovery that leaves out a resource it
//! caches: kube-apiserver's own watch cache does not depend on discovery,
//! and a discovery answer can be briefly incomplete (an apiserver
//! mid-upgrade, one of several behind a Service disagreeing, discovery
//! lagging a CRD), so a cache is not retired on one answer's word alone.

use std::collections::HashSet;

use super::definitions::Verdict;
use crate::api::Gvr;

/// The caches the last look left out and kept.
#[derive(Default)]
pub(super) struct LeftOut {
    last: HashSet<Gvr>,
    /// Whether one of them waits for a second look to confirm it gone.
    unconfirmed: bool,
}

impl LeftOut {
    /// Which of the caches a look `left_out` are gone, given what the CRD
    /// cache says of each (`verdict`): a custom resource whose CRD is gone or
    /// no longer serves its version, at once; one whose CRD serves it,
    /// never; any other once two looks in a row have left it out. Each is
    /// logged when first left out.
    pub(super) fn judge(
        &mut self,
        left_out: Vec<Gvr>,
        mut verdict: impl FnMut(&Gvr) -> Verdict,
    ) -> Vec<Gvr> {
        let before = std::mem::take(&mut self.last);
        self.unconfirmed = false;
        let mut gone = Vec::new();
        for gvr in left_out {
            match verdict(&gvr) {
                Verdict::Gone => gone.push(gvr),
                Verdict::Unknown if before.contains(&gvr) => gone.push(gvr),
                v => {
                    self.unconfirmed |= v == Verdict::Unknown;
                    if !before.contains(&gvr) {
                        tracing::warn!(resource = %gvr, verdict = ?v, "discovery left out a resource r8s caches; its cache stays (a resource whose CRD serves it, for as long as it does; any other, until the next look leaves it out too)");
                    }
                    self.last.insert(gvr);
                }
            }
        }
        gone
    }

    /// Whether a cache left out once waits for the next look (which the
    /// follower then takes soon, not a period on).
    pub(super) fn unconfirmed(&self) -> bool {
        self.unconfirmed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvr(r: &'static str) -> Gvr {
        Gvr::new("g.example.com", "v1", r)
    }

    #[test]
    fn should_retire_only_what_its_crd_or_two_looks_in_a_row_say_is_gone() {
        let (a, b, c) = (gvr("as"), gvr("bs"), gvr("cs"));
        let verdict = |g: &Gvr| match g.resource() {
            "bs" => Verdict::Served,
            "cs" => Verdict::Gone,
            _ => Verdict::Unknown,
        };
        let mut l = LeftOut::default();
        // First look: the CRD says c is gone; a waits for a second look.
        let gone = l.judge(vec![a.clone(), b.clone(), c.clone()], verdict);
        assert_eq!(gone, [c]);
        assert!(l.unconfirmed());
        // Listed again in between: a starts over.
        assert!(l.judge(vec![b.clone()], verdict).is_empty());
        assert!(!l.unconfirmed());
        assert!(l.judge(vec![a.clone(), b.clone()], verdict).is_empty());
        // Left out twice in a row: gone. b stays while its CRD serves it.
        assert_eq!(l.judge(vec![a.clone(), b.clone()], verdict), [a]);
        assert!(!l.unconfirmed());
        assert!(l.judge(vec![b], verdict).is_empty());
    }
}
