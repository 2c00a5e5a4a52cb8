// The site's assets as cargo-leptos' hash-files names them (src/compile/hash.rs):
// kubebyon.{js,wasm,css} renamed to kubebyon.<md5, base64url>.<ext>, the hashes
// written to hash.txt (`js: …`, `wasm: …`, `css: …`), where leptos reads them;
// then brotli (quality 11) and gzip (level 9) copies for the server's ServeDir
// to send as they are. Older hashed builds are removed.
// Usage: node scripts/site-assets.mjs <site>/pkg <hash.txt>
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const [dir, hashFile] = process.argv.slice(2);
const exts = ['js', 'wasm', 'css'];
const hashes = {};
for (const ext of exts) {
  const file = path.join(dir, `kubebyon.${ext}`);
  hashes[ext] = crypto.createHash('md5').update(fs.readFileSync(file)).digest('base64url');
}
const current = new Set(exts.map((ext) => `kubebyon.${hashes[ext]}.${ext}`));
for (const name of fs.readdirSync(dir)) {
  const base = name.replace(/\.(br|gz)$/, '');
  if (/^kubebyon\.[^.]+\.(js|wasm|css)$/.test(base) && !current.has(base)) fs.rmSync(path.join(dir, name));
}
for (const ext of exts) fs.renameSync(path.join(dir, `kubebyon.${ext}`), path.join(dir, `kubebyon.${hashes[ext]}.${ext}`));
fs.mkdirSync(path.dirname(hashFile), { recursive: true });
fs.writeFileSync(hashFile, exts.map((ext) => `${ext}: ${hashes[ext]}\n`).join(''));
for (const name of current) {
  const file = path.join(dir, name);
  const data = fs.readFileSync(file);
  const br = zlib.brotliCompressSync(data, {
    params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length },
  });
  fs.writeFileSync(`${file}.br`, br);
  fs.writeFileSync(`${file}.gz`, zlib.gzipSync(data, { level: 9 }));
  console.error(`site: ${name} ${data.length} B -> br ${br.length} B`);
}
