//! The frame every island form shares: an `ActionForm` that posts to its
//! server function (a plain HTML form without JavaScript), marks itself
//! hydrated, skips browser validation (the server's translated errors are the
//! ones users see) and shows a form-wide error on top.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::web_sys::FormData;
use serde::de::DeserializeOwned;
use server_fn::client::Client;
use server_fn::codec::PostUrl;
use server_fn::request::ClientReq;
use server_fn::{Http, ServerFn};

use super::error_text::FormError;
use super::hydration::hydration_flag;
use crate::domain::AppError;

#[component]
pub(crate) fn IslandForm<S, O>(
    action: ServerAction<S>,
    /// `data-form`, for tests and styling.
    name: &'static str,
    #[prop(into)] error: Signal<Option<AppError>>,
    #[prop(default = "form")] class: &'static str,
    children: Children,
) -> impl IntoView
where
    S: DeserializeOwned + ServerFn<Protocol = Http<PostUrl, O>, Error = AppError> + Clone + Send + Sync + 'static,
    <<S::Client as Client<AppError>>::Request as ClientReq<AppError>>::FormData: From<FormData>,
    S::Output: Send + Sync + 'static,
    S::Client: Client<AppError>,
{
    let hydrated = hydration_flag();
    view! {
        <ActionForm action attr:data-hydrated=hydrated attr:class=class attr:novalidate=true attr:data-form=name>
            <FormError error />
            {children()}
        </ActionForm>
    }
}
