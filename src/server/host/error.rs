//! The reconciler's errors: one enum, a variant per failed step (as kube-rs'
//! controller-rs has it), and whether trying again can help.

use crate::domain::Reason;
use crate::server::db::DbError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("host API call {0} failed: {1}")]
    Kube(&'static str, #[source] kube::Error),
    #[error("database: {0}")]
    Db(#[from] DbError),
    #[error("waiting for the host: {0}")]
    NotYet(&'static str),
    /// A request's host calls did not end within their time
    /// (`host::REQUEST_CALL_TIMEOUT`).
    #[error("the host did not answer in time: {0}")]
    TimedOut(&'static str),
    /// An object the cluster needs exists on the host and is not the
    /// console's (`namespace kubebyon-db`): left untouched, the cluster fails.
    #[error("{0} exists on the host and was not created by this console")]
    Taken(String),
    /// A virtual cluster's endpoint answers as the host's own API server
    /// (the same `kube-system`): whatever the console wrote "inside" would
    /// land on the host. Nothing is written.
    #[error("the cluster's endpoint is the host's own API server")]
    Relayed,
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A validation error from the API server (4xx other than not-found,
    /// conflict and throttling) will not go away by retrying the same request.
    /// 401 and 403 are not the request's fault but the console's credentials
    /// or RBAC, which an operator fixes: they are retried with backoff (a
    /// delete that met a 403 once used to stay failed for good).
    pub(crate) fn is_permanent(&self) -> bool {
        match self {
            Self::Kube(_, kube::Error::Api(s)) => {
                (400..500).contains(&s.code) && ![401, 403, 404, 409, 429].contains(&s.code)
            }
            Self::Taken(_) => true,
            _ => false,
        }
    }

    /// The metrics label of a failure (`kubebyon_host_api_errors_total{kind}`).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Kube(_, kube::Error::Api(s)) => match s.code {
                401 => "unauthorized",
                403 => "forbidden",
                404 => "not_found",
                409 => "conflict",
                429 => "throttled",
                400..=499 => "rejected",
                _ => "server_error",
            },
            Self::Kube(..) => "unreachable",
            Self::Db(_) => "database",
            Self::NotYet(_) => "not_ready",
            Self::TimedOut(_) => "timed_out",
            Self::Taken(_) => "taken",
            Self::Relayed => "relayed",
        }
    }

    /// What a user may read about it (no credentials ever reach an API error).
    pub(crate) fn reason(&self) -> String {
        match self {
            Self::Kube(step, kube::Error::Api(s)) => format!("{step}: {}", s.message),
            Self::Kube(step, _) => format!("{step}: the host cluster did not answer"),
            Self::Db(_) => "database error".into(),
            Self::NotYet(what) | Self::TimedOut(what) => (*what).into(),
            Self::Taken(_) | Self::Relayed => self.to_string(),
        }
    }

    /// The status reason of a cluster this failure stopped (a permanent
    /// one, [`Error::is_permanent`]): taken (naming the object), or refused
    /// by the host's API server, with the step and its words.
    pub(crate) fn status_reason(&self) -> Reason {
        match self {
            Self::Taken(object) => Reason::NamespaceTaken(object.clone()),
            _ => Reason::HostRefused(self.reason()),
        }
    }
}

/// Tags a kube call with the step it belongs to.
pub(crate) fn kube(step: &'static str) -> impl FnOnce(kube::Error) -> Error {
    move |e| Error::Kube(step, e)
}

/// Not found counts as done (cleanup steps).
pub(crate) fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> Error {
        Error::Kube(
            "apply HelmChart",
            kube::Error::Api(kube::core::Status::failure("refused", "Refused").with_code(code).boxed()),
        )
    }

    #[test]
    fn what_is_retried_and_how_it_is_counted() {
        for (code, permanent, kind) in [
            (400, true, "rejected"),
            (401, false, "unauthorized"),
            (403, false, "forbidden"),
            (404, false, "not_found"),
            (409, false, "conflict"),
            (422, true, "rejected"),
            (429, false, "throttled"),
            (500, false, "server_error"),
            (503, false, "server_error"),
        ] {
            assert_eq!(api(code).is_permanent(), permanent, "{code}");
            assert_eq!(api(code).kind(), kind, "{code}");
        }
        assert!(!Error::NotYet("uninstalling").is_permanent());
        let late = Error::TimedOut("the host did not answer in time");
        assert!(!late.is_permanent());
        assert_eq!(late.kind(), "timed_out");
        let taken = Error::Taken("namespace kubebyon-db".into());
        assert!(taken.is_permanent());
        assert_eq!(taken.kind(), "taken");
        assert_eq!(taken.status_reason().to_string(), "namespace_taken: namespace kubebyon-db");
        assert_eq!(api(422).status_reason().to_string(), "host_refused: apply HelmChart: refused");
    }
}
