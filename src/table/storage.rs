//! Printers of storage: persistent volumes and their claims, as
//! kube-apiserver's `printPersistentVolume` and `printPersistentVolumeClaim`
//! print them (`pkg/printers/internalversion/printers.go`; column texts
//! from Kubernetes 1.36's `core/v1` documentation).

use std::borrow::Cow;

use serde::Deserialize;

use super::cell::{Cell, Column, Row, Text, parse_time};
use super::labels::Labels;

/// `persistentVolumeColumnDefinitions`.
pub static PERSISTENT_VOLUME_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Capacity",
        "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
    ),
    Column::text(
        "Access Modes",
        "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes",
    ),
    Column::text(
        "Reclaim Policy",
        "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
    ),
    Column::text(
        "Status",
        "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
    ),
    Column::text(
        "Claim",
        "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
    ),
    Column::text("StorageClass", "StorageClass of the pv"),
    Column::text("VolumeAttributesClass", "VolumeAttributesClass of the pv"),
    Column::text(
        "Reason",
        "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
    ),
    Column::age(),
    Column::wide(
        "VolumeMode",
        "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
    ),
];

/// `persistentVolumeClaimColumnDefinitions`.
pub static PERSISTENT_VOLUME_CLAIM_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Status",
        "phase represents the current phase of PersistentVolumeClaim.",
    ),
    Column::text(
        "Volume",
        "volumeName is the binding reference to the PersistentVolume backing this claim.",
    ),
    Column::text(
        "Capacity",
        "capacity represents the actual resources of the underlying volume.",
    ),
    Column::text(
        "Access Modes",
        "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
    ),
    Column::text("StorageClass", "StorageClass of the pvc"),
    Column::text("VolumeAttributesClass", "VolumeAttributesClass of the pvc"),
    Column::age(),
    Column::wide(
        "VolumeMode",
        "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
    ),
];

/// The annotation that names a volume's or claim's class before
/// `storageClassName` (`helper.GetPersistentVolumeClass`).
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// The metadata both read: a deleted one is `Terminating`; the beta class
/// annotation wins over the spec's class.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Meta<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    creation_timestamp: Option<Cow<'a, str>>,
    #[serde(borrow)]
    deletion_timestamp: Option<Cow<'a, str>>,
    #[serde(borrow)]
    annotations: Labels<'a>,
}

impl Meta<'_> {
    fn age(&self) -> Cell {
        Cell::Since(self.creation_timestamp.as_deref().and_then(parse_time))
    }

    fn class<'s>(&'s self, spec: Option<&'s str>) -> &'s str {
        self.annotations
            .get(BETA_CLASS)
            .map(|c| &**c)
            .or(spec)
            .unwrap_or("")
    }

    fn phase<'s>(&self, phase: &'s str) -> &'s str {
        match self.deletion_timestamp {
            Some(_) => "Terminating",
            None => phase,
        }
    }
}

/// `helper.GetAccessModesAsString`: each mode once, in this order.
fn access_modes(modes: &[Cow<str>]) -> String {
    let short = [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ];
    let present: Vec<&str> = short
        .iter()
        .filter(|(m, _)| modes.iter().any(|x| x == m))
        .map(|(_, s)| *s)
        .collect();
    present.join(",")
}

/// A `storage` quantity as its `String()`: the apiserver stores quantities
/// in canonical form, so the stored text; `0` where there is none.
fn storage<'a>(resources: &'a Labels<'a>) -> &'a str {
    resources.get("storage").map_or("0", |q| &**q)
}

fn text(s: &str) -> Cell {
    Cell::Text(Text::from(s))
}

/// A persistent volume's row: size, access modes, reclaim policy, phase,
/// `namespace/name` of its claim, class, attributes class, reason; wide:
/// its volume mode.
pub fn persistent_volume_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Volume<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: Spec<'a>,
        #[serde(borrow)]
        status: Status<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Spec<'a> {
        #[serde(borrow)]
        capacity: Labels<'a>,
        #[serde(borrow)]
        access_modes: Vec<Cow<'a, str>>,
        #[serde(borrow)]
        persistent_volume_reclaim_policy: Cow<'a, str>,
        #[serde(borrow)]
        claim_ref: Option<Claim<'a>>,
        #[serde(borrow)]
        storage_class_name: Option<Cow<'a, str>>,
        #[serde(borrow)]
        volume_attributes_class_name: Option<Cow<'a, str>>,
        #[serde(borrow)]
        volume_mode: Option<Cow<'a, str>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Claim<'a> {
        #[serde(borrow)]
        namespace: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Status<'a> {
        #[serde(borrow)]
        phase: Cow<'a, str>,
        #[serde(borrow)]
        reason: Cow<'a, str>,
    }
    let o: Volume = serde_json::from_slice(body).ok()?;
    let (m, spec) = (&o.metadata, &o.spec);
    let claim = spec
        .claim_ref
        .as_ref()
        .map_or(String::new(), |c| format!("{}/{}", c.namespace, c.name));
    Some(Row {
        cells: vec![
            text(&m.name),
            text(storage(&spec.capacity)),
            text(&access_modes(&spec.access_modes)),
            text(&spec.persistent_volume_reclaim_policy),
            text(m.phase(&o.status.phase)),
            text(&claim),
            text(m.class(spec.storage_class_name.as_deref())),
            text(
                spec.volume_attributes_class_name
                    .as_deref()
                    .unwrap_or("<unset>"),
            ),
            text(&o.status.reason),
            m.age(),
            text(spec.volume_mode.as_deref().unwrap_or("<unset>")),
        ],
        condition: None,
    })
}

/// A claim's row: phase, volume, and once bound its size and access modes;
/// class, attributes class; wide: its volume mode.
pub fn persistent_volume_claim_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct ClaimObject<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: Spec<'a>,
        #[serde(borrow)]
        status: Status<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Spec<'a> {
        #[serde(borrow)]
        volume_name: Cow<'a, str>,
        #[serde(borrow)]
        storage_class_name: Option<Cow<'a, str>>,
        #[serde(borrow)]
        volume_attributes_class_name: Option<Cow<'a, str>>,
        #[serde(borrow)]
        volume_mode: Option<Cow<'a, str>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Status<'a> {
        #[serde(borrow)]
        phase: Cow<'a, str>,
        #[serde(borrow)]
        capacity: Labels<'a>,
        #[serde(borrow)]
        access_modes: Vec<Cow<'a, str>>,
    }
    let o: ClaimObject = serde_json::from_slice(body).ok()?;
    let (m, spec, st) = (&o.metadata, &o.spec, &o.status);
    let (capacity, modes) = match spec.volume_name.is_empty() {
        true => (String::new(), String::new()),
        false => (
            storage(&st.capacity).to_string(),
            access_modes(&st.access_modes),
        ),
    };
    Some(Row {
        cells: vec![
            text(&m.name),
            text(m.phase(&st.phase)),
            text(&spec.volume_name),
            text(&capacity),
            text(&modes),
            text(m.class(spec.storage_class_name.as_deref())),
            text(
                spec.volume_attributes_class_name
                    .as_deref()
                    .unwrap_or("<unset>"),
            ),
            m.age(),
            text(spec.volume_mode.as_deref().unwrap_or("<unset>")),
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
