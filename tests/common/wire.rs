//! Protobuf messages as a client declares them (k8s.io/apimachinery's
//! runtime.Unknown, ListMeta, ObjectMeta, WatchEvent, and objects kept
//! by their metadata only, as a metadata informer keeps them): prost
//! decodes r8s's and the apiserver's answers with these, never with r8s's
//! own parsers. Fields a test does not read are left out (prost skips them).

use std::collections::BTreeMap;

use prost::Message;

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
pub struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `runtime.Unknown`: the envelope after the `k8s\0` magic.
#[derive(Clone, PartialEq, Message)]
pub struct Unknown {
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub raw: Option<Vec<u8>>,
}

/// `metav1.ListMeta`.
#[derive(Clone, PartialEq, Message)]
pub struct ListMeta {
    #[prost(string, optional, tag = "2")]
    pub resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub cont: Option<String>,
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
    #[prost(message, optional, tag = "5")]
    pub shard_info: Option<ShardInfo>,
}

/// `metav1.ShardInfo`: the shard selector a list was limited by.
#[derive(Clone, PartialEq, Message)]
pub struct ShardInfo {
    #[prost(string, optional, tag = "1")]
    pub selector: Option<String>,
}

/// `metav1.ObjectMeta`, the fields the tests read.
#[derive(Clone, PartialEq, Message)]
pub struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
}

/// Any object (a Pod, a PartialObjectMetadata), kept by its metadata.
#[derive(Clone, PartialEq, Message)]
pub struct Object {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
}

/// Any list (a PodList), its items kept by their metadata.
#[derive(Clone, PartialEq, Message)]
pub struct ObjectList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<Object>,
}

/// An item whose `metadata` is kept as bytes, to be compared whole.
#[derive(Clone, PartialEq, Message)]
pub struct ObjectMetaBytes {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub metadata: Option<Vec<u8>>,
}

/// A list whose items' metadata are kept as bytes.
#[derive(Clone, PartialEq, Message)]
pub struct MetaList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<ObjectMetaBytes>,
}

/// `runtime.RawExtension`.
#[derive(Clone, PartialEq, Message)]
pub struct RawExtension {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub raw: Option<Vec<u8>>,
}

/// `metav1.WatchEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct WatchEvent {
    #[prost(string, optional, tag = "1")]
    pub r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub object: Option<RawExtension>,
}
