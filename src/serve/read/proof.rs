//! The proof step: a consistent read (no `resourceVersion`; a list not
//! continuing a page) waits for the proof that the cache is as fresh as the
//! upstream was when it arrived (`upstream::proof`), and is answered at
//! least at the version the proof found; any other read goes on as it is.

use super::steps::{Decided, Proven, Reader};
use crate::serve::outcome::PassReason;
use crate::serve::servable::unproven;

impl Reader<'_> {
    /// The proof step: a consistent read waits for its proof, and gets the
    /// version it must be answered at least at.
    pub(super) async fn prove<'c>(&self, decided: Decided<'c>) -> Result<Proven<'c>, PassReason> {
        let floor = match decided.consistent {
            Some(kind) => Some(
                self.proofs
                    .prove(decided.cache, decided.store, kind)
                    .await
                    .map_err(unproven)?,
            ),
            None => None,
        };
        Ok(Proven { decided, floor })
    }
}
