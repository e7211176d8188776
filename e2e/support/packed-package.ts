/**
 * The package as users get it: a clean copy of the sources (no dist/) packed by `npm pack`, whose "prepare"
 * script builds dist/ (scripts/build.mjs, what `npm run build` runs) before packing, as `npm pack`, `npm publish`
 * and a git install all do; then a scratch project that `npm install`s the tarball. The copy is packed in a
 * staging directory, never this checkout, so a test never depends on a dist/ someone built here.
 * The tarball is cached in the temp dir under a hash of everything that goes into it, so CI's runs on three
 * Node versions build it once.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PACKAGE_FOLDERS } from '../../scripts/folders.mjs'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
/** What the packed tarball is built from: its cache key (the package's folders as scripts/folders.mjs declares them). */
const BUILD_DIRS = ['index.ts', ...PACKAGE_FOLDERS, 'bin', 'package.json', 'README.md', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs']

/** Runs a program and resolves with its exit code and output (stdout then stderr); never rejects on a non-zero exit. */
export function runProgram(
  cmd: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { cwd: options.cwd, env: options.env ?? process.env, timeout: options.timeoutMs ?? 180_000, maxBuffer: 32 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code as number) : 1) : 0
        resolve({ code, out: `${stdout}${stderr}` })
      },
    )
  })
}

async function exec(cmd: string, args: string[], options: { cwd: string }): Promise<string> {
  const r = await runProgram(cmd, args, options)
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}:\n${r.out}`)
  return r.out
}

function sourceHash(): string {
  const hash = createHash('sha256')
  const walk = (p: string) => {
    const st = statSync(p)
    if (st.isDirectory()) {
      for (const name of readdirSync(p).sort()) if (name !== 'node_modules' && !name.endsWith('.test.ts')) walk(join(p, name))
    } else {
      hash.update(relative(ROOT, p)).update('\0').update(readFileSync(p)).update('\0')
    }
  }
  for (const d of BUILD_DIRS) walk(join(ROOT, d))
  return hash.digest('hex').slice(0, 16)
}

/** How long a test file waits for another one's build of the same sources before building its own. */
const BUILD_WAIT_MS = 240_000

/**
 * Builds and packs this checkout (cached by content); returns the tarball's path. Test files that ask at once
 * share one build: the first takes a lock directory, the others wait for its tarball (a build is most of a
 * minute of CPU, and two at once on two cores doubled each one's time).
 */
export async function packedTarball(): Promise<string> {
  const cacheDir = join(tmpdir(), `tool-replay-pack-${sourceHash()}`)
  const tarball = join(cacheDir, 'tool-replay.tgz')
  if (existsSync(tarball)) return tarball
  const lock = `${cacheDir}.lock`
  try {
    mkdirSync(lock)
  } catch {
    // Another file is building these sources: wait for its tarball; a lock left by a killed run expires.
    const until = Date.now() + BUILD_WAIT_MS
    while (Date.now() < until && existsSync(lock) && !existsSync(tarball)) await new Promise((r) => setTimeout(r, 500))
    if (existsSync(tarball)) return tarball
  }
  try {
    return await buildTarball(cacheDir, tarball)
  } finally {
    rmSync(lock, { recursive: true, force: true })
  }
}

async function buildTarball(cacheDir: string, tarball: string): Promise<string> {
  const staging = mkdtempSync(join(tmpdir(), 'tr-pack-staging-'))
  try {
    // The sources as a clone has them, without dist/: `npm pack` must build it (package.json "prepare").
    for (const entry of BUILD_DIRS) {
      cpSync(join(ROOT, entry), join(staging, entry), { recursive: true, filter: (src) => !src.includes('/node_modules') })
    }
    // The build's tools (tsc, esbuild) from this checkout's install, as a clone's `npm install` would provide them.
    symlinkSync(join(ROOT, 'node_modules'), join(staging, 'node_modules'), 'dir')
    if (existsSync(join(staging, 'dist'))) throw new Error('the staging copy holds a dist/ before packing')
    const packed = (await exec('npm', ['pack', '--silent', '--pack-destination', staging], { cwd: staging })).trim().split('\n').at(-1) as string
    // Published under the hash name by one rename: a concurrent run sees the whole tarball or none.
    const ready = mkdtempSync(join(tmpdir(), 'tr-pack-ready-'))
    renameSync(join(staging, packed), join(ready, 'tool-replay.tgz'))
    try {
      renameSync(ready, cacheDir)
    } catch {
      rmSync(ready, { recursive: true, force: true }) // another run published it first
    }
    return tarball
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

/**
 * A scratch ESM project in `dir` with the packed package installed from the tarball (dependencies from the
 * npm cache that `npm ci` filled; no install scripts), plus the test frameworks linked from this checkout's
 * devDependencies. Returns what is missing of `frameworks` (not installed here).
 */
export async function scratchProject(dir: string, tarball: string, frameworks: string[]): Promise<string[]> {
  mkdirSync(join(dir, 'node_modules'), { recursive: true })
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }, null, 2)}\n`)
  await exec('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-save', tarball], { cwd: dir })
  return linkFrameworks(dir, frameworks)
}

/** Links test frameworks from this checkout's devDependencies into `dir`'s node_modules; returns the names not installed here. */
export function linkFrameworks(dir: string, frameworks: string[]): string[] {
  const missing: string[] = []
  for (const name of frameworks) {
    const target = join(ROOT, 'node_modules', name)
    if (existsSync(target)) cpLink(target, join(dir, 'node_modules', name))
    else missing.push(name)
  }
  return missing
}

function cpLink(target: string, link: string): void {
  // A directory symlink: the framework and its own dependencies resolve from this checkout.
  rmSync(link, { recursive: true, force: true })
  symlinkSync(target, link, 'dir')
}
