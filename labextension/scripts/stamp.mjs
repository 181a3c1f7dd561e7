// Records which sources the committed bundles were built from, so that they cannot drift from
// the TypeScript silently: `npm run build` ends with this script, which writes
// kforge_nb/ui/static/build.json (a hash of every source file, and the hash of every built
// file); tests/test_bundles.py recomputes both. `node scripts/stamp.mjs --check` checks only.
import { createHash } from 'crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'fs';
import { dirname, join, relative } from 'path';
import { fileURLToPath } from 'url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..'); // the repository
const SOURCES = ['labextension/src', 'labextension/style', 'labextension/package.json',
                 'labextension/package-lock.json', 'labextension/tsconfig.json'];
const OUTPUTS = ['kforge_nb/ui/static/view.js', 'kforge_nb/ui/static/view.css',
                 'labextension/prebuilt/package.json', 'labextension/prebuilt/static'];
const RECORD = join(root, 'kforge_nb/ui/static/build.json');

function files(rel) {
  const path = join(root, rel);
  if (!existsSync(path)) {
    return [];
  }
  if (statSync(path).isDirectory()) {
    return readdirSync(path).sort().flatMap(name => files(`${rel}/${name}`));
  }
  return [rel];
}

// text with \r\n read as \n, so a Windows checkout hashes alike
const digest = rel => createHash('sha256')
  .update(readFileSync(join(root, rel)).toString('latin1').replace(/\r\n/g, '\n'), 'latin1')
  .digest('hex');

function sourcesHash() {
  const list = SOURCES.flatMap(files).sort();
  const hash = createHash('sha256');
  for (const rel of list) {
    hash.update(`${rel}\0${digest(rel)}\n`);
  }
  return hash.digest('hex');
}

const record = {
  about: 'written by `npm run build` in labextension/; checked by tests/test_bundles.py',
  sources: sourcesHash(),
  outputs: Object.fromEntries(OUTPUTS.flatMap(files).sort().map(rel => [rel, digest(rel)]))
};

if (process.argv.includes('--check')) {
  const saved = JSON.parse(readFileSync(RECORD, 'utf8'));
  const same = JSON.stringify(saved.sources) === JSON.stringify(record.sources) &&
    JSON.stringify(saved.outputs) === JSON.stringify(record.outputs);
  console.log(same ? 'bundles are up to date' : 'bundles are stale: run `npm run build` in labextension/');
  process.exit(same ? 0 : 1);
}
writeFileSync(RECORD, JSON.stringify(record, null, 2) + '\n');
console.log(`wrote ${relative(root, RECORD)}: sources ${record.sources.slice(0, 12)}, ${Object.keys(record.outputs).length} outputs`);
