// The same flows in Chinese, and with JavaScript disabled.
import { expect } from '@playwright/test';
import { test, t, signIn, hydrated, unique, shot, accessible, newPage, chooseAccess, ADMIN_PASSWORD, USER_PASSWORD, navLink } from './helpers';

test('create flow in Chinese', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(page.locator('html')).toHaveAttribute('lang', 'zh-CN');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(t('zh-CN', 'clusters.title'));
  await shot(page, 'clusters-list-zh');

  await navLink(page, 'zh-CN', 'app.nav_new_cluster').click();
  await hydrated(page);
  const name = unique('zh');
  await page.getByLabel(t('zh-CN', 'form.name')).fill(name);
  await chooseAccess(page, 'zh-CN', 'loadbalancer', '');
  await page.getByRole('button', { name: t('zh-CN', 'form.create_submit') }).click();
  await expect(page.locator('#control_plane_host-error')).toHaveText(t('zh-CN', 'errors.host_required_for_load_balancer'));
  await shot(page, 'cluster-new-error-zh');
  await accessible(page);
  await page.getByLabel(t('zh-CN', 'form.host')).fill('zh.example.com');
  await page.getByRole('button', { name: t('zh-CN', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await expect(page.locator('[data-field=mode]')).toHaveText(t('zh-CN', 'mode.loadbalancer'));
  await expect(page.getByTestId('waiting')).toHaveText(t('zh-CN', 'detail.waiting_for_host'));
  await shot(page, 'cluster-detail-zh');
  for (const p of ['/admin/settings', '/admin/users', '/clusters/new']) {
    await page.goto(p);
    await shot(page, `page${p.replaceAll('/', '-')}-zh`);
  }
  // Back to English for the other tests' browser contexts is not needed: cookies are per context.
});

test('Accept-Language picks Chinese before any choice is made', async ({ browser }) => {
  const page = await newPage(browser, { lang: 'zh-CN' });
  await page.goto('/login');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(t('zh-CN', 'login.title'));
  await shot(page, 'login-zh');
  await accessible(page);
});

test('create and edit with JavaScript disabled', async ({ browser }) => {
  const page = await newPage(browser, { js: false });
  await signIn(page, 'admin', ADMIN_PASSWORD, false);
  await page.goto('/clusters/new');
  // The host field's visibility follows the radios through CSS alone.
  await page.getByLabel(t('en', 'form.public_access_enabled')).uncheck();
  await expect(page.getByLabel(t('en', 'form.host'))).toBeHidden();
  await page.getByLabel(t('en', 'form.public_access_enabled')).check();
  await expect(page.getByLabel(t('en', 'form.host'))).toBeVisible();

  const name = unique('nojs');
  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'loadbalancer', '');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  // The server redirected back with the error; the page shows it translated.
  await expect(page).toHaveURL(/\/clusters\/new\?/);
  await expect(page.locator('#control_plane_host-error')).toHaveText(t('en', 'errors.host_required_for_load_balancer'));
  await shot(page, 'cluster-new-error-nojs');
  // What was typed came back: the name, LoadBalancer still chosen (its hint shown, not NodePort's).
  await expect(page.getByLabel(t('en', 'form.name'))).toHaveValue(name);
  await expect(page.locator('#public_access_mode_loadbalancer')).toBeChecked();
  await expect(page.getByText(t('en', 'form.host_hint_loadbalancer'))).toBeVisible();
  await expect(page.locator('[data-san=required]')).toBeVisible();
  await expect(page.locator('[data-san=required]')).toHaveText(t('en', 'form.sans_host_required'));

  // With a host it is created.
  const host = `${name}.example.com`;
  await chooseAccess(page, 'en', 'loadbalancer', host);
  await page.getByLabel(t('en', 'form.cpu')).fill('3');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', 'loadbalancer');
  const detail = page.url();

  // Same host for a second cluster: refused (host_in_use), everything typed kept.
  await page.goto('/clusters/new');
  const second = unique('nojs');
  await page.getByLabel(t('en', 'form.name')).fill(second);
  await page.getByLabel(t('en', 'form.memory')).fill('3');
  await chooseAccess(page, 'en', 'loadbalancer', host);
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page.locator('#control_plane_host-error')).toHaveText(t('en', 'errors.host_in_use'));
  await expect(page.getByLabel(t('en', 'form.name'))).toHaveValue(second);
  await expect(page.getByLabel(t('en', 'form.memory'))).toHaveValue('3');
  await expect(page.getByLabel(t('en', 'form.host'))).toHaveValue(host);
  await expect(page.locator('#public_access_mode_loadbalancer')).toBeChecked();
  // The planned certificate names are rendered for what was typed.
  await expect(page.locator('[data-san=public]')).toBeVisible();
  await expect(page.locator('[data-san=public] code')).toHaveText(host);

  // A refused edit keeps what was typed too.
  await page.goto(`${detail}/edit`);
  await page.getByLabel(t('en', 'form.cpu')).fill('2.5');
  await chooseAccess(page, 'en', 'loadbalancer', 'http://not-a-host');
  await page.getByRole('button', { name: t('en', 'form.save_submit') }).click();
  await expect(page.locator('#control_plane_host-error')).toHaveText(t('en', 'errors.host_invalid'));
  await expect(page.getByLabel(t('en', 'form.cpu'))).toHaveValue('2.5');
  await expect(page.getByLabel(t('en', 'form.host'))).toHaveValue('http://not-a-host');
  await expect(page.locator('[data-san=invalid]')).toBeVisible();
  await expect(page.locator('[data-san=invalid]')).toHaveText(t('en', 'form.sans_host_invalid'));

  await page.goto(`${detail}/edit`);
  await chooseAccess(page, 'en', 'nodeport', '');
  await page.getByRole('button', { name: t('en', 'form.save_submit') }).click();
  await expect(page).toHaveURL(new RegExp(`${detail}$`));
  await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', 'nodeport');
  await expect(page.locator('[data-field=port]')).toHaveCount(1);

  await page.goto(`${detail}/edit`);
  await chooseAccess(page, 'en', 'off');
  await page.getByRole('button', { name: t('en', 'form.save_submit') }).click();
  await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', 'disabled');
  await shot(page, 'cluster-detail-nojs');

  // Delete needs the typed name; a wrong one is refused, translated.
  await page.getByLabel(t('en', 'detail.delete_confirm')).fill('wrong');
  await page.getByRole('button', { name: t('en', 'detail.delete_submit') }).click();
  await expect(page.locator('#confirm-error')).toHaveText(t('en', 'errors.confirmation_mismatch'));
  await page.getByLabel(t('en', 'detail.delete_confirm')).fill(name);
  await page.getByRole('button', { name: t('en', 'detail.delete_submit') }).click();
  await expect(page.getByTestId('waiting')).toHaveText(t('en', 'detail.deletion_requested'));
});

test('users page with JavaScript disabled: a refused row post shows its error in that row', async ({ browser }) => {
  const page = await newPage(browser, { js: false });
  await signIn(page, 'admin', ADMIN_PASSWORD, false);
  const name = unique('rowerr');
  await page.goto('/admin/users');
  // A refused create keeps the username and role, never the password.
  await page.getByLabel(t('en', 'users.username')).fill(name);
  await page.getByLabel(t('en', 'users.password'), { exact: true }).fill('short');
  await page.locator('#role').selectOption('admin');
  await page.getByRole('button', { name: t('en', 'users.create_submit') }).click();
  await expect(page.locator('#password-error')).toHaveText(t('en', 'errors.password_too_short'));
  await expect(page.getByLabel(t('en', 'users.username'))).toHaveValue(name);
  await expect(page.locator('#role')).toHaveValue('admin');
  await expect(page.getByLabel(t('en', 'users.password'), { exact: true })).toHaveValue('');
  expect(page.url()).not.toContain('short');
  await page.locator('#role').selectOption('user');
  await page.getByLabel(t('en', 'users.password'), { exact: true }).fill(USER_PASSWORD);
  await page.getByRole('button', { name: t('en', 'users.create_submit') }).click();
  const row = page.locator(`tr[data-user="${name}"]`);
  await expect(row).toBeVisible();

  // Too short a new password: the error shows in this user's row only.
  await row.getByLabel(t('en', 'users.new_password', { username: name })).fill('short');
  await row.getByRole('button', { name: t('en', 'users.reset_submit') }).click();
  await expect(page.locator(`tr[data-user="${name}"] [data-error-code=password_too_short]`)).toHaveText(
    t('en', 'errors.password_too_short'),
  );
  await expect(page.locator('tr[data-user="admin"] [data-error-code]')).toHaveCount(0);
  await expect(page.getByRole('status')).toHaveCount(0);
  expect(page.url()).not.toContain('short');
  await shot(page, 'admin-users-row-error-nojs');
});
