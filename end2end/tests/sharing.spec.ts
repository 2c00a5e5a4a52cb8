// Sharing (issue 42) in Chromium: the members section of a cluster's page and
// the admins' teams page, with JavaScript on and off, in English and Chinese.
import { expect } from '@playwright/test';
import {
  test, t, unique, signIn, createUser, newPage, shot, accessible, ownerWithCluster, USER_PASSWORD, ADMIN_PASSWORD,
} from './helpers';

test('a cluster is shared from its page: a viewer sees it read-only until it is taken back', async ({ browser, request, baseURL }) => {
  const name = unique('shared');
  const { owner: ann, other: ben, page: annPage, cluster } = await ownerWithCluster(browser, request, baseURL!, name);
  const members = annPage.getByTestId('members');
  await expect(members.getByText(t('en', 'members.none'))).toBeVisible();

  // A name that is no account: refused in its field, translated, nothing shared.
  await members.getByLabel(t('en', 'members.name')).fill('nobody-here');
  await members.getByRole('button', { name: t('en', 'members.share') }).click();
  await expect(annPage.locator('#member-error')).toHaveText(t('en', 'errors.member_unknown'));
  await expect(members.getByLabel(t('en', 'members.name'))).toHaveAttribute('aria-invalid', 'true');
  await expect(members.getByLabel(t('en', 'members.name'))).toHaveValue('nobody-here');
  await expect(members.locator('tr[data-member]')).toHaveCount(0);

  // Shared with Ben to view.
  await members.getByLabel(t('en', 'members.name')).fill(ben);
  await members.getByLabel(t('en', 'members.col_role')).selectOption('view');
  await members.getByRole('button', { name: t('en', 'members.share') }).click();
  const row = annPage.locator(`tr[data-member="user:${ben}"]`);
  await expect(row.locator('[data-field="role"]')).toHaveText(t('en', 'members.role_view'));
  // What a removal cannot take back is said where members are managed.
  await expect(members.getByTestId('members-what-stays')).toHaveText(t('en', 'members.what_stays'));
  await shot(annPage, 'members-owner-en');
  await accessible(annPage);

  // Ben, in Chinese without JavaScript: listed, read-only, his role named.
  const benPage = await newPage(browser, { js: false });
  await signIn(benPage, ben, USER_PASSWORD, false);
  await benPage.goto('/lang/zh-CN');
  await benPage.goto('/clusters');
  await expect(benPage.getByRole('link', { name })).toBeVisible();
  let res = await benPage.goto(cluster);
  expect(res?.status()).toBe(200);
  await expect(benPage.getByTestId('your-role')).toContainText(t('zh-CN', 'members.role_view'));
  await expect(benPage.getByTestId('your-role')).toContainText(ann);
  await expect(benPage.getByTestId('members-what-stays'), 'only for those who manage members').toHaveCount(0);
  await expect(benPage.locator('form[data-form="put-member"]')).toHaveCount(0);
  await expect(benPage.locator('form[data-form="remove-member"]')).toHaveCount(0);
  await expect(benPage.locator(`a[href="${cluster}/edit"]`)).toHaveCount(0);
  // A viewer downloads a kubeconfig of their own too, once the cluster is ready (none here yet).
  await expect(benPage.getByTestId('kubeconfig')).toBeDisabled();
  await shot(benPage, 'members-viewer-zh');
  res = await benPage.goto(`${cluster}/edit`);
  expect(res?.status()).toBe(403);

  // Taken back: gone for Ben.
  await annPage.goto(cluster);
  await annPage.getByRole('button', { name: t('en', 'members.remove_label', { name: ben }) }).click();
  await expect(annPage.getByTestId('members').locator('tr[data-member]')).toHaveCount(0);
  res = await benPage.goto(cluster);
  expect(res?.status()).toBe(404);

  // An admin moves the cluster to Ben, in Chinese without JavaScript: a
  // name that is no account is refused in its field; then Ben owns it and
  // Ann no longer reaches it. Ann sees no such form.
  await expect(annPage.locator('form[data-form="transfer"]')).toHaveCount(0);
  const admin = await newPage(browser, { js: false });
  await signIn(admin, 'admin', ADMIN_PASSWORD, false);
  await admin.goto('/lang/zh-CN');
  await admin.goto(cluster);
  const move = admin.locator('form[data-form="transfer"]');
  await move.getByLabel(t('zh-CN', 'members.new_owner')).fill('nobody-here');
  await move.getByRole('button', { name: t('zh-CN', 'members.move_submit') }).click();
  await expect(admin.locator('#owner-error')).toHaveText(t('zh-CN', 'errors.member_unknown'));
  await expect(move.getByLabel(t('zh-CN', 'members.new_owner'))).toHaveValue('nobody-here');
  await shot(admin, 'transfer-refused-zh');
  await move.getByLabel(t('zh-CN', 'members.new_owner')).fill(ben);
  await move.getByRole('button', { name: t('zh-CN', 'members.move_submit') }).click();
  await expect(admin.getByTestId('your-role')).toContainText(ben);
  // (Asked with each one's cookies: a goto to the page a tab is on may be a
  // same-document navigation, with no response to read.)
  expect((await benPage.request.get(cluster)).status()).toBe(200);
  expect((await annPage.request.get(cluster)).status()).toBe(404);
});

test('admin manages teams without JavaScript, in Chinese: a bad name is refused in its field', async ({ browser, request, baseURL }) => {
  const cat = unique('cat');
  await createUser(request, baseURL!, cat);
  const page = await newPage(browser, { js: false });
  await signIn(page, 'admin', process.env.KUBEBYON_ADMIN_PASSWORD ?? 'e2e-admin-password', false);
  await page.goto('/lang/zh-CN');
  await page.goto('/admin/teams');
  await page.getByLabel(t('zh-CN', 'teams.name')).fill('Bad Name');
  await page.getByRole('button', { name: t('zh-CN', 'teams.create') }).click();
  await expect(page.locator('#team_name-error')).toHaveText(t('zh-CN', 'errors.team_name_invalid'));
  await expect(page.getByLabel(t('zh-CN', 'teams.name'))).toHaveValue('Bad Name');

  const team = unique('ops').toLowerCase().slice(0, 32);
  await page.getByLabel(t('zh-CN', 'teams.name')).fill(team);
  await page.getByRole('button', { name: t('zh-CN', 'teams.create') }).click();
  const row = page.locator(`tr[data-team="${team}"]`);
  await expect(row).toBeVisible();
  await row.getByPlaceholder(t('zh-CN', 'teams.username')).fill(cat);
  await row.getByRole('button', { name: t('zh-CN', 'teams.add') }).click();
  await expect(page.locator(`tr[data-team="${team}"] li span`)).toHaveText([cat]);
  await shot(page, 'teams-zh');
  // axe runs in the page: a second look with JavaScript on.
  const withJs = await newPage(browser);
  await signIn(withJs, 'admin', process.env.KUBEBYON_ADMIN_PASSWORD ?? 'e2e-admin-password');
  await withJs.goto('/admin/teams');
  await expect(withJs.locator(`tr[data-team="${team}"] li span`)).toHaveText([cat]);
  await accessible(withJs);
  await page.locator(`tr[data-team="${team}"]`).getByRole('button', { name: t('zh-CN', 'teams.remove_label', { name: cat }) }).click();
  await expect(page.locator(`tr[data-team="${team}"] li`)).toHaveCount(0);
  await page.locator(`tr[data-team="${team}"]`).getByRole('button', { name: t('zh-CN', 'teams.delete_label', { name: team }) }).click();
  await expect(page.locator(`tr[data-team="${team}"]`)).toHaveCount(0);
});
