//! A labelled text input with its hint and error, wired for screen readers.

use leptos::prelude::*;

use super::error_text::FieldError;
use crate::domain::{AppError, Field};

#[component]
pub(crate) fn TextField(
    field: Field,
    label: &'static str,
    #[prop(optional)] hint: Option<&'static str>,
    #[prop(into)] value: String,
    #[prop(into)] error: Signal<Option<AppError>>,
    #[prop(default = "text")] input_type: &'static str,
    #[prop(optional)] autocomplete: Option<&'static str>,
    #[prop(optional)] inputmode: Option<&'static str>,
    #[prop(optional)] required: bool,
    #[prop(optional)] readonly: bool,
    #[prop(optional, into)] class: String,
) -> impl IntoView {
    let id = field.as_str();
    let hint_id = format!("{id}-hint");
    let invalid = move || error.get().is_some_and(|e| e.field == Some(field));
    let described = {
        let hint_id = hint_id.clone();
        move || {
            let mut ids = Vec::new();
            if hint.is_some() {
                ids.push(hint_id.clone());
            }
            if invalid() {
                ids.push(format!("{id}-error"));
            }
            ids.join(" ")
        }
    };
    view! {
        <div class=format!("field {class}")>
            <label for=id class="field-label">
                {label}
            </label>
            <input
                id=id
                name=id
                type=input_type
                value=value
                class="field-input"
                autocomplete=autocomplete
                inputmode=inputmode
                required=required
                readonly=readonly
                aria-invalid=move || invalid().to_string()
                aria-describedby=described
            />
            {hint
                .map(|h| {
                    view! {
                        <p id=hint_id class="field-hint">
                            {h}
                        </p>
                    }
                })}
            <FieldError field error />
        </div>
    }
}

/// A monospace `<textarea>` of one entry per line (annotations, egress
/// rules), with its label, hint and error, as [`TextField`] has them.
#[component]
pub(crate) fn TextAreaField(
    field: Field,
    label: &'static str,
    hint: &'static str,
    #[prop(into)] value: String,
    #[prop(into)] error: Signal<Option<AppError>>,
    #[prop(default = 4)] rows: u8,
    #[prop(optional)] placeholder: Option<&'static str>,
) -> impl IntoView {
    let id = field.as_str();
    let hint_id = format!("{id}-hint");
    let invalid = move || error.get().is_some_and(|e| e.field == Some(field));
    view! {
        <div class="field">
            <label for=id class="field-label">
                {label}
            </label>
            <textarea
                id=id
                name=id
                rows=rows
                class="field-input font-mono"
                spellcheck="false"
                placeholder=placeholder
                aria-invalid=move || invalid().to_string()
                aria-describedby=hint_id.clone()
            >
                {value}
            </textarea>
            <p id=hint_id class="field-hint">
                {hint}
            </p>
            <FieldError field error />
        </div>
    }
}

/// The `<option>`s of a `<select>` over `choices`: each one's value is
/// `value(c)` and its text `label(c)`; the one equal to `selected` is marked.
pub(crate) fn options<T: Copy + PartialEq + 'static>(
    choices: impl IntoIterator<Item = T>,
    selected: Option<T>,
    value: fn(T) -> &'static str,
    label: impl Fn(T) -> &'static str,
) -> impl IntoView {
    choices
        .into_iter()
        .map(|c| {
            view! {
                <option value=value(c) selected=selected == Some(c)>
                    {label(c)}
                </option>
            }
        })
        .collect_view()
}

/// A check box with its label and hint (posted as `on` when checked), as the
/// create form's own-nodes and public-access switches show it.
#[component]
pub(crate) fn CheckField(id: &'static str, label: &'static str, hint: &'static str, checked: bool) -> impl IntoView {
    let hint_id = format!("{id}-hint");
    view! {
        <div class="check">
            <input type="checkbox" id=id name=id value="on" checked=checked aria-describedby=hint_id.clone() />
            <label for=id>{label}</label>
        </div>
        <p id=hint_id class="field-hint">
            {hint}
        </p>
    }
}
