import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// `make bench-scale` only (scripts/bench-scale.sh starts the host and the console).
export default defineConfig({ ...base, testDir: './bench', timeout: 3_600_000 });
