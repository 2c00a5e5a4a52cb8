// Moving NodePort clusters to LoadBalancer from the admin page, against the
// simulated host (scripts/test.sh): the dry run, a batch of three watched live
// to the end, the owner's notice on the detail page; the same with JavaScript off.
import { expect, type Page } from '@playwright/test';
import { test, t, signIn, unique, shot, accessible, newPage, ADMIN_PASSWORD } from './helpers';

const url = process.env.KUBEBYON_HOST_CONSOLE_URL;
const net = process.env.KUBEBYON_HOST_NET;
if (!url || !net) {
  throw new Error('KUBEBYON_HOST_CONSOLE_URL and KUBEBYON_HOST_NET are set by scripts/test.sh');
}
const READY = 90_000;

test.use({ baseURL: url });
test.describe.configure({ mode: 'serial', timeout: 240_000 });

/** Creates NodePort clusters through the JSON API (same session) and waits until each is Ready. */
async function nodePortClusters(page: Page, names: string[]) {
  for (const name of names) {
    const r = await page.request.post('/api/console/clusters', {
      data: { name, resources: { cpu: '1', memory_gib: 1, storage_gib: 1 }, public_access: { enabled: true, mode: 'nodeport' } },
      headers: { origin: url! },
    });
    expect(r.status()).toBe(201);
  }
  for (const name of names) {
    await expect
      .poll(
        async () => {
          const r = await page.request.get(`/api/console/clusters?q=${name}`);
          const list = await r.json();
          return list.items?.[0]?.status?.phase ?? list[0]?.status?.phase;
        },
        { timeout: READY },
      )
      .toBe('ready');
  }
}

/** Fills the migration form: the chosen clusters and a range. */
async function planFor(page: Page, names: string[], range: string) {
  await page.goto('/admin/moves');
  for (const name of names) await page.locator(`#cluster-${name}`).check();
  await page.locator('#source_range').check();
  await page.locator('#hosts').fill(range);
  await page.locator('#grace_days').fill('1');
  await page.getByRole('button', { name: t('en', 'moves.dry_run') }).click();
  await expect(page.getByTestId('plan')).toHaveAttribute('data-blocked', '0');
}

test('admin moves three clusters from the page and watches them finish; the owner sees the notice', async ({ page }) => {
  await signIn(page, 'admin', ADMIN_PASSWORD);
  // The plan lists clusters by name: sorted, so that is also the order they
  // are made in (`unique`'s counter past 9 would put "-10" before "-9").
  const names = [unique('mig'), unique('mig'), unique('mig')].sort();
  await nodePortClusters(page, names);

  await planFor(page, names, `${net}.215-${net}.217`);
  for (const [i, name] of names.entries()) {
    await expect(page.locator(`tr[data-plan="${name}"] [data-field=new-endpoint]`)).toHaveText(`https://${net}.${215 + i}:443`);
  }
  await shot(page, 'move-plan-en');
  await accessible(page);

  await page.getByRole('button', { name: t('en', 'moves.start', { n: '3' }) }).click();
  await expect(page).toHaveURL(/\/admin\/moves\/\d+$/);
  await expect(page.getByTestId('live')).toHaveAttribute('data-live', 'true');
  await page.evaluate(() => ((window as any).__sameDocument = true));
  // Live to the end, without a reload.
  await expect(page.getByTestId('move-counts')).toHaveAttribute('data-done', '3', { timeout: 180_000 });
  expect(await page.evaluate(() => (window as any).__sameDocument === true)).toBe(true);
  for (const name of names) await expect(page.locator(`tr[data-item="${name}"]`)).toHaveAttribute('data-state', 'done');
  await shot(page, 'move-done-en');

  // The owner's notice on the detail page, until dismissed.
  await page.locator(`tr[data-item="${names[0]}"] a`).click();
  const notice = page.getByTestId('moved-notice');
  await expect(notice).toBeVisible();
  await expect(notice).toHaveAttribute('data-closed', 'false');
  await expect(page.locator('[data-field=endpoint]')).toHaveText(`https://${net}.215:443`);
  await shot(page, 'move-notice-en');
  await page.getByRole('link', { name: t('zh-CN', 'languages.zh_CN') }).click();
  await expect(notice).toContainText(t('zh-CN', 'detail.moved_until'));
  await shot(page, 'move-notice-zh');
  await page.getByRole('button', { name: t('zh-CN', 'detail.moved_dismiss') }).click();
  await expect(page.getByTestId('moved-notice')).toHaveCount(0);
  await page.getByRole('link', { name: t('zh-CN', 'languages.en') }).click();
});

test('the same with JavaScript off: dry run, a batch of three, progress on reload', async ({ browser }) => {
  const page = await newPage(browser, { js: false, baseURL: url });
  await signIn(page, 'admin', ADMIN_PASSWORD, false);
  const names = [unique('mignojs'), unique('mignojs'), unique('mignojs')].sort();
  await nodePortClusters(page, names);
  // Addresses the first test's clusters took are skipped: the next free ones, in order.
  await planFor(page, names, `${net}.215-${net}.222`);
  for (const [i, name] of names.entries()) {
    await expect(page.locator(`tr[data-plan="${name}"] [data-field=new-endpoint]`)).toHaveText(`https://${net}.${218 + i}:443`);
  }
  await shot(page, 'move-plan-nojs');
  await page.getByRole('button', { name: t('en', 'moves.start', { n: '3' }) }).click();
  await expect(page).toHaveURL(/\/admin\/moves\/\d+$/);
  await expect
    .poll(
      async () => {
        await page.reload();
        return page.getByTestId('move-counts').getAttribute('data-done');
      },
      { timeout: 180_000, intervals: [2000] },
    )
    .toBe('3');
  for (const name of names) await expect(page.locator(`tr[data-item="${name}"]`)).toHaveAttribute('data-state', 'done');

  // A range with no free address left: blocked, with the reason, and no start button.
  const more = unique('mignojs');
  await nodePortClusters(page, [more]);
  await page.goto(`/admin/moves?clusters=${more}&source=range&hosts=${net}.215-${net}.215&grace_days=1&concurrency=5`);
  await expect(page.getByTestId('plan')).not.toHaveAttribute('data-blocked', '0');
  await expect(page.locator('[data-problem=range_exhausted]').first()).toHaveText(t('en', 'moves.problem_range_exhausted'));
  await expect(page.getByRole('button', { name: /Start moving/ })).toHaveCount(0);
});
