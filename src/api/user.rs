//! Who a request is from, as kube-apiserver's authenticators name users.

use std::collections::BTreeMap;

/// A user as kube-apiserver's authenticators produce it (`user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// UID (may be empty).
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, node names, ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// kube-apiserver's `AuthenticatedGroupAdder`, applied to every user its
    /// authenticators name (certificates, tokens): every one but
    /// `system:anonymous` is in `system:authenticated`, unless it already
    /// is, or is in `system:unauthenticated`.
    pub fn add_authenticated_group(&mut self) {
        if self.name == "system:anonymous"
            || self
                .groups
                .iter()
                .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
        {
            return;
        }
        self.groups.push("system:authenticated".into());
    }

    /// The user of a request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        }
    }
}
