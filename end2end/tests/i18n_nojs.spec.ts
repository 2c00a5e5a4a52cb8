// The same flows in Chinese, and with JavaScript disabled.
import { test, expect } from '@playwright/test';
import { t, signIn, hydrated, unique, shot, accessible, newPage, chooseAccess, ADMIN_PASSWORD , navLink } from './helpers';

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

  await page.getByLabel(t('en', 'form.name')).fill(name);
  await chooseAccess(page, 'en', 'loadbalancer', 'nojs.example.com');
  await page.getByRole('button', { name: t('en', 'form.create_submit') }).click();
  await expect(page).toHaveURL(/\/clusters\/\d+$/);
  await expect(page.locator('[data-field=mode]')).toHaveAttribute('data-mode', 'loadbalancer');
  const detail = page.url();

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
