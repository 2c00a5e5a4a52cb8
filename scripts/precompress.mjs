// Brotli (quality 11) and gzip (level 9) copies of the site's current assets,
// for the server's ServeDir to send as they are; older hashed builds are
// removed. Usage: node scripts/precompress.mjs <site>/pkg <hash.txt>
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const [dir, hashFile] = process.argv.slice(2);
const hashes = Object.fromEntries(
  fs.readFileSync(hashFile, 'utf8').split('\n').filter(Boolean).map((l) => l.split(':').map((s) => s.trim())),
);
const current = new Set(['js', 'wasm', 'css'].map((ext) => `kubebyon.${hashes[ext]}.${ext}`));
for (const name of fs.readdirSync(dir)) {
  const base = name.replace(/\.(br|gz)$/, '');
  if (/^kubebyon\.[^.]+\.(js|wasm|css)$/.test(base) && !current.has(base)) fs.rmSync(path.join(dir, name));
}
for (const name of current) {
  const file = path.join(dir, name);
  const data = fs.readFileSync(file);
  const br = zlib.brotliCompressSync(data, {
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length },
  });
  fs.writeFileSync(`${file}.br`, br);
  fs.writeFileSync(`${file}.gz`, zlib.gzipSync(data, { level: 9 }));
  console.error(`precompress: ${name} ${data.length} B -> br ${br.length} B`);
}
