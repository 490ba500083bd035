//! API priority and fairness as kube-apiserver's (issue 76): the cluster's
//! FlowSchemas and priority levels read as the apiserver reads them
//! ([`schema`]; its own mandatory and suggested ones where the cluster's
//! cannot be read, [`builtin`]), and each request classified to a
//! FlowSchema, a priority level and a flow exactly as the apiserver's
//! filter classifies it ([`classify`]).

pub mod builtin;
pub mod classify;
pub mod schema;
