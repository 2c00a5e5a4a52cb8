//! One file per page. Pages render on the server only (islands mode); they
//! load data through server functions and hand forms to islands.

pub(crate) mod admin_audit;
pub(crate) mod admin_moves;
pub(crate) mod admin_settings;
pub(crate) mod admin_teams;
pub(crate) mod admin_users;
pub(crate) mod cluster_detail;
pub(crate) mod cluster_edit;
pub(crate) mod cluster_join;
pub(crate) mod cluster_new;
pub(crate) mod clusters;
pub(crate) mod login;
pub(crate) mod problem;

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use server_fn::error::ServerFnUrlError;

use crate::domain::AppError;

/// The error a JavaScript-free post of the server function at `fn_path`
/// (its `ServerFn::PATH`) left in the URL.
pub(crate) fn url_error(fn_path: &str) -> Option<AppError> {
    let query = use_query_map().get_untracked();
    let (path, err) = (query.get("__path")?, query.get("__err")?);
    (path == fn_path).then(|| ServerFnUrlError::<AppError>::decode_err(&err))
}

/// The query of the page a refused plain post of `fn_path` landed on (it
/// carries what was typed; see `server::context::keep_input_on_error`).
pub(crate) fn retyped(fn_path: &str) -> Option<leptos_router::params::ParamsMap> {
    let query = use_query_map().get_untracked();
    (query.get("__path").as_deref() == Some(fn_path)).then_some(query)
}

/// "Saved." when the URL carries `saved=1` (where a successful admin post lands).
#[component]
pub(crate) fn SavedBanner() -> impl IntoView {
    let i18n = crate::i18n::use_i18n();
    // Not beside an error: a refused post without JavaScript lands back on a
    // URL that may still carry `saved=1` from the previous success.
    let query = use_query_map().get_untracked();
    let saved = query.get("saved").is_some_and(|v| v == "1") && query.get("__err").is_none();
    saved.then(|| {
        view! {
            <p class="banner banner-ok" role="status">
                {crate::i18n::t!(i18n, app.saved)}
            </p>
        }
    })
}

/// A cluster id from the route; anything unparsable is a missing cluster.
pub(crate) fn route_id() -> Option<i64> {
    leptos_router::hooks::use_params_map().get_untracked().get("id").and_then(|id| id.parse().ok())
}
