// Sign-in with the organisation's OpenID provider (issue 42) in Chromium,
// against a real provider run by scripts/test.sh (end2end/oidc/provider.mjs:
// the npm package oidc-provider on loopback; the console trusts it with the
// admin group `platform-admins`). Bad ID tokens are made by the provider's
// test hook, which re-signs the next one with one thing wrong.
import { expect, type APIRequestContext, type Page } from '@playwright/test';
import { test, t, newPage, shot, accessible, navLink, signIn, hydrated, ADMIN_PASSWORD } from './helpers';

const OIDC = process.env.KUBEBYON_OIDC_URL ?? '';
test.skip(!OIDC, 'needs the test OpenID provider (scripts/test.sh starts it)');

/** From the console's sign-in page through the provider's form, as `login`. */
async function organisationSignIn(page: Page, locale: string, login: string, before?: () => Promise<void>) {
  await page.goto('/login');
  await page.getByRole('link', { name: t(locale, 'login.organisation') }).click();
  await expect(page).toHaveURL(new RegExp(`^${OIDC}/interaction/`));
  await before?.();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('not checked by the test provider');
  await page.locator('button[type="submit"]').click();
}

async function hook(request: APIRequestContext, path: string) {
  const res = await request.post(`${OIDC}/_test/${path}`);
  expect(res.ok(), await res.text()).toBeTruthy();
}

async function jwksFetches(request: APIRequestContext): Promise<number> {
  return (await (await request.get(`${OIDC}/_test/stats`)).json()).jwksFetches;
}

test('the first sign-in makes the account; the admin group makes an admin, prefixed groups make teams; sign-out ends the session', async ({ browser, request }) => {
  // The admin made the team `e2e-team`: Ada's group `kubebyon-team:e2e-team`
  // names it (the console's prefix); Ben's bare `e2e-team` does not.
  expect((await request.post('/api/auth/login', { data: { username: 'admin', password: ADMIN_PASSWORD } })).ok()).toBeTruthy();
  const team = await request.post('/api/admin/teams', { data: { name: 'e2e-team' } });
  expect([201, 409], await team.text()).toContain(team.status());

  const page = await newPage(browser);
  await page.goto('/login');
  await expect(page.getByText(t('en', 'login.or_password'))).toBeVisible();
  await shot(page, 'login-organisation-en');
  await accessible(page);
  await organisationSignIn(page, 'en', 'ada');
  await expect(page).toHaveURL(/\/clusters$/);
  await expect(page.getByTestId('current-user')).toHaveText('ada');
  // In the admin group: a console admin, in the team her groups name.
  await expect(navLink(page, 'en', 'app.nav_users')).toBeVisible();
  await page.goto('/admin/users');
  const ada = page.locator('tr[data-user="ada"]');
  await expect(ada).toContainText(t('en', 'users.sign_in_organisation'));
  await expect(ada).toContainText(t('en', 'app.role_admin'));
  await page.goto('/admin/teams');
  await expect(page.locator('tr[data-team="e2e-team"]')).toContainText('ada');
  await expect(page.getByTestId('teams-provider')).toHaveText(t('en', 'teams.provider_intro', { prefix: 'kubebyon-team:' }));
  await expect(page.locator('tr[data-team="e2e-team"] [data-provider-group]')).toHaveText('kubebyon-team:e2e-team');
  await shot(page, 'teams-provider-en');

  // Sign-out ends the console's session.
  await page.getByRole('button', { name: t('en', 'app.sign_out') }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto('/clusters');
  await expect(page).toHaveURL(/\/login\?next=/);

  // Ben, in Chinese without JavaScript: signs in, no admin.
  const ben = await newPage(browser, { js: false });
  await ben.goto('/lang/zh-CN');
  await organisationSignIn(ben, 'zh-CN', 'ben');
  await expect(ben).toHaveURL(/\/clusters$/);
  await expect(ben.getByTestId('current-user')).toHaveText('ben');
  expect((await ben.goto('/admin/users'))?.status()).toBe(403);
  const teams = await (await request.get('/api/admin/teams')).json();
  expect(teams.find((t: any) => t.name === 'e2e-team').members, 'a bare group names no team').toEqual(['ada']);

  // An admin disables Ben: his session ends, and the provider's word no
  // longer lets him in.
  const admin = await newPage(browser);
  await signIn(admin, 'admin', ADMIN_PASSWORD);
  await admin.goto('/admin/users');
  await hydrated(admin);
  await admin.getByRole('button', { name: t('en', 'users.disable_for', { username: 'ben' }), exact: true }).click();
  const benRow = admin.locator('tr[data-user="ben"]');
  await expect(benRow).toHaveAttribute('data-disabled', 'true');
  await expect(benRow.getByText(t('en', 'users.disabled'))).toBeVisible();
  await expect(benRow.getByRole('button', { name: t('en', 'users.enable_for', { username: 'ben' }), exact: true })).toBeVisible();
  await shot(admin, 'users-disabled-en');
  await accessible(admin);
  await ben.goto('/clusters');
  await expect(ben).toHaveURL(/\/login\?next=/);
  const benAgain = await newPage(browser, { js: false });
  await benAgain.goto('/lang/zh-CN');
  await organisationSignIn(benAgain, 'zh-CN', 'ben');
  await expect(benAgain.locator('[data-error-code="account_disabled"]')).toHaveText(t('zh-CN', 'errors.account_disabled'));
});

test('bad ID tokens and a replayed state are refused with their reason; a rotated key is picked up', async ({ browser, request, baseURL }) => {
  for (const [mode, code, locale, js] of [
    ['audience', 'oidc_token_audience', 'en', true],
    ['expired', 'oidc_token_expired', 'zh-CN', false],
    ['nonce', 'oidc_token_nonce', 'en', true],
    ['signature', 'oidc_token_signature', 'en', true],
  ] as const) {
    const page = await newPage(browser, { js });
    if (locale !== 'en') await page.goto(`/lang/${locale}`);
    await organisationSignIn(page, locale, 'cyd', () => hook(request, `tamper?mode=${mode}`));
    await expect(page).toHaveURL(/\/login\?__path=%2Fauth%2Foidc/);
    await expect(page.locator(`[data-error-code="${code}"]`)).toHaveText(t(locale, `errors.${code}`));
    if (mode === 'expired') await shot(page, 'oidc-expired-zh');
    await page.goto('/clusters');
    await expect(page, `${mode}: no session`).toHaveURL(/\/login\?next=/);
    await page.context().close();
  }

  // A sign-in that went through; its callback replayed (its sealed state
  // cookie put back, so only the spent state can refuse it).
  const page = await newPage(browser);
  let callback = '';
  let sealed = '';
  page.on('request', async (r) => {
    if (!r.url().includes('/auth/oidc/callback')) return;
    callback = r.url();
    sealed = /kubebyon_oidc_state=([^;]+)/.exec((await r.allHeaders())['cookie'] ?? '')?.[1] ?? '';
  });
  await organisationSignIn(page, 'en', 'cyd');
  await expect(page).toHaveURL(/\/clusters$/);
  await page.getByRole('button', { name: t('en', 'app.sign_out') }).click();
  const state = new URL(callback).searchParams.get('state')!;
  expect(sealed, 'the state cookie is sealed, not the state').not.toContain(state);
  expect(sealed.length).toBeGreaterThan(100);
  await page.context().addCookies([{ name: 'kubebyon_oidc_state', value: sealed, url: `${baseURL}/auth/oidc/` }]);
  await page.goto(callback);
  await expect(page.locator('[data-error-code="oidc_state_invalid"]')).toHaveText(t('en', 'errors.oidc_state_invalid'));
  await expect(page.getByTestId('current-user')).toHaveCount(0);
  await page.context().close();

  // The provider rotates its signing key: the console fetches the keys
  // again on the unknown key id, and the sign-in goes through.
  const before = await jwksFetches(request);
  await hook(request, 'rotate');
  const rotated = await newPage(browser);
  await organisationSignIn(rotated, 'en', 'cyd');
  await expect(rotated).toHaveURL(/\/clusters$/);
  await expect(rotated.getByTestId('current-user')).toHaveText('cyd');
  expect(await jwksFetches(request)).toBeGreaterThan(before);

  // Each refused token is in the audit log with its reason and the client
  // (a spent or foreign state is not: anyone can send one).
  expect((await request.post('/api/auth/login', { data: { username: 'admin', password: ADMIN_PASSWORD } })).ok()).toBeTruthy();
  const log = await (await request.get('/api/admin/audit')).json();
  const refused = log.filter((e: any) => e.action === 'sign_in_failed' && e.target === 'oidc').map((e: any) => e.detail);
  for (const code of ['oidc_token_audience', 'oidc_token_expired', 'oidc_token_nonce', 'oidc_token_signature']) {
    expect(refused.join('\n')).toContain(`OpenID Connect: ${code};`);
  }
  expect(refused.join('\n')).not.toContain('oidc_state_invalid');
});

test('e-mail-shaped names (Entra ID, Okta) sign in by their local part; another address with that local part is refused in words', async ({ browser }) => {
  // Entra ID's preferred_username is the UPN, Okta's the login: e-mail addresses.
  const page = await newPage(browser);
  await organisationSignIn(page, 'en', 'Grace.Hopper@contoso.example');
  await expect(page).toHaveURL(/\/clusters$/);
  await expect(page.getByTestId('current-user')).toHaveText('grace.hopper');
  await page.context().close();
  // Another organisation account whose address shares the local part: not
  // let into grace.hopper's account, not renamed behind anyone's back.
  for (const [locale, js] of [['en', true], ['zh-CN', false]] as const) {
    const other = await newPage(browser, { js });
    if (locale !== 'en') await other.goto(`/lang/${locale}`);
    await organisationSignIn(other, locale, 'grace.hopper@fabrikam.example');
    await expect(other).toHaveURL(/\/login\?__path=%2Fauth%2Foidc/);
    await expect(other.locator('[data-error-code="oidc_username_taken"]')).toHaveText(t(locale, 'errors.oidc_username_taken'));
    await other.goto('/clusters');
    await expect(other).toHaveURL(/\/login\?next=/);
    await other.context().close();
  }
});
