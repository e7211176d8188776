#!/usr/bin/env node
// Builds the inspector's page: inspector/ui/ (Preact, TSX) bundled by esbuild into inspector/assets/app.js, with
// index.html and app.css copied beside it. The built files are committed (a checkout runs the sources without a
// build step, and the npm package ships them); inspector/assets.test.ts fails when they are not what this
// script makes from the sources, so a change to the page is always rebuilt:
//   node scripts/build-inspector-ui.mjs            write inspector/assets/
//   node scripts/build-inspector-ui.mjs --check    exit 1 when inspector/assets/ is stale
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const ui = `${root}inspector/ui/`
const out = `${root}inspector/assets/`

/** The built page as file name → bytes, made in memory. */
export async function buildInspectorUi() {
  const result = await build({
    entryPoints: [`${ui}main.tsx`],
    bundle: true,
    write: false,
    outfile: `${out}app.js`,
    format: 'esm',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'silent',
  })
  const js = result.outputFiles.find((f) => f.path.endsWith('.js'))
  return new Map([
    ['app.js', Buffer.from(js.contents)],
    ['index.html', readFileSync(`${ui}index.html`)],
    ['app.css', readFileSync(`${ui}app.css`)],
  ])
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = await buildInspectorUi()
  const check = process.argv.includes('--check')
  let stale = false
  for (const [name, bytes] of files) {
    let current
    try {
      current = readFileSync(out + name)
    } catch {
      current = undefined
    }
    if (current?.equals(bytes)) continue
    stale = true
    if (!check) writeFileSync(out + name, bytes)
    console.log(`${check ? 'stale' : 'wrote'} inspector/assets/${name} (${bytes.byteLength} bytes)`)
  }
  if (check && stale) process.exit(1)
  if (!stale) console.log('inspector/assets/ is up to date')
}
