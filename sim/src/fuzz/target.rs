//! What a fuzz target is, shared by the targets' files.

/// One parser under fuzzing.
pub struct Target {
    /// Its name (what a report says).
    pub name: &'static str,
    /// Real inputs to mutate.
    pub seeds: Vec<Vec<u8>>,
    /// Tokens its grammar cares about (inserted by mutations).
    pub dict: Vec<Vec<u8>>,
    /// Feeds it one input.
    pub run: fn(&[u8]),
}

/// Dictionary tokens (or seeds) from text.
pub fn toks(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|s| s.as_bytes().to_vec()).collect()
}
