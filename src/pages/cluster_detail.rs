//! `/clusters/{id}`: everything about one cluster (the live island), and deletion.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use server_fn::ServerFn;

use super::problem::problem_view;
use super::{retyped, route_id, url_error};
use crate::actions::clusters::{DeleteCluster, ProbeCluster, load_cluster};
use crate::actions::members::{PutMember, RemoveMember, TransferCluster};
use crate::components::cluster_overview::Overview;
use crate::components::islands::delete_form::DeleteClusterForm;
use crate::components::islands::live_region::{LiveBound, LiveRegion, REGION_ID};
use crate::components::layout::Layout;
use crate::components::members::{MembersSection, Typed};
use crate::domain::cluster::ProbeOutcome;
use crate::domain::membership::{MemberKind, MemberRole};
use crate::domain::{AppError, ConnectionStatus, ErrorCode};
use crate::i18n::*;

/// Names the machines joined as the cluster's nodes, which a deletion (or,
/// `on_delete` false, an endpoint change) cuts off; nothing when there are none.
#[component]
pub(crate) fn JoinedNodesWarning(names: Vec<String>, on_delete: bool) -> impl IntoView {
    let i18n = use_i18n();
    (!names.is_empty()).then(|| {
        let names = names.join(", ");
        let text = if on_delete {
            t_string!(i18n, join.nodes_on_delete, names = names.clone()).to_string()
        } else {
            t_string!(i18n, join.nodes_cut_off, names = names.clone()).to_string()
        };
        view! {
            <p class="banner" role="alert" data-testid="joined-nodes-warning">
                {text}
            </p>
        }
    })
}

#[component]
pub(crate) fn ClusterDetailPage() -> impl IntoView {
    let i18n = use_i18n();
    // A connection test posted without JavaScript lands here with its
    // outcome's status (a fixed set; no text from the URL is shown).
    let query = use_query_map().get_untracked();
    let probed = query.get("probe").map(|s| ProbeOutcome { status: ConnectionStatus::parse(&s), detail: None });
    // A download refused lands here with its code (`server::http::api::clusters`).
    let download_error = query.get(crate::domain::cluster::DOWNLOAD_ERROR).and_then(|c| ErrorCode::parse(&c));
    // An older page of the request history (`?before=<request id>`).
    let before = query.get("before").and_then(|b| b.parse::<i64>().ok());
    let content = Suspend::new(async move {
        let page = match route_id() {
            Some(id) => load_cluster(id, before).await,
            None => Err(AppError::new(ErrorCode::NotFound)),
        };
        match page {
            Ok(page) => {
                let id = page.cluster.id;
                // A failed deletion may be asked for again.
                let deleting = page.cluster.deleting();
                let joined = page.joined_nodes.clone();
                let typed = retyped(PutMember::PATH)
                    .map(|q| Typed {
                        kind: q.get("member_kind").and_then(|k| MemberKind::parse(&k).ok()),
                        name: q.get("member").unwrap_or_default(),
                        role: q.get("member_role").and_then(|r| MemberRole::parse(&r).ok()),
                    })
                    .unwrap_or_default();
                // Console admins move clusters to another owner.
                let admin = crate::actions::auth::session_now().ok().and_then(|s| s.user).is_some_and(|u| u.is_admin());
                let transfer = (admin && !deleting).then(|| {
                    let typed = retyped(TransferCluster::PATH).and_then(|q| q.get("owner")).unwrap_or_default();
                    (typed, url_error(TransferCluster::PATH))
                });
                let members = view! {
                    <MembersSection
                        id
                        owner=page.cluster.owner.clone()
                        members=page.members.clone()
                        manage=page.allowed.manage_members
                        your_role=page.access.role()
                        typed
                        put_error=url_error(PutMember::PATH)
                        remove_error=url_error(RemoveMember::PATH)
                        transfer
                    />
                };
                let deletable = !deleting && page.allowed.delete;
                let out_of_step = page.access_out_of_step.clone();
                view! {
                    <Title text=page.cluster.spec.name.to_string() />
                    <LiveRegion region=REGION_ID.to_owned()>
                        <LiveBound />
                        <Overview page probed=probed.clone() probe_error=url_error(ProbeCluster::PATH) download_error />
                    </LiveRegion>
                    {out_of_step
                        .map(|words| {
                            view! {
                                <section class="card">
                                    <div class="banner" role="alert" data-testid="access-out-of-step">
                                        <p>{t!(i18n, detail.access_out_of_step)}</p>
                                        <p class="font-mono text-sm break-words">{words}</p>
                                        <p>{t!(i18n, detail.access_retry)}</p>
                                    </div>
                                </section>
                            }
                        })}
                    {members}
                    {deletable
                        .then(|| {
                            view! {
                                <section class="card danger-zone">
                                    <h2 class="section-title">{t!(i18n, detail.delete_title)}</h2>
                                    <JoinedNodesWarning names=joined.clone() on_delete=true />
                                    <DeleteClusterForm id url_error=url_error(DeleteCluster::PATH) />
                                </section>
                            }
                        })}
                }
                .into_any()
            }
            Err(e) => problem_view(e),
        }
    });
    view! {
        <Layout>
            <Suspense fallback=|| ()>{content}</Suspense>
        </Layout>
    }
}
