// Who may see what: the admin default mode, admin-only pages, and another
// user's cluster.
import { expect } from '@playwright/test';
import { test, t, signIn, hydrated, unique, shot, accessible, newPage, chooseAccess, ADMIN_PASSWORD, USER_PASSWORD , navLink, ownerWithCluster } from './helpers';

test('admin sets the default to LoadBalancer and the create form preselects it', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await navLink(page, 'en', 'app.nav_settings').click();
  await hydrated(page);
  await expect(page.getByText(t('en', 'settings.lb_note'))).toBeVisible();
  await shot(page, 'admin-settings-en');
  await accessible(page);

  // Bad input first: translated error, nothing saved.
  await page.getByLabel(t('en', 'settings.lb_class')).fill('not a class!');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.locator('#load_balancer_class-error')).toHaveText(t('en', 'errors.load_balancer_class_invalid'));

  await page.getByLabel(t('en', 'settings.lb_class')).fill('metallb.io/metallb');
  await page.locator('#default_mode_loadbalancer').check();
  await page.getByLabel(t('en', 'settings.annotations')).fill('metallb.io/address-pool: public');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  // Saved, with how many clusters the change re-renders (none here: no LB cluster has an IP host).
  await expect(page.getByRole('status')).toHaveText(t('en', 'settings.rerendered', { n: '0' }));
  await expect(page.locator('#default_mode_loadbalancer')).toBeChecked();

  await page.goto('/clusters/new');
  await expect(page.locator('#public_access_mode_loadbalancer')).toBeChecked();
  await expect(page.getByText(t('en', 'form.default_mode_note'))).toBeVisible();
  // The LoadBalancer hint is shown, the NodePort one hidden (CSS :has).
  await expect(page.getByText(t('en', 'form.host_hint_loadbalancer'))).toBeVisible();
  await expect(page.getByText(t('en', 'form.host_hint_nodeport'))).toBeHidden();

  // Back to NodePort so other tests start from the product default.
  await page.goto('/admin/settings');
  await hydrated(page);
  await page.locator('#default_mode_nodeport').check();
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.getByRole('status')).toHaveText(t('en', 'settings.rerendered', { n: '0' }));
});

test('a user cannot reach admin pages or another user\'s cluster', async ({ browser, request, baseURL }) => {
  const { other: ben, page: annPage, cluster: annCluster } =
    await ownerWithCluster(browser, request, baseURL!, unique('ann-c'));
  await expect(navLink(annPage, 'en', 'app.nav_settings')).toHaveCount(0);

  const benPage = await newPage(browser);
  await signIn(benPage, ben, USER_PASSWORD);
  let res = await benPage.goto('/admin/settings');
  expect(res?.status()).toBe(403);
  await expect(benPage.getByRole('heading', { name: t('en', 'app.forbidden_title') })).toBeVisible();
  await shot(benPage, 'forbidden-en');
  await accessible(benPage);
  res = await benPage.goto('/admin/users');
  expect(res?.status()).toBe(403);
  res = await benPage.goto(annCluster);
  expect(res?.status()).toBe(404);
  await expect(benPage.getByRole('heading', { name: t('en', 'app.not_found_title') })).toBeVisible();
  res = await benPage.goto(`${annCluster}/edit`);
  expect(res?.status()).toBe(404);
  await benPage.goto('/clusters');
  await expect(benPage.getByText(t('en', 'clusters.empty'))).toBeVisible();
});

test('admin manages users: create, role, password', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/users');
  await hydrated(page);
  const name = unique('cat');
  await page.getByLabel(t('en', 'users.username')).fill(name);
  await page.getByLabel(t('en', 'users.password'), { exact: true }).fill('short');
  await page.getByRole('button', { name: t('en', 'users.create_submit') }).click();
  await expect(page.locator('#password-error')).toHaveText(t('en', 'errors.password_too_short'));
  await page.getByLabel(t('en', 'users.password'), { exact: true }).fill(USER_PASSWORD);
  await page.getByRole('button', { name: t('en', 'users.create_submit') }).click();
  await expect(page.locator(`tr[data-user="${name}"]`)).toBeVisible();
  await shot(page, 'admin-users-en');
  await accessible(page);
  const row = page.locator(`tr[data-user="${name}"]`);
  await row.getByLabel(t('en', 'users.role_for', { username: name })).selectOption('admin');
  await row.getByRole('button', { name: t('en', 'users.set_role') }).click();
  await expect(page.locator(`tr[data-user="${name}"] td`).first()).toHaveText(t('en', 'app.role_admin'));
});

test('own nodes: offered by the admin, refused without a LoadBalancer, with and without JavaScript', async ({ page, browser }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/clusters/new');
  await hydrated(page);
  await expect(page.locator('#own_nodes')).toHaveCount(0);

  await page.goto('/admin/settings');
  await hydrated(page);
  await page.getByLabel(t('en', 'settings.platform_api_key')).fill('Not A Ref');
  await page.getByLabel(t('en', 'settings.private_nodes')).selectOption('on');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.locator('#platform_api_key-error')).toHaveText(t('en', 'errors.platform_api_key_invalid'));
  // The key's Secret lives where the operator says (KUBEBYON_PLATFORM_KEY_NAMESPACE,
  // `kubebyon-platform-key` by default): the console grants each own-nodes control plane `get` on it.
  await page.getByLabel(t('en', 'settings.platform_api_key')).fill('kube-system/vcluster-key');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.locator('#platform_api_key-error')).toHaveText(t('en', 'errors.platform_api_key_namespace'));
  await page.getByLabel(t('en', 'settings.platform_api_key')).fill('kubebyon/vcluster-key');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  // Not the console's own namespace (its Secrets are no control plane's to read).
  await expect(page.locator('#platform_api_key-error')).toHaveText(t('en', 'errors.platform_api_key_namespace'));
  await page.getByLabel(t('en', 'settings.platform_api_key')).fill('kubebyon-platform-key/vcluster-key');
  await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
  await expect(page.getByRole('status')).toHaveText(t('en', 'settings.rerendered', { n: '0' }));
  await shot(page, 'admin-settings-own-nodes-en');

  try {
    for (const js of [true, false]) {
      const p = js ? page : await newPage(browser, { js: false });
      if (!js) await signIn(p, 'admin', ADMIN_PASSWORD, false);
      await p.goto('/clusters/new');
      if (js) await hydrated(p);
      const name = unique(js ? 'own' : 'ownnojs');
      await p.getByLabel(t('en', 'form.name')).fill(name);
      await chooseAccess(p, 'en', 'nodeport');
      await p.getByLabel(t('en', 'form.own_nodes')).check();
      await p.getByRole('button', { name: t('en', 'form.create_submit') }).click();
      await expect(p.locator('#public_access_mode-error')).toHaveText(t('en', 'errors.own_nodes_need_load_balancer'));
      // Nothing was created, and (without JavaScript, after the round trip) the choice is kept.
      await expect(p).toHaveURL(/\/clusters\/new/);
      await expect(p.getByLabel(t('en', 'form.own_nodes'))).toBeChecked();
      await shot(p, js ? 'cluster-new-own-nodes-en' : 'cluster-new-own-nodes-nojs');
      // axe runs as a script: not on a page with JavaScript off (it waits for ever there).
      if (js) await accessible(p);
      else await p.context().close();
    }
  } finally {
    // Back to the product default so other tests see the form without it.
    await page.goto('/admin/settings');
    await hydrated(page);
    await page.getByLabel(t('en', 'settings.private_nodes')).selectOption('off');
    await page.getByLabel(t('en', 'settings.platform_api_key')).fill('');
    await page.getByRole('button', { name: t('en', 'settings.submit') }).click();
    await expect(page.getByRole('status')).toHaveText(t('en', 'settings.rerendered', { n: '0' }));
  }
});

test('a settings error is shown in the field it belongs to, in the page language, and the last one is taken away', async ({ page }) => {
  // The settings fields are server-rendered children of the island that saves
  // them: the island places each error into them (show_field_errors).
  await signIn(page, 'admin', ADMIN_PASSWORD);
  await page.goto('/admin/settings');
  await page.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(page.locator('html')).toHaveAttribute('lang', 'zh-CN');
  await hydrated(page);
  const submit = page.getByRole('button', { name: t('zh-CN', 'settings.submit') });
  const lbClass = page.locator('#load_balancer_class');
  await lbClass.fill('not a class!');
  await submit.click();
  await expect(page.locator('#load_balancer_class-error')).toHaveText(t('zh-CN', 'errors.load_balancer_class_invalid'));
  await expect(lbClass).toHaveAttribute('aria-invalid', 'true');
  await expect(lbClass).toHaveAttribute('aria-describedby', 'load_balancer_class-hint load_balancer_class-error');

  await lbClass.fill('');
  await page.locator('#platform_api_key').fill('Not A Ref');
  await submit.click();
  await expect(page.locator('#platform_api_key-error')).toHaveText(t('zh-CN', 'errors.platform_api_key_invalid'));
  await expect(page.locator('#load_balancer_class-error')).toHaveCount(0);
  await expect(lbClass).toHaveAttribute('aria-invalid', 'false');
  await expect(lbClass).toHaveAttribute('aria-describedby', 'load_balancer_class-hint');
  await expect(page.locator('form[data-form=settings] .field-error')).toHaveCount(1);
});
