// The detail page against a real host (scripts/test.sh starts a simulated k3s
// host — real kube-apiserver + etcd, hostsim — and a second console connected
// to it): progress arrives without a reload, the downloaded kubeconfig works
// with kubectl, mode switches show up live, the same with JavaScript off, and
// a failing install shows helm's own words.
import { expect, type Page } from '@playwright/test';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  test,
  t,
  signIn,
  hydrated,
  unique,
  shot,
  accessible,
  chooseAccess,
  newPage,
  createUser,
  ADMIN_PASSWORD,
  USER_PASSWORD,
} from './helpers';

const url = process.env.KUBEBYON_HOST_CONSOLE_URL;
const lbPrefix = process.env.KUBEBYON_HOST_NET; // e.g. 127.12.34 (the host's /24)
if (!url || !lbPrefix) {
  throw new Error('KUBEBYON_HOST_CONSOLE_URL and KUBEBYON_HOST_NET are set by scripts/test.sh');
}
const nodeHost = `${lbPrefix}.1`;
// The test host's binary: its `join` is a simulated machine running the join command.
const hostsimBin = process.env.KUBEBYON_HOSTSIM_BIN ?? 'hostsim';
const READY = 90_000;

test.use({ baseURL: url });
test.describe.configure({ mode: 'serial', timeout: 240_000 });

/** kubectl with a kubeconfig file: `get ns` must list `default`. */
function kubectlGetNs(file: string): string {
  return execFileSync('kubectl', ['--kubeconfig', file, '--request-timeout=10s', 'get', 'ns'], { encoding: 'utf8' });
}

/**
 * Clicks the download button and returns the saved file's path. Right after a
 * switch restarts the control plane, its controller-manager may not sign a
 * certificate yet: the console then goes back to the cluster's page, which
 * says so (`credential_not_signed`: "Try again in a minute"), and this tries
 * again as a user would, for as long as Ready may take, printing what the page
 * said; with JavaScript, it marks the document it is back on.
 */
async function downloadKubeconfig(page: Page, js = true): Promise<string> {
  const back = page.url();
  let said = '';
  for (const deadline = Date.now() + READY; Date.now() < deadline; ) {
    const download = page.waitForEvent('download', { timeout: 60_000 });
    // (Not waitForURL: a download aborts the navigation, which rejects it.)
    const refused = page
      .waitForEvent('framenavigated', {
        predicate: (f) => f === page.mainFrame() && /[?&]download_error=/.test(f.url()),
        timeout: 60_000,
      })
      .then(() => null);
    await page.getByTestId('kubeconfig').click();
    const got = await Promise.race([download, refused]);
    download.catch(() => {});
    refused.catch(() => {});
    if (got) {
      const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kubebyon-e2e-')), 'kubeconfig');
      await got.saveAs(file);
      return file;
    }
    said = await page.getByTestId('download-error').innerText();
    console.log(`no kubeconfig yet, the page said: ${said}`);
    await page.waitForTimeout(3000);
    await page.goto(back);
    if (js) {
      await hydrated(page);
      await mark(page);
    }
  }
  throw new Error(`no kubeconfig within ${READY} ms; the page said: ${said}`);
}

/** Marks the document; the mark is gone if the page reloads or navigates. */
async function mark(page: Page) {
  await page.evaluate(() => ((window as any).__sameDocument = true));
}
async function expectSameDocument(page: Page) {
  expect(await page.evaluate(() => (window as any).__sameDocument === true)).toBe(true);
}

/** Edits public access; `oldEndpoint`: the form must warn that kubeconfigs naming it stop working. */
async function editAccess(
  page: Page,
  detailUrl: string,
  mode: 'off' | 'nodeport' | 'loadbalancer',
  host = '',
  oldEndpoint?: string,
) {
  await page.goto(`${detailUrl}/edit`);
  await hydrated(page);
  const warning = page.locator('[data-breaks-kubeconfigs]');
  if (oldEndpoint) await expect(warning).toBeHidden();
  await chooseAccess(page, 'en', mode, host);
  if (oldEndpoint) {
    await expect(warning).toBeVisible();
    await expect(warning).toHaveText(t('en', 'form.sans_breaks', { endpoint: oldEndpoint }));
  }
  await page.getByRole('button', { name: t('en', 'form.save_submit') }).click();
  await expect(page).toHaveURL(new RegExp(`${detailUrl}$`));
  await hydrated(page);
  await expect(page.getByTestId('live')).toHaveAttribute('data-live', 'true');
  await mark(page);
}

async function setNodePortHost(page: Page) {
  await page.goto('/admin/settings');
  await hydrated(page);
  await page.getByLabel(t('en', 'settings.nodeport_host')).fill(nodeHost);
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.getByRole('status').first()).toBeVisible();
}

test('LoadBalancer cluster: Ready without a reload, kubeconfig works, switches show live', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await setNodePortHost(page);
  // The settings page says what it found on the host.
  await page.goto('/admin/settings');
  await expect(page.locator('#load_balancer_address_request-detected')).toHaveAttribute('data-detected', 'metallb');

  const name = unique('e2e-live');
  const lbIp = `${lbPrefix}.210`;
  await page.goto('/clusters/new');
  await hydrated(page);
  await page.getByLabel(t('en', 'form.name')).fill(name);
  // The planned certificate names follow the form as it is filled in.
  const san = (line: string) => page.locator(`[data-san=${line}]`);
  await expect(san('public').locator('code')).toHaveText(nodeHost);
  await expect(san('node')).toBeVisible();
  await chooseAccess(page, 'en', 'loadbalancer', 'bad host');
  await expect(san('invalid')).toBeVisible();
  await expect(san('invalid')).toHaveText(t('en', 'form.sans_host_invalid'));
  await expect(san('public')).toBeHidden();
  await chooseAccess(page, 'en', 'loadbalancer', lbIp);
  await expect(san('public')).toBeVisible();
  await expect(san('public').locator('code')).toHaveText(lbIp);
  await expect(san('lb')).toBeVisible();
  await expect(san('node')).toBeHidden();
  await expect(page.locator('[data-planned-sans] [data-ns-name]')).toHaveText(`${name}.kubebyon-${name}`);
  await shot(page, 'create-planned-sans-en');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  const detailUrl = page.url();
  await hydrated(page);
  await expect(page.getByTestId('live')).toHaveAttribute('data-live', 'true');
  await mark(page);

  // Progress as it happens, then Ready — all in this same document.
  await expect(page.locator('.progress')).toBeVisible();
  await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: READY });
  await expectSameDocument(page);
  await expect(page.locator('.progress')).toHaveAttribute('data-step', 'ready');
  await expect(page.locator('[data-field=endpoint]')).toHaveText(`https://${lbIp}:443`);
  await expect(page.locator('[data-field=port]')).toHaveCount(0);
  await expect(page.locator('#cluster-live')).toHaveAttribute('data-in-progress', 'false');
  await shot(page, 'live-ready-en');
  await accessible(page);

  const file = await downloadKubeconfig(page);
  expect(kubectlGetNs(file)).toContain('default');

  // Test connection: the server probes with this kubeconfig and shows the outcome.
  await page.getByRole('button', { name: t('en', 'detail.test_connection') }).click();
  // Only the status travels in the URL: a page shows no text a link wrote.
  await expect(page).toHaveURL(/\?probe=ok$/);
  await expect(page.getByTestId('probe-outcome')).toHaveAttribute('data-status', 'ok');
  await expect(page.getByTestId('probe-outcome')).toContainText(t('en', 'connection.ok'));

  // The same page in Chinese.
  await page.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(page.locator('html')).toHaveAttribute('lang', 'zh-CN');
  await expect(page.locator('[data-field=connection]')).toHaveText(t('zh-CN', 'connection.ok'));
  await expect(page.locator('.progress')).toContainText(t('zh-CN', 'detail.step_ready'));
  await shot(page, 'live-ready-zh');
  await accessible(page);
  await page.getByRole('link', { name: t('zh-CN', 'languages.en') }).click();
  await expect(page.locator('html')).toHaveAttribute('lang', 'en');

  // → NodePort: the port appears live, the new kubeconfig works.
  await editAccess(page, detailUrl, 'nodeport', '', `https://${lbIp}:443`);
  await expect(page.locator('[data-field=port]')).toHaveText(/^\d{5}$/, { timeout: READY });
  await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: READY });
  await expectSameDocument(page);
  const port = await page.locator('[data-field=port]').textContent();
  await expect(page.locator('[data-field=endpoint]')).toHaveText(`https://${nodeHost}:${port}`);
  expect(kubectlGetNs(await downloadKubeconfig(page))).toContain('default');
  // The LoadBalancer kubeconfig no longer reaches it.
  expect(() => kubectlGetNs(file)).toThrow();

  // → off: endpoint and download disappear.
  await editAccess(page, detailUrl, 'off', '', `https://${nodeHost}:${port}`);
  await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: READY });
  await expect(page.locator('[data-field=endpoint]')).toHaveText(t('en', 'app.none'));
  await expect(page.getByTestId('kubeconfig')).toBeDisabled();
  await expectSameDocument(page);
});

test('NodePort cluster with JavaScript off: complete on each reload, kubeconfig works', async ({ browser }) => {
  const page = await newPage(browser, { js: false });
  await signIn(page, 'admin', ADMIN_PASSWORD, false);
  const name = unique('e2e-nojs');
  await page.goto('/clusters/new');
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'nodeport');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await expect(async () => {
    await page.reload();
    await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: 1000 });
  }).toPass({ timeout: READY, intervals: [1000] });
  await expect(page.locator('[data-field=port]')).toHaveText(/^\d{5}$/);
  await expect(page.locator('.progress')).toHaveAttribute('data-step', 'ready');
  const file = await downloadKubeconfig(page, false);
  expect(kubectlGetNs(file)).toContain('default');
  // A refused download lands back here and says why, in the reader's
  // language; only a known code is shown, never text from the URL.
  const detail = page.url();
  await page.goto(`${detail}?download_error=credential_not_signed`);
  await expect(page.getByTestId('download-error')).toHaveText(t('en', 'errors.credential_not_signed'));
  await page.goto(`${detail}?download_error=%3Cb%3Eyou+were+hacked%3C%2Fb%3E`);
  await expect(page.getByTestId('download-error')).toHaveCount(0);
  await page.goto(detail);
  // Test connection posts the form and lands back with the outcome.
  await page.getByRole('button', { name: t('en', 'detail.test_connection') }).click();
  await expect(page).toHaveURL(/\?probe=ok/);
  await expect(page.getByTestId('probe-outcome')).toHaveAttribute('data-status', 'ok');
  await shot(page, 'live-nojs-en');
});

test('a failing install shows helm\'s own words, and recovers', async ({ page }) => {
  test.setTimeout(8 * 60_000);
  await signIn(page, 'admin', ADMIN_PASSWORD);
  // A chart version the repository does not have: helm fails, in its words.
  const setVersion = async (version: string) => {
    await page.goto('/admin/settings');
    await hydrated(page);
    await page.getByLabel(t('en', 'settings.chart_version')).fill(version);
    await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
    await expect(page.getByRole('status').first()).toBeVisible();
  };
  await setVersion('0.29.0');
  const name = unique('broken');
  await page.goto('/clusters/new');
  await hydrated(page);
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'off');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  const detailUrl = page.url();
  await hydrated(page);
  await mark(page);
  await expect(page.locator('[data-field=reason]')).toContainText('0.29.0', { timeout: READY });
  await expect(page.locator('[data-field=reason]')).toContainText('Error:');
  await expectSameDocument(page);
  await shot(page, 'live-helm-failed-en');
  await setVersion('0.30.0');
  await page.goto(detailUrl);
  // As on k3s: helm-controller replaces the failing Job only once its pod has
  // terminated ("wait for pods to terminate before replace, requeuing"), and
  // klipper-helm ignores SIGTERM for the pod's 30 s grace period; its requeue
  // back-off grows meanwhile. Measured on the upstream test host: ~2 min.
  await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: 4 * READY });
});

test('join page: a token, the command copied and fetched, revoked; others get 404; JavaScript off too', async ({
  page,
  browser,
  context,
  request,
}) => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/settings');
  await hydrated(page);
  // In the operator's namespace (KUBEBYON_PLATFORM_KEY_NAMESPACE, `kubebyon-platform-key` by default).
  const keyNamespace = 'kubebyon-platform-key';
  const keyName = unique('vcluster-key');
  const key = `${keyNamespace}/${keyName}`;
  await page.getByLabel(t('en', 'settings.private_nodes')).selectOption('on');
  await page.getByLabel(t('en', 'settings.platform_api_key')).fill(key);
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.getByRole('status').first()).toBeVisible();
  // The settings page says the host lacks the key's Secret: the chart makes a
  // Role in its namespace, and helm fails while that namespace is missing
  // (the cluster then says so and is never Ready: tests/reconciler.rs).
  await page.goto('/admin/settings');
  const keyFact = page.locator(`[data-platform-key="${key}"]`);
  await expect(keyFact).toHaveAttribute('data-found', 'false');
  await expect(keyFact).toContainText(t('en', 'settings.platform_key_missing'));
  await shot(page, 'settings-platform-key-missing-en');
  // Made where an admin keeps it, the page finds it.
  hostKubectl(['apply', '-f', '-'], JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: keyNamespace } },
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: keyName, namespace: keyNamespace },
        stringData: { accessKey: 'e2e-platform-access-key' },
      },
    ],
  }));
  await page.reload();
  await expect(keyFact).toHaveAttribute('data-found', 'true');
  await expect(keyFact).toContainText(t('en', 'settings.platform_key_found'));

  // Its own API server on the test host (scripts/test.sh: `e2e-join*`).
  const name = unique('e2e-join');
  const lbIp = `${lbPrefix}.225`;
  await page.goto('/clusters/new');
  await hydrated(page);
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'loadbalancer', lbIp);
  await page.getByLabel(t('en', 'form.own_nodes')).check();
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  const detailUrl = page.url();
  await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: READY });
  await page.getByTestId('add-nodes').click();
  await expect(page).toHaveURL(`${detailUrl}/join`);
  const joinUrl = page.url();
  await expect(page.getByTestId('live')).toHaveAttribute('data-live', 'true');
  await expect(page.locator('[data-field=join-endpoint]')).toHaveText(`${lbIp}:443`);
  await expect(page.getByText(t('en', 'join.tokens_empty'))).toBeVisible();
  await expect(page.getByText(t('en', 'join.nodes_empty'))).toBeVisible();

  // A token: the command is shown once, copied, and fetches the script.
  await page.getByLabel(t('en', 'join.lifetime')).selectOption('1h');
  await page.getByRole('button', { name: t('en', 'join.create') }).click();
  const command = page.getByTestId('join-command');
  await expect(command).toContainText(`/api/join/clusters/`);
  const text = (await command.textContent())!.trim();
  const m = text.match(/^curl -fsSL "(http[^"]+\/script\?token=(([a-z0-9]{6})\.[a-z0-9]{16}))" \| sh -$/);
  expect(m, text).not.toBeNull();
  const [, scriptUrl, token, tokenId] = m!;
  expect(scriptUrl.startsWith(url!)).toBe(true);
  await expect(page.locator(`tr[data-token="${tokenId}"]`)).toBeVisible();
  await expect(page.locator(`tr[data-token="${tokenId}"] [data-field=expires]`)).toContainText(/in 0 h 59 min|in 1 h 0 min/);
  await page.getByRole('button', { name: t('en', 'join.copy_command') }).click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(text);
  await shot(page, 'join-token-en');
  await accessible(page);
  const script = await request.get(scriptUrl);
  expect(script.status()).toBe(200);
  expect(script.headers()['content-type']).toBe('text/x-shellscript');
  const body = await script.text();
  expect(body).toContain(`ENDPOINT='${lbIp}:443'`);
  expect(body).toContain(`TOKEN='${token}'`);
  expect(body).toMatch(/CA_CERT_HASH='sha256:[0-9a-f]{64}'/);
  // Shown once: a reload shows the token's id, never the command again.
  await page.reload();
  await expect(page.getByTestId('join-command')).toHaveCount(0);
  await expect(page.locator(`tr[data-token="${tokenId}"]`)).toBeVisible();
  expect(await page.content()).not.toContain(token);

  // A machine runs the command (hostsim's simulated machine: it fetches the
  // script through the console and follows it) and appears without a reload.
  const machine = spawn(hostsimBin, ['join', '--url', scriptUrl, '--name', 'e2e-node-1', '--ip', '10.9.0.11',
    '--connect', `${lbIp}:443`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let machineLog = '';
  machine.stdout.on('data', (d) => (machineLog += d));
  machine.stderr.on('data', (d) => (machineLog += d));
  try {
    await mark(page);
    const row = page.locator('tr[data-node="e2e-node-1"]');
    await expect(row, machineLog).toBeVisible({ timeout: 90_000 });
    // Ready once the CNI the cluster deploys runs on it (until then: not Ready).
    await expect(row.locator('[data-field=ready]')).toHaveText(t('en', 'join.yes'), { timeout: 60_000 });
    await expect(row).toContainText('v1.36.3');
    await expect(row).toContainText('10.9.0.11');
    await expectSameDocument(page);
    await expect(page.getByText('| sh -s -- --reset-only')).toBeVisible();
    await shot(page, 'join-node-en');
    // Deleting the cluster would cut the machine off: its page says so.
    await page.goto(detailUrl);
    await expect(page.getByTestId('joined-nodes-warning')).toContainText('e2e-node-1');
    await page.goto(joinUrl);
    // Removed in the background (cordoned, drained, deleted inside the
    // cluster): the Removals table says how far, then the node is gone.
    await page.getByRole('button', { name: t('en', 'join.remove_label', { name: 'e2e-node-1' }) }).click();
    await expect(page).toHaveURL(joinUrl);
    const removal = page.locator('tr[data-removal="e2e-node-1"]');
    await expect(removal).toBeVisible();
    await expect(removal).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
    await expect(removal.locator('[data-field=removal-progress]')).toHaveText(t('en', 'join.removal_done'));
    await expect(page.locator('tr[data-node="e2e-node-1"]')).toHaveCount(0);
    await shot(page, 'join-removed-en');
  } finally {
    machine.kill();
  }

  // The same page in Chinese.
  await page.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(page.locator('html')).toHaveAttribute('lang', 'zh-CN');
  await expect(page.getByRole('heading', { name: t('zh-CN', 'join.title') })).toBeVisible();
  await shot(page, 'join-token-zh');
  await page.getByRole('link', { name: t('zh-CN', 'languages.en') }).click();

  // Revoked: gone from the page; its script is 404.
  await page.getByRole('button', { name: t('en', 'join.revoke_label', { id: tokenId }) }).click();
  await expect(page).toHaveURL(joinUrl);
  await expect(page.locator(`tr[data-token="${tokenId}"]`)).toHaveCount(0);
  expect((await request.get(scriptUrl)).status()).toBe(404);
  // Nothing in progress any more (no fresh token, no node joining, no
  // removal running): the page stops refreshing itself.
  await expect(page.locator('#join-live')).toHaveAttribute('data-in-progress', 'false');

  // Another user: not found.
  await createUser(request, url!, 'join-stranger');
  const other = await newPage(browser, { baseURL: url });
  await signIn(other, 'join-stranger', USER_PASSWORD);
  const res = await other.goto(joinUrl);
  expect(res!.status()).toBe(404);
  await other.context().close();

  // JavaScript off: the command after a plain post.
  const nojs = await newPage(browser, { js: false, baseURL: url });
  await signIn(nojs, 'admin', ADMIN_PASSWORD, false);
  await nojs.goto(joinUrl);
  await nojs.getByRole('button', { name: t('en', 'join.create') }).click();
  await expect(nojs).toHaveURL(joinUrl);
  await expect(nojs.getByTestId('join-command')).toContainText('/script?token=');
  await shot(nojs, 'join-token-nojs');
  await nojs.context().close();
});

/** kubectl against the test host itself (its admin kubeconfig). */
function hostKubectl(args: string[], input?: string): string {
  const kc = process.env.KUBEBYON_HOST_KUBECONFIG;
  if (!kc) throw new Error('KUBEBYON_HOST_KUBECONFIG is set by scripts/test.sh');
  return execFileSync('kubectl', ['--kubeconfig', kc, ...args], { encoding: 'utf8', input });
}

test('gateway access: the settings page shows the Gateway, the suffix fills the host, Ready by name; en, zh-CN, JavaScript off', async ({
  page,
  browser,
}) => {
  // The platform's Gateway, as an operator installs it (the test host's Gateway API mirror serves it).
  const gwIp = `${lbPrefix}.228`;
  hostKubectl(['apply', '-f', '-'], JSON.stringify({
    apiVersion: 'v1', kind: 'List', items: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'e2e-gateway' } },
      {
        apiVersion: 'gateway.networking.k8s.io/v1', kind: 'Gateway',
        metadata: { name: 'shared', namespace: 'e2e-gateway' },
        spec: {
          gatewayClassName: 'hostsim',
          addresses: [{ type: 'IPAddress', value: gwIp }],
          listeners: [{
            name: 'tls', port: 443, protocol: 'TLS', hostname: '*.e2e.test', tls: { mode: 'Passthrough' },
            allowedRoutes: { namespaces: { from: 'Selector', selector: { matchLabels: { 'app.kubernetes.io/managed-by': 'kubebyon' } } } },
          }],
        },
      },
    ],
  }));

  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/settings');
  await hydrated(page);
  await page.getByLabel(t('en', 'settings.gateway')).fill('e2e-gateway/shared');
  await page.getByLabel(t('en', 'settings.gateway_listener')).fill('tls');
  await page.getByLabel(t('en', 'settings.gateway_domain_suffix')).fill('e2e.test');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.getByRole('status').first()).toBeVisible();
  // What the console found on the host: the Gateway API versions, the Gateway, its usable listener and address.
  await page.goto('/admin/settings');
  await expect(page.locator('[data-route-version]')).toHaveText('v1');
  const gw = page.locator('[data-gateway="e2e-gateway/shared"]');
  await expect(gw.locator('[data-gateway-address]')).toHaveText(gwIp, { timeout: 30_000 });
  await expect(gw.locator('[data-listener=tls]')).toHaveAttribute('data-usable', 'true');
  await expect(page.locator('[data-storage-class=local-path]')).toContainText(t('en', 'settings.storage_default'));
  await shot(page, 'settings-gateway-en');
  await accessible(page);
  await page.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(page.locator('html')).toHaveAttribute('lang', 'zh-CN');
  await expect(page.getByText(t('zh-CN', 'settings.gateway_title')).first()).toBeVisible();
  await expect(gw.locator('[data-listener=tls]')).toContainText(t('zh-CN', 'settings.gateway_usable'));
  await shot(page, 'settings-gateway-zh');
  await page.getByRole('link', { name: t('zh-CN', 'languages.en') }).click();

  // Create, the host left empty: the suffix fills it, the planned names say so as it is typed.
  const name = unique('gw');
  await page.goto('/clusters/new');
  await hydrated(page);
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'gateway', '');
  await expect(page.locator('#control_plane_host-hint-gw')).toHaveText(t('en', 'form.host_hint_gateway_suffix', { suffix: 'e2e.test' }));
  const san = (line: string) => page.locator(`[data-san=${line}]`);
  await expect(san('public').locator('code')).toHaveText(`${name}.e2e.test`);
  await expect(san('lb')).toBeHidden();
  await expect(san('node')).toBeHidden();
  await chooseAccess(page, 'en', 'gateway', '203.0.113.5');
  await expect(san('invalid')).toBeVisible();
  await chooseAccess(page, 'en', 'gateway', '');
  await shot(page, 'create-gateway-en');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await hydrated(page);
  await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: READY });
  await expect(page.locator('[data-field=endpoint]')).toHaveText(`https://${name}.e2e.test:443`);
  await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', 'gateway');
  await expect(page.locator('[data-field=dns]')).toHaveText(`${name}.e2e.test → ${gwIp}`);
  await shot(page, 'gateway-ready-en');
  await accessible(page);

  // An IP is refused with the translated reason (the server's rule, JavaScript off), in Chinese.
  const nojs = await newPage(browser, { js: false });
  await signIn(nojs, 'admin', ADMIN_PASSWORD, false);
  await nojs.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(nojs.locator('html')).toHaveAttribute('lang', 'zh-CN');
  await nojs.goto('/clusters/new');
  const other = unique('gwz');
  await nojs.getByLabel(t('zh-CN', 'form.name')).fill(other);
  await chooseAccess(nojs, 'zh-CN', 'gateway', '203.0.113.5');
  await nojs.getByRole('button', { name: t('zh-CN', 'form.create_submit') }).click();
  await expect(nojs.locator('#control_plane_host-error')).toHaveText(t('zh-CN', 'errors.gateway_host_not_dns'));
  await shot(nojs, 'create-gateway-refused-nojs-zh');
  await chooseAccess(nojs, 'zh-CN', 'gateway', '');
  await nojs.getByRole('button', { name: t('zh-CN', 'form.create_submit') }).click();
  await expect(nojs).toHaveURL(/\/clusters\/\d+$/);
  await expect(nojs.locator('[data-field=host]')).toHaveText(`${other}.e2e.test`);
  await expect(async () => {
    await nojs.reload();
    await expect(nojs.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: 1000 });
  }).toPass({ timeout: READY, intervals: [1000] });
  await expect(nojs.locator('[data-field=dns]')).toHaveText(`${other}.e2e.test → ${gwIp}`);
  await shot(nojs, 'gateway-ready-nojs-zh');
});

/** A proxy that holds every answer until it is complete (as a buffering
 * reverse proxy does with small chunks): an event stream never arrives. */
async function bufferingProxy(target: string): Promise<{ url: string; streams: () => number; close: () => void }> {
  const http = await import('node:http');
  const upstream = new URL(target);
  let streams = 0;
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/events/')) streams += 1;
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
      (up) => {
        const chunks: Buffer[] = [];
        up.on('data', (c: Buffer) => chunks.push(c));
        up.on('end', () => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          res.end(Buffer.concat(chunks));
        });
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    streams: () => streams,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

test('behind a proxy that buffers event streams the detail page still updates, by polling', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  const proxy = await bufferingProxy(url!);
  try {
    const name = unique('buffered');
    const created = await page.request.post(`${proxy.url}/api/console/clusters`, {
      headers: { origin: proxy.url },
      data: { name, resources: { cpu: '1', memory_gib: 1, storage_gib: 5 }, public_access: { enabled: false } },
    });
    expect(created.status()).toBe(201);
    const id = (await created.json()).id;
    await page.goto(`${proxy.url}/clusters/${id}`);
    await expect(page.getByTestId('live')).toHaveAttribute('data-live', 'true');
    await expect(page.locator('#cluster-live')).toHaveAttribute('data-stream', `/events/clusters/${id}`);
    await mark(page);
    // The stream was asked for and never arrived; the page polled instead.
    await expect(page.locator('[data-phase]').first()).toHaveAttribute('data-phase', 'ready', { timeout: READY });
    await expectSameDocument(page);
    expect(proxy.streams()).toBeGreaterThan(0);
  } finally {
    proxy.close();
  }
});
