import { readFileSync } from 'node:fs'

/**
 * The version in Tool Replay's package.json, found from this file both in a checkout (cli/) and in the
 * compiled package (dist/cli/); '0.0.0' if neither is there.
 */
export function packageVersion(): string {
  for (const up of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown }
      if (pkg.name === 'tool-replay' && typeof pkg.version === 'string') return pkg.version
    } catch {
      // not at this level; try the next one
    }
  }
  return '0.0.0'
}
