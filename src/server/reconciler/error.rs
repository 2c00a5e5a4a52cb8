//! The reconciler's errors: one enum, a variant per failed step (as kube-rs'
//! controller-rs has it), and whether trying again can help.

use crate::server::db::DbError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("host API call {0} failed: {1}")]
    Kube(&'static str, #[source] kube::Error),
    #[error("database: {0}")]
    Db(#[from] DbError),
    #[error("waiting for the host: {0}")]
    NotYet(&'static str),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A validation error from the API server (4xx other than not-found,
    /// conflict and throttling) will not go away by retrying the same request.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Kube(_, kube::Error::Api(s)) => (400..500).contains(&s.code) && ![404, 409, 429].contains(&s.code),
            _ => false,
        }
    }

    /// The metrics label of a failure (`kubebyon_host_api_errors_total{kind}`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kube(_, kube::Error::Api(s)) => match s.code {
                404 => "not_found",
                409 => "conflict",
                429 => "throttled",
                400..=499 => "rejected",
                _ => "server_error",
            },
            Self::Kube(..) => "unreachable",
            Self::Db(_) => "database",
            Self::NotYet(_) => "not_ready",
        }
    }

    /// What a user may read about it (no credentials ever reach an API error).
    pub fn reason(&self) -> String {
        match self {
            Self::Kube(step, kube::Error::Api(s)) => format!("{step}: {}", s.message),
            Self::Kube(step, _) => format!("{step}: the host cluster did not answer"),
            Self::Db(_) => "database error".into(),
            Self::NotYet(what) => (*what).into(),
        }
    }
}

/// Tags a kube call with the step it belongs to.
pub fn kube(step: &'static str) -> impl FnOnce(kube::Error) -> Error {
    move |e| Error::Kube(step, e)
}

/// Not found counts as done (cleanup steps).
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}
