//! The domain core: validated types and the pure rules of KubeBYON.
//! No I/O happens here; every rule is a function with a table-driven test.

pub mod audit;
pub mod change;
pub mod chart;
pub mod cluster;
pub mod cluster_name;
pub mod egress;
pub mod endpoint;
pub mod error;
pub mod gateway;
pub mod helm;
pub mod host;
pub mod host_objects;
/// Server-side only: bootstrap tokens are Kubernetes Secrets (k8s-openapi).
#[cfg(feature = "ssr")]
pub mod join;
pub mod listing;
pub mod load_balancer;
pub mod membership;
pub mod moves;
pub mod names;
pub mod nodes;
pub mod operator;
pub mod path;
pub mod placement;
pub mod public_access;
pub mod quota;
/// Server-side only: RBAC rules are Kubernetes objects (k8s-openapi).
#[cfg(feature = "ssr")]
pub mod rbac;
pub mod reason;
/// Server-side only: the values are YAML for the HelmChart (serde_yaml).
#[cfg(feature = "ssr")]
pub mod render;
pub mod resources;
pub mod sans;
pub mod settings;
/// Server-side only: sign-in throttling's numbers.
#[cfg(feature = "ssr")]
pub mod sign_in;
/// Server-side only: the request limits' token bucket.
#[cfg(feature = "ssr")]
pub mod token_bucket;
pub mod user;

pub use cluster::{ClusterSpec, ClusterStatus, ConnectionStatus, Phase, Telemetry};
pub use cluster_name::ClusterName;
pub use error::{AppError, ErrorCode, Field};
pub use host::Host;
pub use public_access::{PublicAccess, PublicAccessMode};
pub(crate) use reason::{Reason, StopReason};
pub use resources::Resources;
pub use settings::SystemSettings;
