// `make bench-scale`: from a vCluster pod's Ready transition on the host to
// an open detail page's DOM showing Ready, in Chromium, for LoadBalancer
// clusters created one after another (the page is open before the pod
// starts). The pod's transition is taken from a `kubectl get pods --watch`
// on this machine's clock; the page's from a MutationObserver (Date.now(),
// the same clock). Prints p50, p95 and the largest.
import { test, expect } from '@playwright/test';
import { spawn } from 'node:child_process';
import { signIn, hydrated, unique, ADMIN_PASSWORD } from '../tests/helpers';

const url = process.env.KUBEBYON_HOST_CONSOLE_URL!;
const kubeconfig = process.env.KUBEBYON_HOST_KUBECONFIG!;
const net = process.env.KUBEBYON_HOST_NET!;
// At most 30: the host's default MetalLB pool is .200–.229 of its /24.
const clusters = Math.min(30, Number(process.env.KUBEBYON_BENCH_LATENCY_CLUSTERS ?? 20));
test.use({ baseURL: url });

test('pod Ready to page Ready', async ({ page }) => {
  // Ready transitions as the host reports them: namespace → first time seen Ready.
  const readyAt = new Map<string, number>();
  const watch = spawn('kubectl', [
    '--kubeconfig', kubeconfig, 'get', 'pods', '-A', '-l', 'app=vcluster', '--watch', '--output-watch-events',
    '-o', 'jsonpath={.object.metadata.namespace}{" "}{.object.status.conditions[?(@.type=="Ready")].status}{"\\n"}',
  ]);
  let buffered = '';
  watch.stdout.on('data', (chunk: Buffer) => {
    const now = Date.now();
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      const [ns, ready] = line.trim().split(' ');
      if (ready === 'True' && ns && !readyAt.has(ns)) readyAt.set(ns, now);
    }
  });
  try {
    await signIn(page, 'admin', ADMIN_PASSWORD);
    const latencies: number[] = [];
    for (let i = 0; i < clusters; i++) {
      const name = unique('lat');
      const created = await page.request.post('/api/console/clusters', {
        headers: { origin: url },
        data: {
          name,
          resources: { cpu: '1', memory_gib: 1, storage_gib: 5 },
          public_access: { enabled: true, mode: 'loadbalancer', control_plane_host: `${net}.${200 + i}` },
        },
      });
      expect(created.status()).toBe(201);
      const id = (await created.json()).id;
      await page.goto(`/clusters/${id}`);
      await hydrated(page).catch(() => {});
      await expect(page.getByTestId('live')).toHaveAttribute('data-live', 'true');
      await page.evaluate(() => {
        const w = window as any;
        const seen = () => {
          if (!w.__readyAt && document.querySelector('#cluster-live [data-phase="ready"]')) w.__readyAt = Date.now();
        };
        new MutationObserver(seen).observe(document.body, { subtree: true, childList: true, attributes: true });
        seen();
      });
      await expect(page.locator('#cluster-live [data-phase]').first()).toHaveAttribute('data-phase', 'ready', {
        timeout: 180_000,
      });
      const shown = await page.evaluate(() => (window as any).__readyAt as number);
      const pod = readyAt.get(`kubebyon-${name}`);
      expect(pod, `the watch saw ${name}'s pod Ready`).toBeDefined();
      latencies.push(shown - pod!);
      console.log(`${name}: pod Ready → page Ready ${shown - pod!} ms`);
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
    console.log(
      `== pod Ready → open detail page showing Ready (${clusters} LoadBalancer clusters, Chromium): ` +
        `p50 ${at(0.5)} ms, p95 ${at(0.95)} ms, max ${sorted[sorted.length - 1]} ms`,
    );
  } finally {
    watch.kill();
  }
});
