// Shared helpers: translations from locales/*.json (tests assert with locale
// keys, never copied text), sign-in, users, screenshots and axe checks.
import { test as base, expect, type Page, type APIRequestContext, type Browser } from '@playwright/test';
import AxeBuilder from '@axe-core/playwright';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '..', '..');

// Content-Security-Policy violations Chromium reports on any page a test opens.
const cspViolations: string[] = [];
function watchCsp(page: Page) {
  page.on('console', (m) => {
    if (process.env.DEBUG_CONSOLE) console.log('CONSOLE', m.type(), m.text());
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(`${page.url()}: ${m.text()}`);
  });
  if (process.env.DEBUG_CONSOLE) page.on('request', (r) => console.log('REQ', r.method(), r.url()));
}

/** Playwright's `test`, failing any test during which a page broke the console's CSP. */
export const test = base.extend<{ noCspViolations: void }>({
  noCspViolations: [
    async ({ page }, use) => {
      cspViolations.length = 0;
      watchCsp(page);
      await use();
      expect(cspViolations, 'Content-Security-Policy violations').toEqual([]);
    },
    { auto: true },
  ],
});
const locales: Record<string, any> = {};

/** The text of `key` (e.g. "errors.name_invalid") in `locale`, with {{ vars }} filled. */
export function t(locale: string, key: string, vars: Record<string, string> = {}): string {
  locales[locale] ??= JSON.parse(fs.readFileSync(path.join(root, 'locales', `${locale}.json`), 'utf8'));
  let v: any = locales[locale];
  for (const part of key.split('.')) v = v?.[part];
  if (typeof v !== 'string') throw new Error(`no ${key} in ${locale}`);
  return v.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name) => vars[name] ?? '');
}

export const ADMIN_PASSWORD = process.env.KUBEBYON_ADMIN_PASSWORD ?? 'e2e-admin-password';
export const USER_PASSWORD = 'user-password-123';

let counter = 0;
/** A cluster or user name unique to this run. */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${Date.now().toString(36)}-${counter}`;
}

/** Waits until every form island on the page has hydrated (data-hydrated flips to "true"). */
export async function hydrated(page: Page) {
  await expect(page.locator('form[data-hydrated]').first()).toBeAttached();
  await expect(page.locator('form[data-hydrated="false"]')).toHaveCount(0);
}

export async function signIn(page: Page, username: string, password: string, js = true) {
  await page.goto('/login');
  if (js) await hydrated(page);
  await page.getByLabel(t('en', 'login.username')).fill(username);
  await page.getByLabel(t('en', 'login.password')).fill(password);
  await page.getByRole('button', { name: t('en', 'login.submit') }).click();
  await expect(page).toHaveURL(/\/clusters$/);
  await expect(page.getByTestId('current-user')).toHaveText(username);
}

/** Creates a user through the admin's server function (as a same-origin form post). */
export async function createUser(request: APIRequestContext, baseURL: string, username: string, role = 'user') {
  const login = await request.post('/api/auth/login', { data: { username: 'admin', password: ADMIN_PASSWORD } });
  expect(login.ok()).toBeTruthy();
  const res = await request.post('/fn/users/create', {
    form: { username, password: USER_PASSWORD, role },
    headers: { origin: baseURL },
    maxRedirects: 0,
  });
  expect(res.status(), await res.text()).toBeLessThan(400);
}

/** A fresh browser context with its own cookies; JavaScript on or off. */
export async function newPage(browser: Browser, opts: { js?: boolean; lang?: string; baseURL?: string } = {}) {
  const context = await browser.newContext({
    javaScriptEnabled: opts.js ?? true,
    locale: opts.lang ?? 'en-US',
    ...(opts.baseURL ? { baseURL: opts.baseURL } : {}),
  });
  const page = await context.newPage();
  watchCsp(page);
  return page;
}

/** Saves a full-page screenshot as a test artefact (end2end/artifacts/). */
export async function shot(page: Page, name: string) {
  // Leave the focused field first: in Chromium, a full-page screenshot taken
  // while a text field has focus swallowed the next click on the page (seen
  // with the create form's submit button; a click elsewhere, or no
  // screenshot, and it submits).
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  await page.screenshot({ path: path.join(__dirname, '..', 'artifacts', `${name}.png`), fullPage: true });
}

/** axe-core: no serious or critical violations on the page as it is now. */
export async function accessible(page: Page) {
  const results = await new AxeBuilder({ page }).analyze();
  const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)).toEqual([]);
}

/** Fills the cluster form's public access part. */
export async function chooseAccess(
  page: Page,
  locale: string,
  mode: 'off' | 'nodeport' | 'loadbalancer' | 'gateway',
  host = '',
) {
  const enabled = page.getByLabel(t(locale, 'form.public_access_enabled'));
  if (mode === 'off') {
    await enabled.uncheck();
    return;
  }
  await enabled.check();
  await page.locator(`#public_access_mode_${mode}`).check();
  await page.getByLabel(t(locale, 'form.host')).fill(host);
}

/** Two new users, and the first signed in (JavaScript on) with a NodePort
 * cluster just created; its page's path. */
export async function ownerWithCluster(browser: Browser, request: APIRequestContext, baseURL: string, name: string) {
  const [owner, other] = [unique('ann'), unique('ben')];
  await createUser(request, baseURL, owner);
  await createUser(request, baseURL, other);
  const page = await newPage(browser);
  await signIn(page, owner, USER_PASSWORD);
  await page.goto('/clusters/new');
  await hydrated(page);
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'nodeport', '');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  return { owner, other, page, cluster: new URL(page.url()).pathname };
}

/** A link in the main navigation (the page body may repeat it). */
export function navLink(page: Page, locale: string, key: string) {
  return page.getByRole('navigation', { name: t(locale, 'app.nav_label') }).getByRole('link', { name: t(locale, key) });
}
