/**
 * The package as users install it, for the cold-start and import benchmarks: the tarball e2e tests build
 * (e2e/support/packed-package.ts: `scripts/build.mjs` into a staging copy, `npm pack`, cached by a hash of the sources) installed
 * into a scratch project, itself kept in the temp dir under the tarball's hash so a second run reuses it.
 */
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { packedTarball, scratchProject } from '../../e2e/support/packed-package.ts'

/** A project with the packed tool-replay installed: its directory and the installed CLI's path. */
export async function packedProject(): Promise<{ dir: string; cli: string }> {
  const tarball = await packedTarball()
  const dir = join(tmpdir(), `tool-replay-bench-${basename(dirname(tarball))}`)
  const cli = join(dir, 'node_modules', 'tool-replay', 'bin', 'tr-proxy.js')
  if (!existsSync(cli)) {
    const staging = `${dir}.${process.pid}`
    rmSync(staging, { recursive: true, force: true })
    mkdirSync(staging, { recursive: true })
    await scratchProject(staging, tarball, [])
    rmSync(dir, { recursive: true, force: true })
    renameSync(staging, dir)
  }
  return { dir, cli }
}
