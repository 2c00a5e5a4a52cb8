// Cluster flows with JavaScript on (after hydration): sign in, the
// LoadBalancer host rule, listing, and editing across all three states.
import { expect } from '@playwright/test';
import { test, t, signIn, hydrated, unique, shot, accessible, chooseAccess, ADMIN_PASSWORD , navLink } from './helpers';

test('sign in, create a LoadBalancer cluster, edit it through every state', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await shot(page, 'clusters-list-en');
  await accessible(page);

  const name = unique('lb');
  await navLink(page, 'en', 'app.nav_new_cluster').click();
  await hydrated(page);
  await shot(page, 'cluster-new-en');
  await accessible(page);
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'loadbalancer', '');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();

  // Translated error next to the host field, in place (no navigation), nothing stored.
  const error = page.locator('#control_plane_host-error');
  await expect(error).toHaveText(t('en', 'errors.host_required_for_load_balancer'));
  await expect(page.getByLabel(t('en', 'form.host'))).toHaveAttribute('aria-invalid', 'true');
  await expect(page).toHaveURL(/\/clusters\/new$/);
  await shot(page, 'cluster-new-error-en');
  const list = await page.request.get('/api/console/clusters');
  expect((await list.json()).map((c: any) => c.spec.name)).not.toContain(name);

  // With a host: created, shown as LoadBalancer and waiting for the host cluster.
  await page.getByLabel(t('en', 'form.host')).fill('api.example.com');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await expect(page.locator('[data-field=mode]')).toHaveText(t('en', 'mode.loadbalancer'));
  await expect(page.locator('[data-field=host]')).toHaveText('api.example.com');
  await expect(page.locator('[data-field=port]')).toHaveCount(0);
  await expect(page.getByTestId('waiting')).toHaveText(t('en', 'detail.waiting_for_host'));
  await expect(page.getByRole('button', { name: t('en', 'detail.kubeconfig_download') })).toBeDisabled();
  await shot(page, 'cluster-detail-en');
  await accessible(page);
  const detailUrl = page.url();

  await page.goto('/clusters');
  const row = page.locator(`tr[data-cluster="${name}"]`);
  await expect(row.locator('td[data-mode]')).toHaveAttribute('data-mode', 'loadbalancer');
  await expect(row).toContainText(t('en', 'mode.loadbalancer'));

  // Edit: LoadBalancer -> NodePort -> off -> LoadBalancer.
  const steps: Array<['off' | 'nodeport' | 'loadbalancer', string, string]> = [
    ['nodeport', '', 'nodeport'],
    ['off', '', 'disabled'],
    ['loadbalancer', 'vip.example.com', 'loadbalancer'],
  ];
  for (const [mode, host, shown] of steps) {
    await page.goto(`${detailUrl}/edit`);
    await hydrated(page);
    await chooseAccess(page, 'en', mode, host);
    await page.getByRole('button', { name: t('en', 'form.save_submit') }).click();
    await expect(page).toHaveURL(new RegExp(`${detailUrl}$`));
    await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', shown);
    await expect(page.locator('[data-field=port]')).toHaveCount(mode === 'nodeport' ? 1 : 0);
  }
  await page.goto(`${detailUrl}/edit`);
  await shot(page, 'cluster-edit-en');
  await accessible(page);
  await page.goto(detailUrl);
  await expect(page.locator('[data-testid=events] tbody tr')).toHaveCount(4);
  await expect(page.locator('[data-testid=events] tbody tr').first()).toContainText(t('en', 'detail.event_update'));
});

test('keyboard only: sign-in form and create form are usable without a mouse', async ({ page }) => {
  await page.goto('/login');
  await hydrated(page);
  // The skip link comes first, then the page's own controls.
  await page.keyboard.press('Tab');
  await expect(page.getByRole('link', { name: t('en', 'app.skip_to_content') })).toBeFocused();
  await page.getByLabel(t('en', 'login.username')).focus();
  await page.keyboard.type('admin');
  await page.keyboard.press('Tab');
  await expect(page.getByLabel(t('en', 'login.password'))).toBeFocused();
  await page.keyboard.type(ADMIN_PASSWORD);
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(/\/clusters$/);

  await page.goto('/clusters/new');
  await hydrated(page);
  await page.getByLabel(t('en', 'form.name')).focus();
  await page.keyboard.type(unique('kb'));
  // Tab through resources to the public access switch, and on to the mode radios.
  for (let i = 0; i < 4; i++) await page.keyboard.press('Tab');
  await expect(page.getByLabel(t('en', 'form.public_access_enabled'))).toBeFocused();
  await page.keyboard.press('Tab');
  await page.keyboard.press('ArrowDown');
  await expect(page.locator('#public_access_mode_loadbalancer')).toBeChecked();
  await page.keyboard.press('Tab');
  await expect(page.getByLabel(t('en', 'form.host'))).toBeFocused();
  await page.keyboard.type('kb.example.com');
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', 'loadbalancer');
});

test('the audit log shows who changed the settings, in English and Chinese', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  // Saving the settings page (JavaScript on; saved as they are, so tests
  // running beside this one see the same settings) is recorded.
  await page.goto('/admin/settings');
  await hydrated(page);
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.getByRole('status')).toBeVisible();
  await navLink(page, 'en', 'app.nav_audit').click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(t('en', 'audit.title'));
  const row = page.locator('tr[data-audit="settings_changed"]').first();
  await expect(row).toContainText('admin');
  await expect(row).toContainText(t('en', 'audit.settings_changed'));
  await shot(page, 'admin-audit-en');
  await accessible(page);
  await page.goto('/lang/zh-CN');
  await page.goto('/admin/audit');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(t('zh-CN', 'audit.title'));
  await expect(page.locator('tr[data-audit="settings_changed"]').first()).toContainText(t('zh-CN', 'audit.settings_changed'));
  await shot(page, 'admin-audit-zh');
  await page.goto('/lang/en');
});
