#!/usr/bin/env node
// Builds the package's dist/ (what `npm run build` runs, and what `npm pack` and a git install run through the
// "prepare" script, so a tarball or a git URL never ships without its code):
// - declarations (.d.ts) by tsc, file for file, which the exports map's "types" point at; no declaration maps,
//   which would point at TypeScript sources the package does not ship;
// - JavaScript by esbuild: one module per entry point (each exports subpath, the CLI, the case runner's child)
//   and shared chunks in dist/chunks/, our own code bundled, every dependency left to `import` as installed;
//   source maps carry the sources' text (sourcesContent), so a stack trace or a debugger (vitest reads them)
//   shows the TypeScript without the sources being installed.
// Why a bundle: a fresh process loaded our ~135 modules one by one (`import('tool-replay/interceptor')` 230 ms
// from tsc's per-file output vs 180 ms bundled; the CLI's start 400 vs 285 ms). Chunks are shared, never copied,
// so a class is one class whichever subpath an app imports it from.
//   node scripts/build.mjs               build into dist/
//   node scripts/build.mjs --out DIR     build into DIR (the packed-package tests build into a staging copy)
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))

function parseArgs(argv) {
  const i = argv.indexOf('--out')
  if (i === -1) return { out: join(root, 'dist') }
  const out = argv[i + 1]
  if (!out) {
    process.stderr.write('build: --out needs a directory\n')
    process.exit(64)
  }
  return { out: resolve(out) }
}

/**
 * Every file the package runs by path: the exports map's entries, the CLI (bin/tr-proxy.js loads cli/main.ts, and
 * cli/malloc-arenas.ts before it), the case runner's child and the sealed run's helper.
 */
function entryPoints() {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  const entries = new Set([
    'cli/main.ts',
    'cli/malloc-arenas.ts',
    'cases/runner-process.ts',
    'seal/namespace-helper.ts',
    'store/trace-file-worker.ts',
    'store/body-worker.ts',
  ])
  for (const conditions of Object.values(pkg.exports)) {
    const source = conditions['tool-replay-source']
    if (typeof source === 'string') entries.add(source.replace(/^\.\//, ''))
  }
  return [...entries].map((e) => join(root, e))
}

/**
 * Modules find files beside the package by `new URL('../../x', import.meta.url)`, written for a module one folder
 * below dist/ (dist/cli/, dist/chunks/). An entry at dist/ itself (dist/index.js) holding such code would look
 * outside the package: refuse the build instead.
 */
function checkDepth(out) {
  for (const name of readdirSync(out)) {
    if (!name.endsWith('.js')) continue
    if (readFileSync(join(out, name), 'utf8').includes('import.meta.url')) {
      throw new Error(`build: ${name} at the top of dist/ uses import.meta.url; keep such code out of the top-level entry (or in a chunk)`)
    }
  }
}

const { out } = parseArgs(process.argv.slice(2))
rmSync(out, { recursive: true, force: true })
execFileSync(
  process.execPath,
  [
    join(root, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(root, 'tsconfig.build.json'),
    '--emitDeclarationOnly',
    '--declarationMap',
    'false',
    '--outDir',
    out,
  ],
  {
    cwd: root,
    stdio: 'inherit',
  },
)
await build({
  entryPoints: entryPoints(),
  outdir: out,
  outbase: root,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22.19',
  packages: 'external',
  chunkNames: 'chunks/[name]-[hash]',
  // Error classes, yargs commands and messages read constructor and function names: keep them as written.
  keepNames: true,
  sourcemap: 'linked',
  sourcesContent: true,
  logLevel: 'warning',
})
checkDepth(out)
process.stdout.write(`build: ${relative(process.cwd(), out) || '.'} ready\n`)
