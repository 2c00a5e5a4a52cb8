-- OpenID Connect sign-ins under way live in the browser (issue 55): the
-- nonce, PKCE verifier, `state` and return path sealed (ChaCha20-Poly1305)
-- into the state cookie, so an anonymous `GET /auth/oidc/start` writes
-- nothing. Only a finished sign-in's `state` is remembered (its hash), to
-- refuse the callback replayed; swept by housekeeping once the cookie it
-- came in has expired.
DROP TABLE oidc_logins;
CREATE TABLE oidc_spent (
    state_hash TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
CREATE INDEX oidc_spent_created_at ON oidc_spent (created_at);
-- The console's own secret keys, one per purpose, made at first use by
-- whichever replica comes first (the others read it): hex.
CREATE TABLE console_keys (
    purpose TEXT PRIMARY KEY,
    secret TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
-- Console admins hold no standing binding inside tenants' clusters (issue
-- 55): a console admin who is neither owner nor member is bound as admin
-- only while a kubeconfig they downloaded lasts, a grant per cluster and
-- admin until `expires_at` (demoted or disabled, it binds nothing).
CREATE TABLE admin_grants (
    cluster_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (cluster_id, user_id)
);
CREATE INDEX admin_grants_expires_at ON admin_grants (expires_at);
-- A cluster whose access bindings the console could not bring in step with
-- its members (issue 55): the host's words and since when. Its page says
-- "access out of step"; the row goes at the first repair that lands.
CREATE TABLE access_out_of_step (
    cluster_id BIGINT PRIMARY KEY,
    reason TEXT NOT NULL,
    since BIGINT NOT NULL
);
