/**
 * What the published package holds. The tarball is built as users get it (scripts/build.mjs into a staging
 * copy, then `npm pack`; e2e/support/packed-package.ts, shared with the promoted-test runs) and its file list
 * read back: no test code, no fixtures (the store contract suite among them), no e2e/, bench/, examples/ or
 * scripts/, and every file the exports map names is there. A second test packs a directory whose dist/ holds
 * leftovers of an older build (`npm pack --dry-run --json`), so the `files` field itself keeps test code out
 * even when dist/ was not built clean. A third installs the tarball and loads every subpath from it: the build
 * bundles our modules into entries and shared chunks, so a chunk path gone wrong or a class copied into two
 * entries (two `ToolReplayError`s, an `instanceof` that fails across subpaths) shows there. The tarball is packed
 * from a copy of the sources without dist/, so these also prove that `npm pack` builds (package.json "prepare").
 * Two more read the unpacked tarball: its "dependencies" are exactly the packages its code loads, and its source
 * maps name only what ships (vitest and debuggers warn on a map whose sources are missing).
 */
import assert from 'node:assert/strict'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { probeSeal } from '../seal/index.ts'
import { packedTarball, runProgram, scratchProject } from './support/packed-package.ts'

const ROOT = new URL('../', import.meta.url).pathname
const TEST_CODE = /(\.test\.[cm]?[jt]s|\.test\.d\.[cm]?ts)(\.map)?$|(^|\/)fixtures\/|trace-store-contract/
const OUTSIDE = /^(e2e|bench|examples|scripts)\//

function exportTargets(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, string | Record<string, string>> }
  const out: string[] = []
  for (const target of Object.values(pkg.exports)) {
    if (typeof target === 'string') out.push(target)
    else out.push(target.types as string, target.default as string)
  }
  return out.map((p) => p.replace(/^\.\//, ''))
}

test('the packed tarball holds the compiled package and no test code, fixtures, e2e, bench, examples or scripts', async () => {
  const tarball = await packedTarball()
  const listing = await runProgram('tar', ['-tzf', tarball], { cwd: ROOT })
  assert.equal(listing.code, 0, listing.out)
  const files = listing.out
    .split('\n')
    .filter((l) => l.length > 0 && !l.endsWith('/'))
    .map((l) => l.replace(/^package\//, ''))
  assert.ok(files.length > 100, `a tarball of ${files.length} files`)
  assert.deepEqual(
    files.filter((f) => TEST_CODE.test(f)),
    [],
    'test code in the tarball: exclude it in tsconfig.build.json and package.json "files"',
  )
  assert.deepEqual(
    files.filter((f) => OUTSIDE.test(f)),
    [],
  )
  assert.deepEqual(
    files.filter((f) => !/^(dist|bin|inspector\/assets)\//.test(f) && !['package.json', 'README.md'].includes(f)),
    [],
    "only dist/, bin/, the inspector's built page, package.json and README.md ship",
  )
  const shipped = new Set(files)
  for (const target of exportTargets()) assert.ok(shipped.has(target), `the exports map names ${target}, which the tarball lacks`)
  // Files the package runs by path, in child processes: the case runner, the sealed run's helper.
  for (const file of ['dist/cases/runner-process.js', 'dist/seal/namespace-helper.js']) assert.ok(shipped.has(file), `the tarball lacks ${file}`)
})

test('a sealed run works from the installed package: `tr-proxy doctor` sets one up with the compiled helper', async (t) => {
  const probe = await probeSeal()
  if (!probe.ok) return t.skip(`sealing does not work here: ${probe.error.message}`)
  const dir = mkdtempSync(join(tmpdir(), 'tr-sealed-installed-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  await scratchProject(dir, await packedTarball(), [])
  const r = await runProgram(process.execPath, [join(dir, 'node_modules', 'tool-replay', 'bin', 'tr-proxy.js'), 'doctor', '--json'], {
    cwd: dir,
    timeoutMs: 60_000,
  })
  assert.equal(r.code, 0, r.out)
  const report = JSON.parse(r.out.trim().split('\n').at(-1) as string) as { ok: boolean; sealed: { setupMs: number } }
  assert.equal(report.ok, true, r.out)
})

test('package.json "files" keeps test code and fixtures out of a dist/ left over from an older build', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-files-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'))
  const planted = ['dist/store/trace-file.js', 'dist/store/trace-file.test.js', 'dist/store/fixtures/exchanges.js', 'dist/faults/fixtures/trace-builder.d.ts']
  for (const file of planted) {
    mkdirSync(join(dir, file, '..'), { recursive: true })
    writeFileSync(join(dir, file), '')
  }
  const r = await runProgram('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: dir })
  assert.equal(r.code, 0, r.out)
  const [report] = JSON.parse(r.out.slice(r.out.indexOf('['))) as Array<{ files: Array<{ path: string }> }>
  const paths = (report?.files ?? []).map((f) => f.path).sort()
  assert.deepEqual(
    paths.filter((p) => p.startsWith('dist/')),
    ['dist/store/trace-file.js'],
  )
})

test('every subpath loads from the installed package, and a class is one class whichever subpath it comes from', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-installed-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  await scratchProject(dir, await packedTarball(), [])
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> }
  // The test-framework setups register hooks with their runner when imported (the promoted-test files load them);
  // package.json is data.
  const subpaths = Object.keys(pkg.exports)
    .filter((s) => !/(node-test|vitest|\.json)$/.test(s))
    .map((s) => s.replace(/^\./, 'tool-replay'))
  const script = [
    `const names = ${JSON.stringify(subpaths)}`,
    'const mods = await Promise.all(names.map((n) => import(n)))',
    'const errors = new Set(mods.map((m) => m.ToolReplayError).filter(Boolean))',
    'const withError = mods.filter((m) => m.ToolReplayError).length',
    'console.log(JSON.stringify({ loaded: mods.length, withError, distinct: errors.size }))',
  ].join('\n')
  const r = await runProgram(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, timeoutMs: 60_000 })
  assert.equal(r.code, 0, r.out)
  const seen = JSON.parse(r.out.trim().split('\n').at(-1) as string) as { loaded: number; withError: number; distinct: number }
  assert.equal(seen.loaded, subpaths.length)
  assert.ok(seen.withError >= 2, `ToolReplayError is exported by ${seen.withError} subpath(s): the identity check needs two`)
  assert.equal(seen.distinct, 1, 'ToolReplayError is a different class in different subpaths')
})

/** The bare specifiers shipped JavaScript loads: `import … from`, `import(…)`, `createRequire(…)(…)`, reduced to package names. */
function importedPackages(code: string): Set<string> {
  const names = new Set<string>()
  const spec = `["']([@a-z][\\w.@/-]*)["']`
  const forms = [
    new RegExp(`\\bfrom\\s*${spec}`, 'g'),
    new RegExp(`\\bimport\\(\\s*${spec}\\s*\\)`, 'g'),
    new RegExp(`createRequire\\d*\\([^)]*\\)\\(\\s*${spec}\\s*\\)`, 'g'),
  ]
  for (const form of forms) {
    for (const m of code.matchAll(form)) {
      const spec = m[1] as string
      if (spec.startsWith('node:')) continue
      names.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string))
    }
  }
  return names
}

/** Named in text the package writes for the user's project, not loaded by it: a generated msw handlers module, a promoted vitest test. */
const NAMED_NOT_LOADED = new Set(['msw', 'vitest'])

test('"dependencies" are exactly what the shipped code loads: each one used, nothing loaded that is not declared', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-deps-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const r = await runProgram('tar', ['-xzf', await packedTarball(), '-C', dir], { cwd: dir })
  assert.equal(r.code, 0, r.out)
  const pkgDir = join(dir, 'package')
  const loaded = new Set<string>()
  for (const file of filesUnder(pkgDir).filter((f) => /\.[cm]?js$/.test(f))) for (const name of importedPackages(readFileSync(file, 'utf8'))) loaded.add(name)
  const declared = Object.keys((JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies)
  const builtins = new Set(builtinModules)
  assert.deepEqual(
    declared.filter((d) => !loaded.has(d)),
    [],
    'a runtime dependency no shipped file loads: move it to devDependencies',
  )
  assert.deepEqual(
    [...loaded].filter((n) => !declared.includes(n) && !builtins.has(n) && !NAMED_NOT_LOADED.has(n)).sort(),
    [],
    'shipped code loads a package that is not in "dependencies"',
  )
})

test('shipped source maps are whole: every source they name ships or is embedded; no declaration maps to unshipped .ts', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-maps-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const r = await runProgram('tar', ['-xzf', await packedTarball(), '-C', dir], { cwd: dir })
  assert.equal(r.code, 0, r.out)
  const maps = filesUnder(join(dir, 'package')).filter((f) => f.endsWith('.map'))
  assert.ok(maps.length > 10, `${maps.length} source maps`)
  const broken: string[] = []
  for (const map of maps) {
    const m = JSON.parse(readFileSync(map, 'utf8')) as { sources: string[]; sourcesContent?: Array<string | null> }
    m.sources.forEach((source, i) => {
      if (typeof m.sourcesContent?.[i] === 'string') return
      if (!existsSync(join(dirname(map), source))) broken.push(`${map.slice(dir.length + 1)} → ${source}`)
    })
  }
  assert.deepEqual(broken.slice(0, 10), [], `${broken.length} source map entries point at files the package does not ship`)
})

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
}
