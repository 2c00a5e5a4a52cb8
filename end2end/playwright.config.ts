import { defineConfig } from '@playwright/test';

// Debian's Chromium (no browser download); the console is started by scripts/test.sh.
export default defineConfig({
  testDir: './tests',
  outputDir: './test-results',
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: 60_000,
  reporter: [['list']],
  use: {
    baseURL: process.env.KUBEBYON_URL ?? 'http://127.0.0.1:3000',
    browserName: 'chromium',
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
    },
    locale: 'en-US',
    trace: 'off',
  },
});
