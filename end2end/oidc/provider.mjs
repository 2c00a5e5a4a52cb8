// The browser tests' OpenID provider (issue 42): `oidc-provider` (an OpenID
// Certified implementation, from npm) on loopback, with its development
// sign-in form (any login name; the password is not checked). Started by
// scripts/test.sh before the console that trusts it; stopped by PID.
//
// Accounts: the login name is the subject and `preferred_username`; its
// groups come from GROUPS. Claims go into the ID token (what the console
// reads), not only the userinfo endpoint.
//
// Two test hooks on the same port, under /_test/ (loopback only):
// - POST /_test/tamper?mode=audience|expired|nonce|signature: the next ID
//   token the token endpoint returns is re-signed with that one thing wrong
//   (a real provider never issues such a token; this is the "small test
//   proxy" of the issue, inside the provider's own server). `signature`:
//   signed by a key the provider never published, under the real key's id.
// - POST /_test/rotate: a new signing key (new `kid`) replaces the old one;
//   the console must fetch the keys again to accept the next token.
// - GET /_test/stats: how often the keys were fetched.
//
// Usage: node provider.mjs <port> <console redirect URI> (client secret in
// OIDC_CLIENT_SECRET). Prints "ready" when it listens.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';
import * as jose from 'jose';

const [port, redirectUri] = [Number(process.argv[2]), process.argv[3]];
const clientSecret = process.env.OIDC_CLIENT_SECRET;
if (!port || !redirectUri || !clientSecret) {
  console.error('usage: OIDC_CLIENT_SECRET=… node provider.mjs <port> <redirect uri>');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

// The console's team prefix is `kubebyon-team:` (scripts/test.sh): Ada's
// group names the team; Ben's bare `e2e-team` must not.
const GROUPS = {
  ada: ['platform-admins', 'kubebyon-team:e2e-team'],
  ben: ['e2e-team'],
};

async function newKey() {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  return { ...(await jose.exportJWK(privateKey)), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

let key = await newKey();
let tamper = null;
let jwksFetches = 0;

/** The ID token `token` with one thing wrong, signed as `mode` says. */
async function spoil(token, mode) {
  const claims = jose.decodeJwt(token);
  const now = Math.floor(Date.now() / 1000);
  if (mode === 'audience') claims.aud = 'another-application';
  if (mode === 'expired') Object.assign(claims, { iat: now - 7200, exp: now - 3600 });
  if (mode === 'nonce') claims.nonce = 'not-this-sign-in';
  const signer = mode === 'signature' ? await newKey() : key;
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid })
    .sign(await jose.importJWK(signer, 'RS256'));
}

function build() {
  const provider = new Provider(issuer, {
    clients: [{
      client_id: 'kubebyon',
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: [key] },
    scopes: ['openid', 'profile', 'email', 'groups'],
    claims: { openid: ['sub'], profile: ['preferred_username'], email: ['email'], groups: ['groups'] },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    findAccount: (_ctx, id) => ({
      accountId: id,
      claims: () => ({ sub: id, preferred_username: id, email: `${id}@example.com`, groups: GROUPS[id] ?? [] }),
    }),
    // A first-party client: no consent screen.
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope('openid profile email groups');
      await grant.save();
      return grant;
    },
  });
  provider.use(async (ctx, next) => {
    if (ctx.path === '/jwks') jwksFetches += 1;
    await next();
    if (ctx.path === '/token' && ctx.status === 200 && tamper && ctx.body?.id_token) {
      ctx.body = { ...ctx.body, id_token: await spoil(ctx.body.id_token, tamper) };
      tamper = null;
    }
  });
  return provider;
}

let provider = build();

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  const answer = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (url.pathname === '/_test/tamper' && req.method === 'POST') {
    tamper = url.searchParams.get('mode');
    return answer(200, { tamper });
  }
  if (url.pathname === '/_test/rotate' && req.method === 'POST') {
    key = await newKey();
    provider = build();
    return answer(200, { kid: key.kid });
  }
  if (url.pathname === '/_test/stats') return answer(200, { jwksFetches, kid: key.kid });
  return provider.callback()(req, res);
});
server.listen(port, '127.0.0.1', () => console.log('ready'));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
